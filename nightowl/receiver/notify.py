"""The verdict back to the responders: a PagerDuty note, a chat message, a generic JSON webhook.

After a run (a capture of ``nightowl serve``, a burst of ``nightowl watch``), its
:class:`~nightowl.outcome.Outcome` and the draft's link go to each configured target. Posting never holds
up a capture: captures hand their outcome to one notifier thread per target through a bounded queue (so a
hanging target never holds up the others), and a full queue is recorded, not waited on. Each post has a
deadline, follows no redirect and never logs a secret. Each target is tried ``attempts`` times with
exponential backoff; the outcome of every target (sent, failed, skipped and why) goes back into the capture's
record and the serve log.

What each target posts (its wire format and size limits) is its own module under ``receiver/targets/``;
this module reads the ``notify`` section and delivers.
"""

from __future__ import annotations

import contextlib
import json
import queue
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from nightowl.outcome import Outcome
from nightowl.receiver.sections import known_section
from nightowl.receiver.targets import registry
from nightowl.receiver.targets.base import CUT, Target, fit

__all__ = ["CUT", "NotifyConfig", "Notifier", "Target", "fit", "parse_notify", "request_for", "summary"]

MAX_RETRY_AFTER_S = 60.0


def target_keys() -> dict[str, frozenset[str]]:
    """Each target's settings by its kind (its module's KEYS), in the order targets are posted in."""
    return {kind: module.KEYS for kind, module in registry().items()}


# Keys of each target and of the `notify` section (fixtures/alerts/serve.yaml shows each, commented); a
# target is named once, in its own module, and the section's keys follow.
SETTINGS = frozenset({"link_base", "attempts", "backoff", "timeout", "queue"})
TARGET_KEYS = target_keys()
NOTIFY_KEYS = frozenset({*SETTINGS, *TARGET_KEYS})


@dataclass(frozen=True)
class NotifyConfig:
    targets: tuple[Target, ...] = ()
    link_base: str | None = None  # how responders reach this server: drafts are linked under it
    attempts: int = 4
    backoff_s: float = 2.0
    timeout_s: float = 10.0
    queue_size: int = 64


def parse_notify(doc: Any, where: str) -> NotifyConfig:
    """The ``notify`` section; ValueError names the file and the key."""
    keys = target_keys()  # read from the targets folder each time: a target module is all a target takes
    if not known_section(doc, "notify", SETTINGS | set(keys), where, ValueError):
        return NotifyConfig()
    try:
        attempts, backoff = int(doc.get("attempts", 4)), float(doc.get("backoff", 2.0))
        timeout, size = float(doc.get("timeout", 10.0)), int(doc.get("queue", 64))
    except (TypeError, ValueError):
        raise ValueError(f"{where}: notify: attempts, backoff, timeout and queue are numbers") from None
    if not (1 <= attempts <= 20 and 0 <= backoff <= 600 and 0 < timeout <= 120 and 1 <= size <= 10000):
        raise ValueError(f"{where}: notify: attempts 1-20, backoff 0-600 s, timeout up to 120 s, queue 1-10000")
    targets = tuple(_target(kind, doc[kind], f"{where}: notify.{kind}") for kind in keys if doc.get(kind))
    link_base = str(doc["link_base"]).rstrip("/") if doc.get("link_base") else None
    return NotifyConfig(targets, link_base, attempts, backoff, timeout, size)


def _target(kind: str, doc: Any, where: str) -> Target:
    if not isinstance(doc, Mapping):
        raise ValueError(f"{where}: a mapping")
    unknown = set(doc) - registry()[kind].KEYS
    if unknown:
        raise ValueError(f"{where}: unknown key(s) {', '.join(sorted(unknown))}")
    return registry()[kind].parse(doc, where)


def draft_url(outcome: Outcome, link_base: str | None) -> str | None:
    return f"{link_base}/captures/{outcome.run_id}/postmortem.html" if outcome.run_id and link_base else None


def request_for(target: Target, outcome: Outcome, link: str | None) -> tuple[str, dict[str, str], Any]:
    """(url, headers, JSON body) of one target's message, or raise LookupError when it does not apply.

    Each carries the verdict line, the finding (GPU(s), why, first action, a job's members) and the status
    update, within the target's size limit (its module says which)."""
    return registry()[target.kind].request(target, outcome, link)


