"""`nightowl serve` over real HTTP on 127.0.0.1, with Alertmanager's and PagerDuty's payload formats."""

from __future__ import annotations

import json
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from nightowl.receiver.capture import Capture, run_capture, triage_alert_payload
from nightowl.receiver.config import ConfigError, load_config
from nightowl.receiver.http import make_server
from nightowl.receiver.payload import parse_payload, sign_pagerduty
from nightowl.receiver.queue import Receiver
from nightowl.receiver.rules import render_host
from tests.postmortem.bundles import ALERTS, HOSTS

TOKEN = "t0k3n-for-tests-only"
SECRET = "pd-signing-secret"


def write_config(tmp_path: Path, workers: int = 2, queue: int = 8, on_resolved: bool = False) -> Path:
    tmp_path.mkdir(parents=True, exist_ok=True)
    path = tmp_path / "serve.yaml"
    path.write_text(f"""
out: {tmp_path / "bundles"}
token: {TOKEN}
pagerduty_secret: {SECRET}
workers: {workers}
queue: {queue}
rules:
  - name: gpu-xid
    match: ["alertname=GpuXidErrors"]
    runbook: xid
    host: "replay:{HOSTS}/{{{{ labels.Hostname }}}}"
    on_resolved: {str(on_resolved).lower()}
  - name: pagerduty-xid
    match: ["event_type=incident.triggered", "title=~.*GpuXidErrors.*"]
    runbook: xid
    host: "replay:{HOSTS}/{{{{ labels.title.split()[2] }}}}"
""")
    return path


