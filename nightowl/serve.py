"""`nightowl serve`: capture evidence the moment an alert fires.

An HTTP receiver (stdlib ``ThreadingHTTPServer``) takes Alertmanager and PagerDuty v3 webhooks,
maps each firing alert to a runbook and host by the config's rules, and queues a capture. A fixed
pool of workers runs them through ``run_runbook``; the queue is bounded, so an alert storm costs
at most ``workers`` runs at a time and ``queue`` waiting, and every alert beyond that is recorded
as not captured, with the reason. The same alert delivered again (same fingerprint and start
time) runs once. Every outcome goes to ``<out>/captures.jsonl``.
"""

from __future__ import annotations

import hmac
import json
import queue
import threading
import time
from collections import OrderedDict, deque
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from html import escape
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from nightowl.alerts import (
    Alert,
    ServeConfig,
    host_name,
    parse_payload,
    render_host,
    render_params,
    verify_pagerduty_signature,
)

MAX_BODY = 1 << 20  # Alertmanager truncates at max_alerts; a megabyte is hundreds of alerts
RECENT = 200
SEEN_CAP = 10000
JOURNAL = "captures.jsonl"


@dataclass
class Capture:
    """One alert's fate: ignored, duplicate, not captured (and why), or the bundle it produced."""

    alert: Alert
    received_at: float
    status: str = "queued"  # queued | running | captured | failed | not_captured | ignored | duplicate
    reason: str | None = None
    rule: str | None = None
    runbook: str | None = None
    host: str | None = None
    host_spec: str | None = None
    params: dict[str, Any] = field(default_factory=dict)
    bundle: str | None = None
    verdict: dict[str, Any] | None = None
    host_status: str | None = None
    started_at: float | None = None
    finished_at: float | None = None

    def manifest_alert(self) -> dict[str, Any]:
        """The ``alert`` object written to the bundle's manifest (see the module docstring of postmortem)."""
        from nightowl.redact import scrub_secrets

        record = self.alert.record()
        for key in ("labels", "annotations"):
            record[key] = {k: scrub_secrets(v) for k, v in record[key].items()}
        record.update(
            received_at=self.received_at,
            rule=self.rule,
            runbook=self.runbook,
            host=self.host,
            host_spec=self.host_spec,
            queued_s=round(self.started_at - self.received_at, 3) if self.started_at else None,
        )
        return record

    def to_json(self) -> dict[str, Any]:
        return {
            "alert": self.alert.name,
            "source": self.alert.source,
            "alert_status": self.alert.status,
            "fingerprint": self.alert.fingerprint,
            "starts_at": self.alert.starts_at,
            "dedupe_key": list(self.alert.dedupe_key),
            "received_at": self.received_at,
            "status": self.status,
            "reason": self.reason,
            "rule": self.rule,
            "runbook": self.runbook,
            "host": self.host,
            "bundle": self.bundle,
            "run_id": Path(self.bundle).name if self.bundle else None,
            "verdict": self.verdict,
            "host_status": self.host_status,
            "started_at": self.started_at,
            "finished_at": self.finished_at,
        }


def plan_capture(alert: Alert, config: ServeConfig, received_at: float) -> Capture:
    """Match the rules; a Capture that is ``queued`` (ready to run) or says why it will not run."""
    capture = Capture(alert, received_at)
    rule = config.rule_for(alert)
    if rule is None:
        capture.status, capture.reason = "ignored", "no rule matches this alert's labels"
        return capture
    capture.rule, capture.runbook = rule.name, rule.runbook
    if alert.status != "firing" and not (alert.status == "resolved" and rule.on_resolved):
        capture.status = "ignored"
        capture.reason = (
            f"{alert.status} alert; rule {rule.name} does not opt in (on_resolved: true)"
            if alert.status == "resolved"
            else f"event {alert.status} is neither firing nor resolved"
        )
        return capture
    try:
        capture.host_spec = render_host(rule, alert)
        capture.params = render_params(rule, alert)
    except Exception as exc:  # noqa: BLE001 - a bad template or label is this alert's problem only
        capture.status, capture.reason = "not_captured", f"cannot name the host: {exc}"
        return capture
    capture.host = host_name(capture.host_spec)
    return capture