# --- how it is sent --------------------------------------------------------------------------------
class Permanent(Exception):
    """A rejection that retrying will not change (4xx other than 408 and 429, a redirect)."""


def post_json(url: str, headers: Mapping[str, str], body: Any, timeout: float) -> int:
    """POST JSON; the HTTP status on 2xx. Raises Permanent, or OSError for what is worth retrying.

    ``timeout`` is a deadline for the whole post (connect, send, answer), not a per-read timeout: an
    endpoint that drip-feeds its answer is cut when the deadline passes. Redirects are never followed,
    since the request carries the target's credentials (PagerDuty key, bearer token) and a redirect
    would hand them to whatever host the ``Location`` names."""
    import http.client
    import socket
    from urllib.parse import urlsplit

    parts = urlsplit(url)
    connection_class = http.client.HTTPSConnection if parts.scheme == "https" else http.client.HTTPConnection
    connection = connection_class(parts.hostname or "", parts.port, timeout=timeout)
    cut = threading.Event()

    def deadline() -> None:
        cut.set()
        sock = connection.sock
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)

    timer = threading.Timer(timeout, deadline)
    timer.daemon = True
    timer.start()
    target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    all_headers = {"Content-Type": "application/json", "User-Agent": "nightowl-serve", **headers}
    try:
        try:
            connection.request("POST", target, body=json.dumps(body).encode(), headers=all_headers)
            response = connection.getresponse()
            detail = response.read(300).decode(errors="replace").strip()
            code, retry_after, location = (
                response.status,
                response.getheader("Retry-After"),
                response.getheader("Location"),
            )
        except ValueError:
            # http.client refuses a header with a line break; its message would quote the secret.
            raise Permanent("a header value is invalid (a line break in a token?); not sent") from None
        except (OSError, http.client.HTTPException) as exc:
            if cut.is_set():
                raise _Retry(f"no complete answer within {timeout:g} s") from None
            raise _Retry(str(getattr(exc, "reason", None) or exc) or type(exc).__name__) from None
    finally:
        timer.cancel()
        connection.close()
    if cut.is_set():
        raise _Retry(f"no complete answer within {timeout:g} s")
    if 200 <= code < 300:
        return int(code)
    if 300 <= code < 400:
        where = urlsplit(location or "").hostname or "?"
        raise Permanent(f"HTTP {code}: a redirect (to {where}) is never followed with credentials")
    message = f"HTTP {code}" + (f": {detail}" if detail else "")
    if 400 <= code < 500 and code not in (408, 429):
        raise Permanent(message)
    raise _Retry(message, float(retry_after) if retry_after and retry_after.isdigit() else None)


class _Retry(OSError):
    def __init__(self, message: str, after: float | None = None) -> None:
        super().__init__(message)
        self.after = after


def deliver(
    target: Target,
    url: str,
    headers: Mapping[str, str],
    body: Any,
    config: NotifyConfig,
    sleep: Callable[[float], bool],
) -> dict[str, Any]:
    """Try up to ``attempts`` times, waiting backoff, 2x backoff, ...; ``sleep`` returns False to give up."""
    error = ""
    for attempt in range(1, config.attempts + 1):
        try:
            code = post_json(url, headers, body, config.timeout_s)
        except Permanent as exc:
            return _result(target, "failed", attempt, str(exc))
        except OSError as exc:  # refused, timed out, 5xx, 429: worth another try
            error = str(getattr(exc, "reason", None) or exc)
            if attempt == config.attempts:
                break
            wait = config.backoff_s * 2 ** (attempt - 1)
            after = getattr(exc, "after", None)
            if not sleep(min(MAX_RETRY_AFTER_S, max(wait, after or 0.0))):
                return _result(target, "failed", attempt, f"{error}; stopped while waiting to retry")
        except Exception as exc:  # noqa: BLE001 - one post's bug never stops the others
            # Only the type: an exception's text may quote a header, and headers hold the secrets.
            return _result(target, "failed", attempt, f"{type(exc).__name__} while posting")
        else:
            return _result(target, "sent", attempt, None, code)
    return _result(target, "failed", config.attempts, error)


