"""`nightowl serve` posts the verdict to PagerDuty, a chat webhook and a generic endpoint.

The three are stand-ins on 127.0.0.1 that record every request they receive; each test asserts on the
bodies and headers that arrived, and a failing endpoint must be retried, then recorded as failed,
without touching the capture.
"""

from __future__ import annotations

import contextlib
import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from nightowl.receiver.capture import Capture, run_capture
from nightowl.receiver.config import ConfigError, load_config
from nightowl.receiver.notify import parse_notify
from nightowl.receiver.payload import sign_pagerduty
from nightowl.receiver.queue import Receiver
from tests.postmortem.bundles import ALERTS
from tests.receiver.outcomes import outcome_of
from tests.receiver.test_serve import (
    SECRET,
    Running,
    bundles,
    capture_first_alert,
    payload,
    serve_factory,
    write_config,
)

PD_KEY = "pd-rest-api-key-for-tests"
HOOK_TOKEN = "hook-bearer-for-tests"
LINK = "https://nightowl.test"


class Recorder:
    """An HTTP server on 127.0.0.1 that keeps every request and answers from a per-path script."""

    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []
        self.script: dict[str, list[int]] = {}  # path -> status codes to answer in turn (last repeats)
        self.gate: dict[str, threading.Event] = {}  # path -> hold the answer until set
        self.arrived = threading.Event()
        recorder = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
                return None

            def do_POST(self) -> None:  # noqa: N802
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                recorder.requests.append(
                    {"path": self.path, "headers": dict(self.headers.items()), "body": json.loads(body)}
                )
                recorder.arrived.set()
                if self.path in recorder.gate:
                    recorder.gate[self.path].wait(20)
                codes = recorder.script.get(self.path, [201])
                code = codes.pop(0) if len(codes) > 1 else codes[0]
                self.send_response(code)
                self.send_header("Content-Length", "2")
                self.end_headers()
                self.wfile.write(b"{}")

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()

    def to(self, path: str) -> list[dict[str, Any]]:
        return [r for r in self.requests if r["path"] == path]


@pytest.fixture
def recorder() -> Iterator[Recorder]:
    rec = Recorder()
    yield rec
    for gate in rec.gate.values():
        gate.set()
    rec.server.shutdown()
    rec.server.server_close()


def notify_config(tmp_path: Path, recorder: Recorder, extra: str = "", workers: int = 2) -> Path:
    path = write_config(tmp_path, workers=workers)
    key = tmp_path / "pd.key"
    key.write_text(PD_KEY + "\n")
    path.write_text(
        path.read_text()
        + f"""
notify:
  link_base: {LINK}/
  attempts: 3
  backoff: 0.01
  timeout: 5
  pagerduty:
    api_url: {recorder.url}/pd
    token_file: {key}
    from: oncall@example.com
  chat:
    url: {recorder.url}/chat
  webhook:
    url_env: TEST_HOOK_URL
    token_env: TEST_HOOK_TOKEN
{extra}"""
    )
    return path


@pytest.fixture
def serving(tmp_path: Path) -> Iterator[Any]:
    yield from serve_factory(tmp_path)


def wait_notified(running: Running, count: int, timeout: float = 20.0) -> list[dict[str, Any]]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        done = [c for c in running.receiver.captures() if c.get("notifications") is not None]
        if len(done) >= count:
            return done
        time.sleep(0.05)
    raise AssertionError("no notification outcome recorded")