def run_capture(capture: Capture, config: ServeConfig, lookup: Callable[[str], Any] | None = None) -> Capture:
    """Run the rule's runbook on the alert's host now; the bundle carries the alert in its manifest."""
    from nightowl import runbooks
    from nightowl.collectors import get_collector
    from nightowl.engine.runner import RunOptions
    from nightowl.engine.session import run_runbook
    from nightowl.postmortem import render_bundle
    from nightowl.redact import scrub_secrets
    from nightowl.transports import open_transport

    capture.started_at = time.time()
    try:
        loaded = runbooks.load(str(capture.runbook))
        options = RunOptions(params=loaded.resolve_params(capture.params), allow_invasive=config.allow_invasive)
        spec = str(capture.host_spec)
        ssh_options = None if spec == "local" or spec.startswith("replay:") else _ssh_options(config)
        transports = {str(capture.host): lambda: open_transport(spec, ssh_options)}
        runs, bundle = run_runbook(
            loaded,
            transports,
            lookup or get_collector,  # type: ignore[arg-type]
            options,
            config.out_dir,
            forks=1,
            render_postmortem=render_bundle,
            redact=scrub_secrets,
            extra_manifest={"alert": capture.manifest_alert()},
        )
    except Exception as exc:  # noqa: BLE001 - the receiver keeps serving whatever one capture does
        capture.status, capture.reason = "failed", f"{type(exc).__name__}: {exc}"
    else:
        capture.status, capture.bundle = "captured", str(bundle)
        capture.verdict, capture.host_status = runs[0].verdict, runs[0].status
    capture.finished_at = time.time()
    return capture


def _ssh_options(config: ServeConfig) -> Any:
    from nightowl.transports.ssh import SSHOptions

    return SSHOptions(known_hosts=config.known_hosts, ssh_config=config.ssh_config)


def triage_alert_payload(
    payload: Any, config: ServeConfig, lookup: Callable[[str], Any] | None = None
) -> list[Capture]:
    """`nightowl triage --alert FILE`: what the receiver would do with this payload, done now, in order."""
    received_at = time.time()
    results = []
    for alert in parse_payload(payload):
        capture = plan_capture(alert, config, received_at)
        results.append(run_capture(capture, config, lookup) if capture.status == "queued" else capture)
    return results


