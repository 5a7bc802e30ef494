"""The receiver's HTTP face: stdlib ``ThreadingHTTPServer``, bearer token, PagerDuty signature.

``POST /alertmanager`` and ``POST /pagerduty`` admit alerts into the :class:`Receiver`;
``GET /healthz`` answers without a token; ``GET /`` lists recent captures (the page is the
``receiver-index.html.j2`` template) and ``GET /captures/RUN_ID/postmortem.md|html`` serves a draft.
"""

from __future__ import annotations

import functools
import hmac
import json
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from nightowl.receiver.capture import Capture
from nightowl.receiver.payload import PARSERS, verify_pagerduty_signature
from nightowl.receiver.queue import Receiver

MAX_BODY = 1 << 20  # Alertmanager truncates at max_alerts; a megabyte is hundreds of alerts
INDEX_TEMPLATE = "receiver-index.html.j2"


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
            route = self.path.split("?", 1)[0].strip("/")
            if route not in PARSERS:
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
            # The route, never the body, decides the format and its verification (docs/receiver.md).
            if route == "pagerduty" and not verify_pagerduty_signature(
                body, self.headers.get("X-PagerDuty-Signature"), config.pagerduty_secrets
            ):
                self._json(401, {"error": "missing or wrong X-PagerDuty-Signature"})
                return
            try:
                alerts = PARSERS[route](json.loads(body))
            except ValueError as exc:
                self._json(400, {"error": str(exc)[:300]})
                return
            self._json(200, admission_summary(receiver.submit(alerts)))

    return Handler


def admission_summary(captures: list[Capture]) -> dict[str, Any]:
    """The answer to a delivery: counts and each alert's status in order, never an echo of the
    payload (the journal and ``GET /`` hold the details), so a large delivery gets a small answer."""
    statuses = [c.status for c in captures]
    return {
        "received": len(statuses),
        "counts": {s: statuses.count(s) for s in sorted(set(statuses))},
        "statuses": statuses,
    }


def _bundle_dir(out_dir: Path, run_id: str) -> Path | None:
    """A capture's bundle, only if ``run_id`` names a finished bundle directly under ``out_dir``."""
    if not run_id or run_id.startswith(".") or not all(ch.isalnum() or ch in "._-" for ch in run_id):
        return None
    path = out_dir / run_id
    return path if path.is_dir() and (path / "manifest.json").is_file() else None


def index_page(captures: list[dict[str, Any]]) -> str:
    """The HTML list of recent captures (newest first), rendered from the built-in template."""
    rows = [{"cells": _index_cells(c), "run_id": c.get("run_id") or ""} for c in captures]
    return _index_template().render(rows=rows) + "\n"


def _index_cells(capture: dict[str, Any]) -> list[str]:
    verdict = capture.get("verdict") or {}
    received = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(float(capture.get("received_at") or 0)))
    return [
        str(v)
        for v in (
            received + "Z",
            capture.get("alert") or "",
            capture.get("alert_status") or "",
            capture.get("status") or "",
            capture.get("host") or "",
            capture.get("runbook") or "",
            f"{verdict.get('id')} → {verdict.get('action')}" if verdict else "",
            capture.get("reason") or "",
        )
    ]


@functools.cache
def _index_template() -> Any:
    """Loaded once, from the built-in templates only: the page is part of the receiver, not a user's draft."""
    from jinja2 import Environment, FileSystemLoader, StrictUndefined

    from nightowl.paths import data_dir

    env = Environment(loader=FileSystemLoader(str(data_dir("templates"))), autoescape=True, undefined=StrictUndefined)
    return env.get_template(INDEX_TEMPLATE)
