"""The receiver's HTTP face: stdlib ``ThreadingHTTPServer``, bearer token, PagerDuty signature.

``POST /alertmanager`` and ``POST /pagerduty`` admit alerts into the :class:`Receiver`;
``GET /healthz`` answers without a token; ``GET /`` lists recent captures (the page is the
``receiver-index.html.j2`` template), ``GET /captures/RUN_ID/postmortem.md|html`` serves a draft
and ``GET /captures/RUN_ID/PATH`` a raw file of the bundle, read-only. Pages take the bearer token
or a browser's session cookie from ``/login`` (see ``auth``).
"""

from __future__ import annotations

import functools
import json
import os
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, quote, unquote, urlencode

from nightowl.engine import layout
from nightowl.logline import LogLine
from nightowl.receiver import auth
from nightowl.receiver.capture import Capture
from nightowl.receiver.config import ServeConfig
from nightowl.receiver.payload import PARSERS, verify_pagerduty_signature
from nightowl.receiver.queue import Receiver

MAX_BODY = 1 << 20  # Alertmanager truncates at max_alerts; a megabyte is hundreds of alerts
INDEX_TEMPLATE = "receiver-index.html.j2"
LOGIN_TEMPLATE = "receiver-login.html.j2"
FILES_TEMPLATE = "receiver-files.html.j2"
# Pages hold no script; what a bundle's text says can never run or frame this site.
PAGE_HEADERS = {
    "Content-Security-Policy": "default-src 'none'; style-src 'unsafe-inline'; img-src data:; "
    "form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
}


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
    """The request handler class of one receiver's server (its config, its login sessions and throttle)."""
    state = {
        "receiver": receiver,
        "config": receiver.config,
        "sessions": auth.Sessions(),
        "throttle": auth.LoginThrottle(),
    }
    return type("Handler", (_Handler,), state)