def test_a_capture_posts_to_pagerduty_chat_and_webhook(
    serving: Any, recorder: Recorder, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TEST_HOOK_URL", f"{recorder.url}/hook")
    monkeypatch.setenv("TEST_HOOK_TOKEN", HOOK_TOKEN)
    lines: list[str] = []
    running = serving(notify_config(tmp_path, recorder), log=lines.append)
    raw = (ALERTS / "pagerduty-incident-triggered.json").read_bytes()
    status, _ = running.request(
        "POST", "/pagerduty", raw, headers={"X-PagerDuty-Signature": sign_pagerduty(raw, SECRET)}
    )
    assert status == 200
    record = wait_notified(running, 1)[0]
    run_id = bundles(tmp_path)[0].name
    draft = f"{LINK}/captures/{run_id}/postmortem.html"

    (note,) = recorder.to("/pd/incidents/Q2K8W3TQ1X9ZPA/notes")  # the incident whose webhook fired
    assert note["headers"]["Authorization"] == f"Token token={PD_KEY}"
    assert note["headers"]["From"] == "oncall@example.com"
    assert note["headers"]["Accept"] == "application/vnd.pagerduty+json;version=2"
    content = note["body"]["note"]["content"]
    assert "gpu-fell-off-bus (critical) -> reboot-node" in content and "xid79-fallen-off-bus" in content
    assert content.endswith(f"Postmortem draft: {draft}")

    (chat,) = recorder.to("/chat")
    assert "gpu-fell-off-bus" in chat["body"]["text"] and draft in chat["body"]["text"]
    assert chat["body"]["blocks"][0]["type"] == "section" and "reboot-node" in chat["body"]["blocks"][0]["text"]["text"]
    assert chat["body"]["blocks"][1]["elements"][0]["text"] == f"<{draft}|postmortem draft>"
    assert "Authorization" not in chat["headers"]

    (hook,) = recorder.to("/hook")
    assert hook["headers"]["Authorization"] == f"Bearer {HOOK_TOKEN}"
    assert hook["body"]["event"] == "nightowl.capture" and hook["body"]["draft_url"] == draft
    assert hook["body"]["capture"]["verdict"]["id"] == "gpu-fell-off-bus"
    assert hook["body"]["capture"]["run_id"] == run_id

    assert [(n["target"], n["status"], n["attempts"]) for n in record["notifications"]] == [
        ("pagerduty", "sent", 1),
        ("chat", "sent", 1),
        ("webhook", "sent", 1),
    ]
    journal = [json.loads(line) for line in (tmp_path / "bundles" / "captures.jsonl").read_text().splitlines()]
    assert journal[-1]["notifications"] == record["notifications"] and journal[-1]["status"] == "captured"
    assert any("gpu-fell-off-bus (critical) -> reboot-node" in line for line in lines)
    assert any("notified pagerduty sent, chat sent, webhook sent" in line for line in lines)
    # A restarted receiver lists the capture once, with what was notified.
    again = Receiver(load_config(notify_config(tmp_path, recorder)))
    assert [c["status"] for c in again.captures()] == ["captured"]
    assert again.captures()[0]["notifications"] == record["notifications"]


def test_an_alertmanager_alert_without_an_incident_skips_pagerduty(
    serving: Any, recorder: Recorder, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TEST_HOOK_URL", f"{recorder.url}/hook")
    running = serving(notify_config(tmp_path, recorder))
    first = payload("alertmanager-xid-firing.json")
    first["alerts"] = first["alerts"][:1]
    running.request("POST", "/alertmanager", first)
    record = wait_notified(running, 1)[0]
    assert record["notifications"][0]["status"] == "skipped"
    assert "no PagerDuty incident" in record["notifications"][0]["error"]
    assert not recorder.to("/pd/incidents/5c1f2e9a0b3d4c71/notes") and len(recorder.to("/chat")) == 1
    assert "Authorization" not in recorder.to("/hook")[0]["headers"]  # TEST_HOOK_TOKEN unset: no bearer

    # With incident_label, the alert's label names the incident.
    labelled = notify_config(tmp_path / "l", recorder, extra="")
    labelled.write_text(
        labelled.read_text().replace("    from: oncall", "    incident_label: pd_incident\n    from: oncall")
    )
    first["alerts"][0]["labels"]["pd_incident"] = "PABC123"
    running = serving(labelled)
    running.request("POST", "/alertmanager", first)
    wait_notified(running, 1)
    assert len(recorder.to("/pd/incidents/PABC123/notes")) == 1


def test_a_failing_endpoint_is_retried_then_recorded_failed(
    serving: Any, recorder: Recorder, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TEST_HOOK_URL", f"{recorder.url}/hook")
    recorder.script = {
        "/chat": [500],  # always down: retried, then failed
        "/hook": [503, 202],  # down once: the retry gets through
        "/pd/incidents/Q2K8W3TQ1X9ZPA/notes": [400],  # rejected: retrying will not help
    }
    running = serving(notify_config(tmp_path, recorder))
    raw = (ALERTS / "pagerduty-incident-triggered.json").read_bytes()
    running.request("POST", "/pagerduty", raw, headers={"X-PagerDuty-Signature": sign_pagerduty(raw, SECRET)})
    record = wait_notified(running, 1)[0]
    outcome = {n["target"]: n for n in record["notifications"]}
    assert (outcome["chat"]["status"], outcome["chat"]["attempts"], len(recorder.to("/chat"))) == ("failed", 3, 3)
    assert "HTTP 500" in outcome["chat"]["error"]
    assert (outcome["webhook"]["status"], outcome["webhook"]["attempts"], outcome["webhook"]["http_status"]) == (
        "sent",
        2,
        202,
    )
    assert (outcome["pagerduty"]["status"], outcome["pagerduty"]["attempts"]) == ("failed", 1)
    assert len(recorder.to("/pd/incidents/Q2K8W3TQ1X9ZPA/notes")) == 1
    # The capture itself is untouched: captured, with its bundle and verdict.
    assert record["status"] == "captured" and record["verdict"]["id"] == "gpu-fell-off-bus"
    assert (Path(record["bundle"]) / "postmortem.md").is_file()


def test_an_unreachable_endpoint_is_failed_not_raised(tmp_path: Path) -> None:
    import socket

    with socket.socket() as sock:  # a port nobody listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    config = parse_notify({"attempts": 2, "backoff": 0, "chat": {"url": f"http://127.0.0.1:{port}/x"}}, "t")
    from nightowl.receiver.notify import Notifier

    (result,) = Notifier(config).send(outcome_of({"alert": "A", "host": "h"}, "text"))
    assert result["status"] == "failed" and result["attempts"] == 2 and "refused" in result["error"].lower()


def test_notifying_never_holds_up_a_capture(
    serving: Any, recorder: Recorder, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TEST_HOOK_URL", f"{recorder.url}/hook")
    recorder.gate["/chat"] = threading.Event()  # the chat server hangs until the test lets it answer
    config = notify_config(tmp_path, recorder, workers=1)
    config.write_text(config.read_text().replace("  timeout: 5", "  timeout: 30\n  queue: 1"))
    ran: list[str] = []

    def run(capture: Capture, cfg: Any) -> Capture:
        ran.append(capture.alert.fingerprint)
        return run_capture(capture, cfg)

    running = serving(config, run=run)
    burst = payload("alertmanager-xid-firing.json")
    burst["alerts"] = [{**burst["alerts"][0], "fingerprint": f"n{i}"} for i in range(3)]
    for alert in burst["alerts"]:
        running.request("POST", "/alertmanager", dict(burst, alerts=[alert]))
        assert recorder.arrived.wait(20)  # the first announcement is now stuck in the chat server
    running.wait_idle()
    # Every capture finished while the notifier was stuck; the one that found its queue full says so.
    assert ran == ["n0", "n1", "n2"] and len(bundles(tmp_path)) == 3
    full = wait_notified(running, 1)
    # Each target has its own queue: only the stuck chat's was full; the others were posted.
    assert len(full) == 1
    by_target = {n["target"]: n for n in full[0]["notifications"]}
    assert "notify queue full" in by_target["chat"]["error"] and by_target["webhook"]["status"] == "sent"
    recorder.gate["/chat"].set()
    assert len(wait_notified(running, 3)) == 3


def test_notify_config_takes_secrets_from_files_or_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    where = "serve.yaml"
    monkeypatch.setenv("CHAT_URL", "https://chat.example/hook/T0/B0/xyz")
    config = parse_notify({"chat": {"url_env": "CHAT_URL"}}, where)
    assert config.targets[0].url == "https://chat.example/hook/T0/B0/xyz"
    monkeypatch.delenv("CHAT_URL")
    with pytest.raises(ValueError, match=r"serve.yaml: notify.chat: needs url"):
        parse_notify({"chat": {"url_env": "CHAT_URL"}}, where)
    with pytest.raises(ValueError, match=r"notify.pagerduty: needs a REST API key"):
        parse_notify({"pagerduty": {"token_env": "UNSET_FOR_TEST"}}, where)
    with pytest.raises(ValueError, match=r"notify.webhook: token_file: cannot read"):
        parse_notify({"webhook": {"url": "http://h/x", "token_file": str(tmp_path / "missing")}}, where)
    with pytest.raises(ValueError, match="not an http"):
        parse_notify({"webhook": {"url": "file:///etc/passwd"}}, where)
    with pytest.raises(ValueError, match="unknown key"):
        parse_notify({"chat": {"url": "http://h/", "channel": "#x"}}, where)
    path = write_config(tmp_path)
    path.write_text(path.read_text() + "notify:\n  attempts: 0\n")
    with pytest.raises(ConfigError, match=r"serve.yaml: notify: attempts"):
        load_config(path)


def test_the_log_line_and_triage_say_what_prevented_a_verdict(tmp_path: Path) -> None:
    path = write_config(tmp_path)
    path.write_text(
        path.read_text().replace('host: "replay:', 'host: "ssh://root@{{ labels.Hostname }}" #')
        + f"ssh_config: {tmp_path / 'no-such-ssh-config'}\n"
    )
    lines: list[str] = []
    (record,) = capture_first_alert(path, lines.append, timeout=30)
    assert record["status"] == "captured" and record["verdict"] is None and record["host_status"] == "unreachable"
    expected = "no verdict: host xid79-fallen-off-bus unreachable: cannot open transport: ssh config"
    assert record["outcome"].startswith(expected) and "no-such-ssh-config" in record["outcome"]
    assert any(line.startswith(f"GpuXidErrors on xid79-fallen-off-bus: {expected}") for line in lines)

    from click.testing import CliRunner

    from nightowl.cli.main import main

    result = CliRunner().invoke(
        main, ["triage", "--alert", str(ALERTS / "alertmanager-xid-firing.json"), "--config", str(path)]
    )
    assert f"GpuXidErrors -> xid on xid79-fallen-off-bus: {expected}" in result.output
    assert "NodeFilesystemAlmostFull -> - on -: ignored: no rule matches" in result.output


# --- issue 30, items 8 and 13: secrets, redirects, deadlines, one target never blocks another --------
def _collect(notifier: Any) -> tuple[Any, list[list[dict[str, Any]]], threading.Event]:
    got: list[list[dict[str, Any]]] = []
    event = threading.Event()

    def done(results: list[dict[str, Any]]) -> None:
        got.append(results)
        event.set()

    return done, got, event


def test_a_secret_with_a_trailing_newline_is_stripped_and_posted(
    serving: Any, recorder: Recorder, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capfd: Any
) -> None:
    # A Kubernetes Secret made from a file ends in a newline; as a header it killed the notifier.
    monkeypatch.setenv("TEST_HOOK_URL", f"{recorder.url}/hook\n")
    monkeypatch.setenv("TEST_HOOK_TOKEN", HOOK_TOKEN + "\n")
    running = serving(notify_config(tmp_path, recorder))
    first = payload("alertmanager-xid-firing.json")
    running.request("POST", "/alertmanager", dict(first, alerts=first["alerts"][:1]))
    (record,) = wait_notified(running, 1)
    by_target = {n["target"]: n for n in record["notifications"]}
    assert by_target["webhook"]["status"] == "sent"
    (hook,) = recorder.to("/hook")
    assert hook["headers"]["Authorization"] == f"Bearer {HOOK_TOKEN}"
    assert HOOK_TOKEN not in capfd.readouterr().err


def test_a_post_that_raises_never_stops_later_ones_nor_shows_the_secret(recorder: Recorder) -> None:
    from nightowl.receiver.notify import Notifier, NotifyConfig, Target

    secret = "s3cret-with\nline-break"
    bad = Target("webhook", f"{recorder.url}/bad", token=secret)  # an inner line break: invalid header
    good = Target("chat", f"{recorder.url}/chat")
    notifier = Notifier(NotifyConfig(targets=(bad, good), attempts=1, timeout_s=5))
    done, got, event = _collect(notifier)
    notifier.start()
    try:
        assert notifier.submit(outcome_of({"alert": "A", "host": "h"}, "one"), done)
        assert event.wait(20)
        event.clear()
        assert notifier.submit(outcome_of({"alert": "B", "host": "h"}, "two"), done)
        assert event.wait(20), "the notifier died after the first post raised"
    finally:
        notifier.stop(timeout=5)
    for results in got:
        assert results[0]["status"] == "failed" and results[1]["status"] == "sent"
        assert "s3cret" not in json.dumps(results)
    assert len(recorder.to("/chat")) == 2 and not recorder.to("/bad")


class _Scripted:
    """A raw TCP endpoint that answers every connection with ``answer(conn)``."""

    def __init__(self, answer: Any) -> None:
        import socket

        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(8)
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}"
        self.stop = threading.Event()
        self.connections = 0

        def serve() -> None:
            while not self.stop.is_set():
                try:
                    conn, _ = self.sock.accept()
                except OSError:
                    return
                self.connections += 1
                threading.Thread(target=answer, args=(conn, self.stop), daemon=True).start()

        self.thread = threading.Thread(target=serve, daemon=True)
        self.thread.start()

    def close(self) -> None:
        """Stop accepting for good. shutdown() wakes the blocked accept(): a bare close() leaves the thread
        waiting on the fd number, and the next socket given that number (another test's server) would have
        its connections accepted here."""
        import socket

        self.stop.set()
        with contextlib.suppress(OSError):
            self.sock.shutdown(socket.SHUT_RDWR)
        self.sock.close()
        self.thread.join(timeout=5)


def _drip(conn: Any, stop: threading.Event) -> None:
    """Reads the request, then sends a header one byte at a time, well inside any per-read timeout."""
    conn.recv(65536)
    conn.sendall(b"HTTP/1.1 200 OK\r\n")
    while not stop.wait(0.2):
        try:
            conn.sendall(b"X")
        except OSError:
            return


def test_a_post_has_a_deadline_not_a_per_read_timeout() -> None:
    from nightowl.receiver.notify import post_json

    endpoint = _Scripted(_drip)
    outcome: list[BaseException | int] = []

    def post() -> None:
        try:
            outcome.append(post_json(endpoint.url + "/x", {}, {"a": 1}, timeout=1.0))
        except BaseException as exc:  # noqa: BLE001 - the test reads what happened
            outcome.append(exc)

    worker = threading.Thread(target=post, daemon=True)
    worker.start()
    worker.join(15)  # a watchdog, far beyond the 1 s deadline: the old per-read timeout never fired
    endpoint.close()
    assert not worker.is_alive(), "post_json drip-fed past its deadline"
    assert isinstance(outcome[0], OSError) and "within 1 s" in str(outcome[0])


def test_a_redirect_is_never_followed_with_the_credentials(recorder: Recorder) -> None:
    from nightowl.receiver.notify import Notifier, NotifyConfig, Target

    def redirect(conn: Any, stop: threading.Event) -> None:
        conn.recv(65536)
        conn.sendall(
            f"HTTP/1.1 307 Temporary Redirect\r\nLocation: {recorder.url}/stolen\r\n"
            "Content-Length: 0\r\nConnection: close\r\n\r\n".encode()
        )
        conn.close()

    endpoint = _Scripted(redirect)
    try:
        target = Target("pagerduty", endpoint.url, token=PD_KEY, sender="oncall@example.com")
        notifier = Notifier(NotifyConfig(targets=(target,), attempts=3, backoff_s=0))
        (result,) = notifier.send(
            outcome_of({"alert": "A", "host": "h", "source": "pagerduty", "fingerprint": "P1"}, "t")
        )
    finally:
        endpoint.close()
    assert not recorder.requests, "the PagerDuty key was sent on to the redirect's host"
    assert result["status"] == "failed" and result["attempts"] == 1
    assert "redirect" in result["error"] and "127.0.0.1" in result["error"]


def test_one_hanging_target_never_holds_up_the_others(recorder: Recorder) -> None:
    from nightowl.receiver.notify import Notifier, NotifyConfig, Target

    recorder.gate["/chat"] = threading.Event()  # chat hangs until the test lets it answer
    targets = (Target("chat", f"{recorder.url}/chat"), Target("webhook", f"{recorder.url}/hook"))
    notifier = Notifier(NotifyConfig(targets=targets, attempts=1, timeout_s=60))
    notifier.start()
    try:
        for name in ("A", "B", "C"):
            notifier.submit(outcome_of({"alert": name, "host": "h"}, "t"), lambda _results: None)
        deadline = time.monotonic() + 20  # a watchdog: the webhook's three posts need no chat answer
        while len(recorder.to("/hook")) < 3 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert len(recorder.to("/hook")) == 3, "a hanging chat endpoint held up the webhook"
        assert len(recorder.to("/chat")) == 1
    finally:
        recorder.gate["/chat"].set()
        notifier.stop(timeout=5)