class Receiver:
    """The bounded queue, the worker pool, de-duplication and the journal, apart from HTTP."""

    def __init__(
        self,
        config: ServeConfig,
        run: Callable[[Capture, ServeConfig], Capture] | None = None,
        log: Callable[[str], None] | None = None,
    ) -> None:
        self.config = config
        self._run = run or run_capture
        self._log = log or (lambda _message: None)
        self._queue: queue.Queue[Capture | None] = queue.Queue(maxsize=max(1, config.queue_size))
        self._lock = threading.Lock()
        self._seen: OrderedDict[tuple[str, ...], float] = OrderedDict()
        self.recent: deque[Capture | dict[str, Any]] = deque(maxlen=RECENT)
        self.busy = 0
        self._threads: list[threading.Thread] = []
        config.out_dir.mkdir(parents=True, exist_ok=True)
        self._load_journal()

    # -- lifecycle ----------------------------------------------------------------------------
    def start(self) -> None:
        for index in range(self.config.workers):
            thread = threading.Thread(target=self._work, name=f"capture-{index}", daemon=True)
            thread.start()
            self._threads.append(thread)

    def stop(self, timeout: float = 30.0) -> None:
        deadline = time.monotonic() + timeout
        for _ in self._threads:
            try:
                self._queue.put(None, timeout=max(0.1, deadline - time.monotonic()))
            except queue.Full:
                break
        for thread in self._threads:
            thread.join(max(0.1, deadline - time.monotonic()))

    # -- intake ---------------------------------------------------------------------------------
    def submit(self, alerts: list[Alert], received_at: float | None = None) -> list[Capture]:
        received_at = time.time() if received_at is None else received_at
        return [self._admit(plan_capture(alert, self.config, received_at)) for alert in alerts]

    def _admit(self, capture: Capture) -> Capture:
        key = capture.alert.dedupe_key
        with self._lock:
            if capture.status == "queued" and key in self._seen:
                capture.status = "duplicate"
                first = time.strftime("%H:%M:%S", time.gmtime(self._seen[key]))
                capture.reason = f"same fingerprint and start already received at {first}Z"
            elif capture.status == "queued":
                try:
                    self._queue.put_nowait(capture)
                except queue.Full:
                    capture.status = "not_captured"
                    capture.reason = (
                        f"queue full: {self._queue.qsize()} waiting and {self.busy} of "
                        f"{self.config.workers} worker(s) busy (raise `queue` or `workers`)"
                    )
                else:
                    self._remember(key, capture.received_at)
            self.recent.append(capture)
            # What was decided at admission: a worker may take the capture the moment the lock is released.
            admitted = replace(capture)
        if admitted.status != "queued":
            self._journal(capture)
        self._log(
            f"{admitted.alert.name} [{admitted.alert.status}] -> {admitted.status}"
            + (f": {admitted.reason}" if admitted.reason else f" ({admitted.runbook} on {admitted.host})")
        )
        return admitted

    def _remember(self, key: tuple[str, ...], when: float) -> None:
        self._seen[key] = when
        while len(self._seen) > SEEN_CAP:
            self._seen.popitem(last=False)

    # -- work -----------------------------------------------------------------------------------
    def _work(self) -> None:
        while True:
            capture = self._queue.get()
            if capture is None:
                return
            with self._lock:
                self.busy += 1
                capture.status = "running"
            try:
                self._run(capture, self.config)
            except Exception as exc:  # noqa: BLE001 - a worker never dies
                capture.status, capture.reason = "failed", f"{type(exc).__name__}: {exc}"
            finally:
                with self._lock:
                    self.busy -= 1
            self._journal(capture)
            self._log(f"{capture.alert.name}: {capture.status} {capture.bundle or capture.reason or ''}")

    def waiting(self) -> int:
        return self._queue.qsize()

    # -- journal ----------------------------------------------------------------------------------
    def _journal(self, capture: Capture) -> None:
        line = json.dumps(capture.to_json(), default=str)
        with self._lock, (self.config.out_dir / JOURNAL).open("a") as handle:
            handle.write(line + "\n")

    def _load_journal(self) -> None:
        path = self.config.out_dir / JOURNAL
        if not path.exists():
            return
        for line in path.read_text(errors="replace").splitlines()[-RECENT:]:
            try:
                entry = json.loads(line)
            except ValueError:
                continue
            self.recent.append(entry)
            if entry.get("status") in ("captured", "failed") and entry.get("dedupe_key"):
                self._remember(tuple(entry["dedupe_key"]), float(entry.get("received_at") or 0))

    def captures(self) -> list[dict[str, Any]]:
        with self._lock:
            items = list(self.recent)
        return [c.to_json() if isinstance(c, Capture) else c for c in reversed(items)]


# --- HTTP --------------------------------------------------------------------------------------
class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True


def make_server(receiver: Receiver, host: str = "127.0.0.1", port: int = 9797) -> ThreadingHTTPServer:
    import socket

    server_class: type[ThreadingHTTPServer] = _Server
    if ":" in host:
        server_class = type("_Server6", (_Server,), {"address_family": socket.AF_INET6})
    return server_class((host.strip("[]"), port), make_handler(receiver))