class _Handler(BaseHTTPRequestHandler):
    """The routes of docs/receiver.md; one instance per request."""

    server_version = "nightowl"
    timeout = 15  # a client that stops sending mid-request frees its thread
    # Set by make_handler on a subclass per server: the stdlib builds a handler per request from its class.
    receiver: Receiver
    config: ServeConfig
    sessions: auth.Sessions
    throttle: auth.LoginThrottle

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
        for name, value in PAGE_HEADERS.items():
            self.send_header(name, value)
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)

    def _json(self, code: int, payload: Any, headers: dict[str, str] | None = None) -> None:
        self._send(code, json.dumps(payload, default=str, indent=1) + "\n", headers=headers)

    def _authorized(self, cookie: bool = False) -> bool:
        """The bearer token; for pages (``cookie=True``) a browser's session cookie as well."""
        if auth.bearer_ok(self.headers.get("Authorization"), self.config.token):
            return True
        return cookie and self.sessions.ok(auth.session_from(self.headers.get("Cookie")), self.config.token)

    def _deny(self, path: str | None = None) -> None:
        if path is not None and "text/html" in (self.headers.get("Accept") or ""):
            self._redirect("/login?" + urlencode({"next": path}))  # a browser: to the login page
            return
        self._json(
            401,
            {"error": "a valid bearer token is required"},
            headers={"WWW-Authenticate": 'Bearer realm="nightowl"'},
        )

    def _redirect(self, location: str, cookie: str | None = None) -> None:
        headers = {"Location": location} | ({"Set-Cookie": cookie} if cookie else {})
        self._send(303, "", "text/plain", headers)

    def do_GET(self) -> None:  # noqa: N802 - the stdlib's name
        path, _, query = self.path.partition("?")
        if path == "/login":
            nxt = auth.safe_next((parse_qs(query).get("next") or ["/"])[0])
            self._send(200, _page(LOGIN_TEMPLATE, next=nxt, error=None), "text/html")
            return
        if path == "/healthz":
            healthy, why = self.receiver.health()
            self._json(
                200 if healthy else 503,
                {
                    "status": "ok" if healthy else "unhealthy",
                    "reason": why,
                    "waiting": self.receiver.waiting(),
                    "queue": self.config.queue_size,
                    "busy": self.receiver.busy,
                    "workers": self.config.workers,
                },
            )
            return
        if self.config.index_requires_token and not self._authorized(cookie=True):
            self._deny(self.path)
            return
        if path == "/":
            self._send(200, index_page(self.receiver.captures(), last_sweep(self.config.out_dir)), "text/html")
        elif path.startswith("/captures/"):
            self._capture_file(path)
        else:
            self._json(404, {"error": "not found"})

    def _capture_file(self, path: str) -> None:
        """A draft, the bundle's file list, or one raw file of the bundle (read-only, never outside it)."""
        _, _, run_id, *rest = path.split("/")
        bundle = _bundle_dir(self.config.out_dir, run_id)
        rel = unquote("/".join(rest))
        if bundle is None:
            self._json(404, {"error": "no such capture"})
        elif rel == layout.POSTMORTEM_HTML:
            # The draft the capture wrote into the bundle; rendered (and kept) only when it is missing.
            from nightowl.postmortem.render import write_html_draft

            stored = bundle / layout.POSTMORTEM_HTML
            if stored.is_file() or write_html_draft(bundle) is not None:
                self._send(200, stored.read_text(encoding="utf-8", errors="replace"), "text/html")
            else:
                self._json(500, {"error": "the draft could not be rendered"})
        elif rel == layout.SWEEP_PAGE and (bundle / layout.SWEEP_PAGE).is_file():
            # the fleet page nightowl wrote (autoescaped, no script): the one bundle file served as HTML
            self._send(200, (bundle / layout.SWEEP_PAGE).read_text(encoding="utf-8", errors="replace"), "text/html")
        elif rel == "":
            self._send(200, _page(FILES_TEMPLATE, run_id=run_id, files=bundle_files(bundle)), "text/html")
        else:
            raw = bundle_file(bundle, rel)
            if raw is None:
                self._json(404, {"error": "no such file in this capture"})
                return
            kind = (
                "text/markdown"
                if rel.endswith(".md")
                else "application/json"
                if rel.endswith(".json")
                else "text/plain"
            )
            self._send(200, raw.read_bytes().decode(errors="replace"), kind)

    def _login(self) -> None:
        """POST /login: the token from the form; right, a session cookie and on to ``next``."""
        length = self.headers.get("Content-Length") or ""
        body = self.rfile.read(int(length)) if length.isdigit() and int(length) <= auth.MAX_LOGIN_BODY else b""
        token, nxt = auth.login_form(body)
        address = str(self.client_address[0])
        wait = self.throttle.retry_after(address)
        if wait > 0:
            # Refused before the token is even compared: a throttled guess learns nothing.
            self._send(
                429,
                _page(LOGIN_TEMPLATE, next=nxt, error="too many failed logins; try again later"),
                "text/html",
                {"Retry-After": str(int(wait) + 1)},
            )
            return
        if not auth.token_matches(token, self.config.token):
            failures = self.throttle.failed(address)
            self.receiver.log(
                LogLine(
                    f"nightowl serve: login refused from {address}: wrong token "
                    f"({failures} in the last {auth.LOGIN_WINDOW_S:.0f} s)",
                    level="warning",
                    status="login_refused",
                )
            )
            self._send(401, _page(LOGIN_TEMPLATE, next=nxt, error="wrong token"), "text/html")
            return
        self.receiver.log(LogLine(f"nightowl serve: login from {address}", status="login"))
        lifetime = self.config.session_hours * 3600
        cookie = auth.set_cookie(
            self.sessions.new(str(self.config.token), lifetime), lifetime, self.config.cookie_secure
        )
        self._redirect(nxt, cookie)

    def do_POST(self) -> None:  # noqa: N802 - the stdlib's name
        path = self.path.split("?", 1)[0].rstrip("/")
        if path == "/login":
            self._login()
            return
        if path == "/logout":
            if self.sessions.revoke(auth.session_from(self.headers.get("Cookie")), self.config.token):
                self.receiver.log(LogLine(f"nightowl serve: logout from {self.client_address[0]}", status="logout"))
            self._redirect("/login", auth.clear_cookie(self.config.cookie_secure))
            return
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
        # The route, never the body, decides the format and its verification (docs/self.receiver.md).
        if route == "pagerduty" and not verify_pagerduty_signature(
            body, self.headers.get("X-PagerDuty-Signature"), self.config.pagerduty_secrets
        ):
            self._json(401, {"error": "missing or wrong X-PagerDuty-Signature"})
            return
        try:
            alerts = PARSERS[route](json.loads(body))
        except ValueError as exc:
            self._json(400, {"error": str(exc)[:300]})
            return
        captures = self.receiver.submit(alerts)
        answer = admission_summary(captures)
        if any((c.reason or "").startswith("refused: cannot write the journal") for c in captures):
            # Not journaled is not promised: a 5xx makes Alertmanager and PagerDuty deliver it again.
            self._json(503, {**answer, "error": f"the journal cannot be written: {self.receiver.journal.error}"})
            return
        self._json(200, answer)


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
    return path if path.is_dir() and (path / layout.MANIFEST).is_file() else None