class Running:
    def __init__(self, receiver: Receiver) -> None:
        self.receiver = receiver
        self.server = make_server(receiver, "127.0.0.1", 0)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)

    def request(
        self, method: str, path: str, body: Any = None, token: str | None = TOKEN, headers: dict[str, str] | None = None
    ) -> tuple[int, Any]:
        data = body if isinstance(body, bytes) else (json.dumps(body).encode() if body is not None else None)
        req = urllib.request.Request(self.url + path, data=data, method=method)
        if token is not None:
            req.add_header("Authorization", f"Bearer {token}")
        for name, value in (headers or {}).items():
            req.add_header(name, value)
        try:
            with urllib.request.urlopen(req, timeout=20) as response:
                status, raw = response.status, response.read().decode()
        except urllib.error.HTTPError as exc:
            status, raw = exc.code, exc.read().decode()
        try:
            return status, json.loads(raw)
        except ValueError:
            return status, raw

    def wait_idle(self, timeout: float = 20.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if (
                self.receiver.waiting() == 0
                and self.receiver.busy == 0
                and not any(c["status"] in ("queued", "running") for c in self.receiver.captures())
            ):
                return
            time.sleep(0.05)
        raise AssertionError("captures did not finish")


@pytest.fixture
def serve(tmp_path: Path) -> Iterator[Any]:
    yield from serve_factory(tmp_path)


def serve_factory(tmp_path: Path) -> Iterator[Any]:
    """Start receivers over HTTP on 127.0.0.1 (yields the start function; stops them all after)."""
    started: list[Running] = []

    def start(config_path: Path | None = None, run: Any = None, log: Any = None) -> Running:
        receiver = Receiver(load_config(config_path or write_config(tmp_path)), run=run, log=log)
        receiver.start()
        running = Running(receiver)
        running.thread.start()
        started.append(running)
        return running

    yield start
    for running in started:
        running.server.shutdown()
        running.server.server_close()
        running.receiver.stop(timeout=5)


def payload(name: str) -> dict[str, Any]:
    return json.loads((ALERTS / name).read_text())


def local_rule_config(tmp_path: Path, rule: str, runbook_file: str, runbook_text: str, settings: str = "") -> Path:
    """serve.yaml whose one rule sends GpuXidErrors to a runbook (written beside it) run on this machine."""
    runbook = tmp_path / runbook_file
    runbook.write_text(runbook_text)
    config = tmp_path / "serve.yaml"
    config.write_text(
        f"out: {tmp_path / 'bundles'}\ntoken: {TOKEN}\n{settings}rules:\n"
        f"  - {{name: {rule}, match: [alertname=GpuXidErrors], runbook: {runbook}, host: local}}\n"
    )
    return config


def capture_first_alert(config_path: Path, log: Any, timeout: float = 60) -> list[dict[str, Any]]:
    """The captures of a receiver (no HTTP) given the firing payload's first alert, once it has finished."""
    receiver = Receiver(load_config(config_path), log=log)
    receiver.start()
    first = payload("alertmanager-xid-firing.json")
    receiver.submit(parse_payload(dict(first, alerts=first["alerts"][:1])))
    deadline = time.monotonic() + timeout
    while receiver.captures()[0]["status"] in ("queued", "running") and time.monotonic() < deadline:
        time.sleep(0.05)
    receiver.stop(timeout=5)
    return receiver.captures()


def bundles(tmp_path: Path) -> list[Path]:
    folder = tmp_path / "bundles"
    return sorted(p for p in folder.iterdir() if p.is_dir() and not p.name.startswith(".")) if folder.exists() else []


def test_firing_payload_with_several_alerts_captures_each_matching_one(serve: Any, tmp_path: Path) -> None:
    running = serve()
    status, body = running.request("POST", "/alertmanager", payload("alertmanager-xid-firing.json"))
    assert status == 200
    assert body == {"received": 3, "counts": {"ignored": 1, "queued": 2}, "statuses": ["queued", "queued", "ignored"]}
    outcomes = {a["fingerprint"]: a for a in running.receiver.captures()}
    assert outcomes["5c1f2e9a0b3d4c71"]["host"] == "xid79-fallen-off-bus"
    assert outcomes["0d4471b2c9e8a613"]["status"] == "ignored"  # NodeFilesystemAlmostFull: no rule
    running.wait_idle()
    made = bundles(tmp_path)
    assert len(made) == 2
    by_host = {}
    for bundle in made:
        manifest = json.loads((bundle / "manifest.json").read_text())
        verdicts = json.loads((bundle / "verdicts.json").read_text())
        by_host[verdicts["hosts"][0]["host"]] = (manifest, verdicts, bundle)
    manifest, verdicts, bundle = by_host["xid79-fallen-off-bus"]
    assert manifest["alert"]["name"] == "GpuXidErrors" and manifest["alert"]["starts_at"] == "2024-04-05T21:30:09.482Z"
    assert manifest["alert"]["rule"] == "gpu-xid" and manifest["alert"]["ends_at"] is None
    assert verdicts["hosts"][0]["verdict"]["id"] == "gpu-fell-off-bus"
    assert by_host["xid48-xid64-dbe"][1]["hosts"][0]["verdict"]["id"] == "gpu-failed-to-initialise"
    draft = (bundle / "postmortem.md").read_text()
    assert "after alert `GpuXidErrors`" in draft.splitlines()[0]
    assert "Fired: 2024-04-05 21:30:09.482Z (alertmanager clock)" in draft
    assert "| detection | alert `GpuXidErrors` started firing |" in draft
    # The index lists both captures with links to their drafts, and the links work.
    status, page = running.request("GET", "/")
    assert status == 200 and page.count("/postmortem.html") == 2 and "NodeFilesystemAlmostFull" in page
    status, html = running.request("GET", f"/captures/{bundle.name}/postmortem.html")
    assert status == 200 and "<svg" in html and "gpu-fell-off-bus" in html
    assert running.request("GET", "/captures/..%2Fetc/postmortem.md")[0] == 404


def test_duplicate_delivery_runs_once(serve: Any, tmp_path: Path) -> None:
    running = serve()
    first = payload("alertmanager-xid-firing.json")
    first["alerts"] = first["alerts"][:1]
    assert running.request("POST", "/alertmanager", first)[1]["statuses"] == ["queued"]
    running.wait_idle()
    status, body = running.request("POST", "/alertmanager", first)  # Alertmanager's group_interval resend
    assert status == 200 and body["statuses"] == ["duplicate"]
    running.wait_idle()
    assert len(bundles(tmp_path)) == 1
    journal = [json.loads(line) for line in (tmp_path / "bundles" / "captures.jsonl").read_text().splitlines()]
    assert [e["status"] for e in journal] == ["queued", "captured", "duplicate"]
    assert journal[0]["id"] == journal[1]["id"] != journal[2]["id"]  # one capture: queued, then captured


def test_resolved_alerts_are_ignored_unless_a_rule_opts_in(serve: Any, tmp_path: Path) -> None:
    running = serve()
    body = running.request("POST", "/alertmanager", payload("alertmanager-xid-resolved.json"))[1]
    assert body["statuses"] == ["ignored"] and "on_resolved" in running.receiver.captures()[0]["reason"]
    opted = serve(write_config(tmp_path / "opt", on_resolved=True))
    assert opted.request("POST", "/alertmanager", payload("alertmanager-xid-resolved.json"))[1]["statuses"] == [
        "queued"
    ]
    opted.wait_idle()
    bundle = bundles(tmp_path / "opt")[0]
    assert json.loads((bundle / "manifest.json").read_text())["alert"]["status"] == "resolved"
    assert "| repair | alert `GpuXidErrors` resolved |" in (bundle / "postmortem.md").read_text()


def test_token_is_required(serve: Any) -> None:
    running = serve()
    body = payload("alertmanager-xid-firing.json")
    assert running.request("POST", "/alertmanager", body, token=None)[0] == 401
    assert running.request("POST", "/alertmanager", body, token="wrong")[0] == 401
    assert running.request("GET", "/", token=None)[0] == 401
    status, health = running.request("GET", "/healthz", token=None)
    assert status == 200 and health["status"] == "ok" and health["workers"] == 2
    assert (
        running.request("POST", "/alertmanager", b"{not json", headers={"Content-Type": "application/json"})[0] == 400
    )
    assert running.receiver.captures() == []  # nothing was let in


def test_pagerduty_signature(serve: Any, tmp_path: Path) -> None:
    running = serve()
    raw = (ALERTS / "pagerduty-incident-triggered.json").read_bytes()
    assert running.request("POST", "/pagerduty", raw, headers={"X-PagerDuty-Signature": "v1=" + "0" * 64})[0] == 401
    assert running.request("POST", "/pagerduty", raw)[0] == 401  # no signature at all
    rotated = f"v1={'f' * 64},{sign_pagerduty(raw, SECRET)}"  # two secrets during a rotation
    status, body = running.request("POST", "/pagerduty", raw, headers={"X-PagerDuty-Signature": rotated})
    assert status == 200 and body["statuses"] == ["queued"]
    assert running.receiver.captures()[0]["rule"] == "pagerduty-xid"
    running.wait_idle()
    manifest = json.loads((bundles(tmp_path)[0] / "manifest.json").read_text())
    assert manifest["alert"]["source"] == "pagerduty" and manifest["alert"]["fingerprint"] == "Q2K8W3TQ1X9ZPA"


def test_a_burst_larger_than_the_queue_is_recorded_not_captured(serve: Any, tmp_path: Path) -> None:
    gate, entered = threading.Event(), threading.Event()

    def slow_run(capture: Capture, config: Any) -> Capture:
        entered.set()
        gate.wait(10)
        return run_capture(capture, config)

    running = serve(write_config(tmp_path, workers=1, queue=2), run=slow_run)
    burst = payload("alertmanager-xid-firing.json")
    template = burst["alerts"][0]
    burst["alerts"] = [{**template, "fingerprint": f"burst{i:02d}"} for i in range(6)]
    first = dict(burst, alerts=burst["alerts"][:1])
    assert running.request("POST", "/alertmanager", first)[1]["statuses"] == ["queued"]
    assert entered.wait(10)  # the one worker is now busy
    body = running.request("POST", "/alertmanager", dict(burst, alerts=burst["alerts"][1:]))[1]
    statuses = body["statuses"]
    assert statuses == ["queued", "queued", "not_captured", "not_captured", "not_captured"]
    assert all("queue full" in c["reason"] for c in running.receiver.captures()[:3])
    gate.set()
    running.wait_idle()
    assert len(bundles(tmp_path)) == 3
    # A redelivery of a dropped alert is not a duplicate: it gets its chance once there is room.
    again = dict(burst, alerts=burst["alerts"][3:4])
    assert running.request("POST", "/alertmanager", again)[1]["statuses"] == ["queued"]
    running.wait_idle()
    journal = (tmp_path / "bundles" / "captures.jsonl").read_text()
    assert journal.count('"not_captured"') == 3


def test_triage_alert_payload_runs_now(tmp_path: Path) -> None:
    config = load_config(write_config(tmp_path))
    results = triage_alert_payload(payload("alertmanager-xid-firing.json"), config)
    assert [r.status for r in results] == ["captured", "captured", "ignored"]
    assert results[0].verdict["action"] == "reboot-node" and Path(results[0].bundle).is_dir()


def test_labels_cannot_change_the_host_scheme(tmp_path: Path) -> None:
    config = load_config(write_config(tmp_path))
    alert = parse_payload(payload("alertmanager-xid-firing.json"))[0]
    assert render_host(config.rules[0], alert) == f"replay:{HOSTS}/xid79-fallen-off-bus"
    rule = config.rules[0].__class__("r", (), "xid", "ssh://root@{{ labels.Hostname }}")
    for bad in ("x; rm -rf /", "-oProxyCommand=evil", "../../etc"):
        hostile = alert.__class__(**{**alert.__dict__, "labels": {**alert.labels, "Hostname": bad}})
        with pytest.raises(ValueError):
            render_host(rule if bad != "../../etc" else config.rules[0], hostile)
    local = config.rules[0].__class__("r", (), "xid", "{{ labels.Hostname }}")
    as_replay = alert.__class__(**{**alert.__dict__, "labels": {"Hostname": "replay:/etc"}})
    with pytest.raises(ValueError, match="RFC 1123"):
        render_host(local, as_replay)
    as_local = alert.__class__(**{**alert.__dict__, "labels": {"Hostname": "LOCAL"}})
    with pytest.raises(ValueError, match="may not turn"):
        render_host(local, as_local)


def test_config_errors_name_the_file_and_key(tmp_path: Path) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text("token: x\nrules:\n  - match: ['alertname=~(']\n    runbook: xid\n    host: h\n")
    with pytest.raises(ConfigError, match=r"bad.yaml: rules\[0\]"):
        load_config(path)
    path.write_text("token: x\nrules:\n  - {match: [a=b], runbook: no-such-runbook, host: h}\n")
    with pytest.raises(ConfigError, match="no-such-runbook"):
        load_config(path)
    path.write_text("rules:\n  - {match: [a=b], runbook: xid, host: h}\n")
    with pytest.raises(ConfigError, match="bearer token"):
        load_config(path)


def test_the_example_config_loads(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NIGHTOWL_PAGERDUTY_SECRET", "a,b")
    monkeypatch.setenv("NIGHTOWL_PAGERDUTY_API_TOKEN", "pd-key")
    token, chat = tmp_path / "token", tmp_path / "chat.url"
    token.write_text("s3cret-of-real-strength\n")
    chat.write_text("https://chat.example/hooks/T0/B0/x\n")
    text = (ALERTS / "serve.yaml").read_text().replace("/etc/nightowl/serve.token", str(token))
    text = text.replace("/etc/nightowl/chat-webhook.url", str(chat))
    (tmp_path / "serve.yaml").write_text(text)
    config = load_config(tmp_path / "serve.yaml", tmp_path / "out")
    assert [r.runbook for r in config.rules] == ["xid", "node-health", "engine-start", "xid"]
    assert (
        config.token == "s3cret-of-real-strength" and config.pagerduty_secrets == ("a", "b") and config.queue_size == 16
    )
    assert [(t.kind, t.token) for t in config.notify.targets] == [
        ("pagerduty", "pd-key"),
        ("chat", None),
        ("webhook", None),
    ]
    assert config.notify.targets[1].url == "https://chat.example/hooks/T0/B0/x" and config.session_hours == 12


def test_the_example_config_shows_every_key() -> None:
    from nightowl.receiver.config import CONFIG_KEYS, RULE_KEYS
    from nightowl.receiver.notify import NOTIFY_KEYS, TARGET_KEYS

    text = (ALERTS / "serve.yaml").read_text()
    for key in CONFIG_KEYS | RULE_KEYS | NOTIFY_KEYS | frozenset().union(*TARGET_KEYS.values()):
        assert f"{key}:" in text or f"{key} (" in text or f"{key}," in text or f" {key}" in text, key