def _result(target: Target, status: str, attempts: int, error: str | None, code: int | None = None) -> dict[str, Any]:
    return {"target": target.kind, "status": status, "attempts": attempts, "http_status": code, "error": error}


class _Job:
    """One capture's message, posted to every target; ``done`` hears all outcomes, in config order."""

    def __init__(self, outcome: Outcome, done: Callable[[list[dict[str, Any]]], None], n: int) -> None:
        self.outcome, self.done = outcome, done
        self.results: list[dict[str, Any] | None] = [None] * n
        self._pending = n
        self._lock = threading.Lock()

    def report(self, index: int, result: dict[str, Any]) -> None:
        with self._lock:
            self.results[index] = result
            self._pending -= 1
            finished = self._pending == 0
        if finished:
            with contextlib.suppress(Exception):  # a failing callback never stops the notifier
                self.done([r for r in self.results if r is not None])


class Notifier:
    """One thread and a bounded queue per target: posting never holds up a capture, and a slow or
    hanging target never holds up the others."""

    def __init__(self, config: NotifyConfig) -> None:
        self.config = config
        self._queues: list[queue.Queue[_Job | None]] = [queue.Queue(maxsize=config.queue_size) for _ in config.targets]
        self._stopping = threading.Event()
        self._threads: list[threading.Thread] = []

    def start(self) -> None:
        for index, target in enumerate(self.config.targets):
            thread = threading.Thread(target=self._work, args=(index,), name=f"notify-{target.kind}", daemon=True)
            thread.start()
            self._threads.append(thread)

    def stop(self, timeout: float = 10.0) -> None:
        """Finish what is being sent now (no more backoff waits), then stop."""
        self._stopping.set()
        deadline = time.monotonic() + timeout
        for q in self._queues if self._threads else []:
            with contextlib.suppress(queue.Full):
                q.put(None, timeout=max(0.01, deadline - time.monotonic()))
        for thread in self._threads:
            thread.join(max(0.01, deadline - time.monotonic()))

    def submit(self, outcome: Outcome, done: Callable[[list[dict[str, Any]]], None]) -> bool:
        """Queue one run's message; a target whose queue is full is recorded failed at once."""
        job = _Job(outcome, done, len(self.config.targets))
        queued = True
        for index, (target, q) in enumerate(zip(self.config.targets, self._queues, strict=True)):
            try:
                q.put_nowait(job)
            except queue.Full:
                queued = False
                job.report(index, _result(target, "failed", 0, f"notify queue full ({self.config.queue_size} waiting)"))
        return queued

    def _work(self, index: int) -> None:
        target, q = self.config.targets[index], self._queues[index]
        while True:
            job = q.get()
            if job is None:
                return
            job.report(index, self.send_one(target, job.outcome))

    def send_one(self, target: Target, outcome: Outcome) -> dict[str, Any]:
        """One target's result for one run; never raises."""
        try:
            url, headers, body = request_for(target, outcome, draft_url(outcome, self.config.link_base))
        except LookupError as exc:
            return _result(target, "skipped", 0, str(exc))
        except Exception as exc:  # noqa: BLE001 - a crafted record is this message's problem only
            return _result(target, "failed", 0, f"{type(exc).__name__} while composing the message")
        return deliver(target, url, headers, body, self.config, self._sleep)

    def send(self, outcome: Outcome) -> list[dict[str, Any]]:
        """Every target's result for one run, in config order (one after the other, here)."""
        return [self.send_one(target, outcome) for target in self.config.targets]

    def _sleep(self, seconds: float) -> bool:
        return not self._stopping.wait(seconds)


def summary(results: list[dict[str, Any]]) -> str:
    """``pagerduty sent, chat failed (HTTP 500 after 4 tries)`` for the serve log."""
    parts = []
    for r in results:
        part = f"{r['target']} {r['status']}"
        if r["status"] != "sent" and r.get("error"):
            part += f" ({r['error']}" + (f" after {r['attempts']} tries)" if r["attempts"] > 1 else ")")
        parts.append(part)
    return ", ".join(parts)