def make_handler(receiver: Receiver) -> type[BaseHTTPRequestHandler]:
    config = receiver.config

    class Handler(BaseHTTPRequestHandler):
        server_version = "nightowl"
        timeout = 15  # a client that stops sending mid-request frees its thread

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the stdlib's name
            return None

        def _send(
            self, code: int, body: str, content_type: str = "application/json", headers: dict[str, str] | None = None
        ) -> None:
            data = body.encode()
            self.send_response(code)
            self.send_header("Content-Type", f"{content_type}; charset=utf-8")
            self.send_header("Content-Length", str(len(data)))
            self.send_header("Cache-Control", "no-store")
            for name, value in (headers or {}).items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(data)

        def _json(self, code: int, payload: Any, headers: dict[str, str] | None = None) -> None:
            self._send(code, json.dumps(payload, default=str, indent=1) + "\n", headers=headers)

        def _authorized(self) -> bool:
            scheme, _, offered = (self.headers.get("Authorization") or "").partition(" ")
            return (
                bool(config.token)
                and scheme.lower() == "bearer"
                and hmac.compare_digest(offered.strip().encode(), str(config.token).encode())
            )

        def _deny(self) -> None:
            self._json(
                401,
                {"error": "a valid bearer token is required"},
                headers={"WWW-Authenticate": 'Bearer realm="nightowl"'},
            )

        def do_GET(self) -> None:  # noqa: N802 - the stdlib's name
            path = self.path.split("?", 1)[0]
            if path == "/healthz":
                self._json(
                    200,
                    {
                        "status": "ok",
                        "waiting": receiver.waiting(),
                        "queue": config.queue_size,
                        "busy": receiver.busy,
                        "workers": config.workers,
                    },
                )
                return
            if config.index_requires_token and not self._authorized():
                self._deny()
                return
            if path == "/":
                self._send(200, index_page(receiver.captures()), "text/html")
            elif path.startswith("/captures/"):
                self._draft(path)
            else:
                self._json(404, {"error": "not found"})

        def _draft(self, path: str) -> None:
            parts = path.split("/")
            bundle = _bundle_dir(config.out_dir, parts[2] if len(parts) == 4 else "")
            if bundle is None or parts[3] not in ("postmortem.md", "postmortem.html"):
                self._json(404, {"error": "no such capture"})
                return
            if parts[3] == "postmortem.md":
                self._send(200, (bundle / "postmortem.md").read_text(errors="replace"), "text/markdown")
                return
            from nightowl.postmortem import render_bundle

            self._send(200, render_bundle(bundle, fmt="html"), "text/html")

        def do_POST(self) -> None:  # noqa: N802 - the stdlib's name
            path = self.path.split("?", 1)[0].rstrip("/")
            if path not in ("/alertmanager", "/pagerduty"):
                self._json(404, {"error": "POST to /alertmanager or /pagerduty"})
                return
            if not self._authorized():
                self._deny()
                return
            length = self.headers.get("Content-Length")
            if length is None or not length.isdigit():
                self._json(411, {"error": "Content-Length required"})
                return
            if int(length) > MAX_BODY:
                self._json(413, {"error": f"payload over {MAX_BODY} bytes"})
                return
            body = self.rfile.read(int(length))
            if path == "/pagerduty" and not verify_pagerduty_signature(
                body, self.headers.get("X-PagerDuty-Signature"), config.pagerduty_secrets
            ):
                self._json(401, {"error": "missing or wrong X-PagerDuty-Signature"})
                return
            try:
                alerts = parse_payload(json.loads(body))
            except ValueError as exc:
                self._json(400, {"error": str(exc)})
                return
            results = receiver.submit(alerts)
            self._json(
                200,
                {
                    "alerts": [
                        {
                            k: c.to_json()[k]
                            for k in ("alert", "fingerprint", "status", "reason", "rule", "runbook", "host")
                        }
                        for c in results
                    ]
                },
            )

    return Handler


def _bundle_dir(out_dir: Path, run_id: str) -> Path | None:
    """A capture's bundle, only if ``run_id`` names a finished bundle directly under ``out_dir``."""
    if not run_id or run_id.startswith(".") or not all(ch.isalnum() or ch in "._-" for ch in run_id):
        return None
    path = out_dir / run_id
    return path if path.is_dir() and (path / "manifest.json").is_file() else None


def index_page(captures: list[dict[str, Any]]) -> str:
    rows = []
    for c in captures:
        verdict = c.get("verdict") or {}
        links = ""
        if c.get("run_id"):
            base = f"/captures/{escape(c['run_id'])}/postmortem"
            links = f'<a href="{base}.html">draft</a> · <a href="{base}.md">md</a>'
        received = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(float(c.get("received_at") or 0)))
        rows.append(
            "<tr>"
            + "".join(
                f"<td>{escape(str(v))}</td>"
                for v in (
                    received + "Z",
                    c.get("alert") or "",
                    c.get("alert_status") or "",
                    c.get("status") or "",
                    c.get("host") or "",
                    c.get("runbook") or "",
                    f"{verdict.get('id')} → {verdict.get('action')}" if verdict else "",
                    c.get("reason") or "",
                )
            )
            + f"<td>{links}</td></tr>"
        )
    body = "\n".join(rows) or '<tr><td colspan="9">no alert received yet</td></tr>'
    return (
        '<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><title>nightowl captures</title>'
        "<style>body{font-family:system-ui,sans-serif;margin:2rem}table{border-collapse:collapse}"
        "td,th{border:1px solid #ddd;padding:.2rem .5rem;text-align:left}</style></head><body>"
        "<h1>nightowl: recent captures</h1><table><tr><th>received (UTC)</th><th>alert</th><th>alert status</th>"
        "<th>capture</th><th>host</th><th>runbook</th><th>verdict</th><th>reason</th><th>postmortem</th></tr>"
        f"{body}</table></body></html>\n"
    )