SWEEPS_LOOKED_AT = 500  # the newest bundles searched for a sweep's fleet page on each index request


def last_sweep(out_dir: Path) -> str | None:
    """The run id of the newest bundle under ``out_dir`` holding a sweep's fleet page (a sweep run with
    ``--out`` at serve's bundle folder), or None. Run ids start with their UTC time to the second, so the newest
    sort last; within those, the page written last wins."""
    try:
        names = sorted((entry.name for entry in os.scandir(out_dir) if entry.is_dir()), reverse=True)
    except OSError:
        return None
    found: list[tuple[int, str]] = []
    for name in names[:SWEEPS_LOOKED_AT]:
        bundle = _bundle_dir(out_dir, name)
        if bundle is None:
            continue
        try:
            found.append(((bundle / layout.SWEEP_PAGE).stat().st_mtime_ns, name))
        except OSError:
            continue  # no page: a capture, not a sweep
    return max(found)[1] if found else None


def bundle_file(bundle: Path, rel: str) -> Path | None:
    """``rel`` inside ``bundle`` as a regular file, or None: no ``..``, no hidden names, no symlink out."""
    parts = rel.split("/")
    if not rel or any(not p or p.startswith(".") or "\\" in p or "\x00" in p for p in parts):
        return None
    root = bundle.resolve()
    path = (root / rel).resolve()
    return path if path.is_relative_to(root) and path.is_file() else None


def bundle_files(bundle: Path) -> list[dict[str, Any]]:
    """The bundle's files (relative paths, sizes), hidden ones left out."""
    root = bundle.resolve()
    found = []
    for path in sorted(root.rglob("*")):
        rel = path.relative_to(root).as_posix()
        if path.is_file() and bundle_file(bundle, rel) is not None:
            found.append({"path": rel, "bytes": path.stat().st_size})
    return found


SEVERITIES = ("critical", "warning", "info", "ok")


def index_page(captures: list[dict[str, Any]], sweep: str | None = None) -> str:
    """The HTML list of recent captures (newest first), rendered from the built-in template, with a link to the
    last sweep's fleet page when ``sweep`` names its bundle."""
    rows = [{"cells": _index_cells(c), "run_id": c.get("run_id") or "", "severity": _severity(c)[0]} for c in captures]
    return _page(INDEX_TEMPLATE, rows=rows, sweep=sweep, sweep_page=layout.SWEEP_PAGE) + "\n"


def _severity(capture: dict[str, Any]) -> tuple[str, str]:
    """(CSS class, text): the verdict's severity, else "no verdict" for a capture that could not judge."""
    verdict = capture.get("verdict") or {}
    if verdict.get("severity") in SEVERITIES:
        return str(verdict["severity"]), str(verdict["severity"])
    if capture.get("status") in ("captured", "failed"):
        return "unknown", "no verdict"
    return "none", ""


def _index_cells(capture: dict[str, Any]) -> list[str]:
    from nightowl.receiver.notify import summary

    verdict = capture.get("verdict") or {}
    received = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(float(capture.get("received_at") or 0)))
    if verdict:
        judged = f"{verdict.get('id')} → {verdict.get('action')}"
    else:  # what prevented a verdict (an unreachable host, a missing ssh config)
        judged = capture.get("outcome") or "" if capture.get("status") == "captured" else ""
    return [
        str(v)
        for v in (
            received + "Z",
            capture.get("alert") or "",
            capture.get("alert_status") or "",
            capture.get("status") or "",
            capture.get("host") or "",
            capture.get("runbook") or "",
            _severity(capture)[1],
            judged,
            capture.get("reason") or "",
            summary(capture.get("notifications") or []),
        )
    ]


def _page(name: str, **context: Any) -> str:
    return _templates().get_template(name).render(**context)


@functools.cache
def _templates() -> Any:
    """Loaded once, from the built-in templates only: the pages are part of the receiver, not a user's draft."""
    from jinja2 import Environment, FileSystemLoader, StrictUndefined

    from nightowl.paths import data_dir

    env = Environment(loader=FileSystemLoader(str(data_dir("templates"))), autoescape=True, undefined=StrictUndefined)
    # Host folders are percent-encoded names (an IPv6 host is ``fe80%3A%3A1``): a link encodes the
    # ``%`` again, so the path the handler decodes is the folder's real name.
    env.filters["urlpath"] = lambda v: quote(str(v), safe="/")
    return env
