"""The verdict back to the responders: a PagerDuty note, a chat message, a generic JSON webhook.

After a capture, ``nightowl serve`` posts what it concluded (or why it could not) and the draft's
link to each configured target. Posting never holds up a capture: captures hand their record to
one notifier thread per target through a bounded queue (so a hanging target never holds up the
others), and a full queue is recorded, not waited on. Each post has a deadline, follows no redirect
and never logs a secret. Each target is tried ``attempts`` times with exponential backoff; the
outcome of every target (sent, failed, skipped and why) goes back into the capture's record and the serve log.

Targets and their wire formats:

* ``pagerduty``: ``POST {api_url}/incidents/{id}/notes`` with ``Authorization: Token token=KEY`` and
  ``From: EMAIL``, body ``{"note": {"content": TEXT}}`` (PagerDuty REST API,
  https://developer.pagerduty.com/api-reference/3df2b685a0dbc-create-a-note-on-an-incident).
  The incident is the one whose webhook started the capture, or the one an Alertmanager label or
  annotation names (``incident_label``).
* ``chat``: Slack-compatible incoming-webhook JSON ``{"text": ..., "blocks": [...]}``
  (https://api.slack.com/messaging/webhooks; Mattermost and Rocket.Chat accept the same ``text``).
* ``webhook``: ``{"event": "nightowl.capture", ...}`` with the whole capture record, optionally with
  ``Authorization: Bearer TOKEN``.
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
from urllib.parse import quote

from nightowl.receiver.credentials import read_secret
from nightowl.receiver.sections import known_section

PAGERDUTY_API = "https://api.pagerduty.com"
PAGERDUTY_ACCEPT = "application/vnd.pagerduty+json;version=2"
MAX_RETRY_AFTER_S = 60.0

# Keys of each target and of the `notify` section (fixtures/alerts/serve.yaml shows each, commented); a
# target is named once, here, and the section's keys follow.
TARGET_KEYS = {
    "pagerduty": frozenset({"api_url", "token", "token_file", "token_env", "from", "incident_label"}),
    "chat": frozenset({"url", "url_file", "url_env"}),
    "webhook": frozenset({"url", "url_file", "url_env", "token", "token_file", "token_env"}),
}
NOTIFY_KEYS = frozenset({"link_base", "attempts", "backoff", "timeout", "queue", *TARGET_KEYS})


@dataclass(frozen=True)
class Target:
    kind: str  # pagerduty | chat | webhook
    url: str  # the PagerDuty REST API base, or the webhook's URL
    token: str | None = None  # PagerDuty REST API key, or the generic webhook's bearer token
    sender: str | None = None  # PagerDuty: the From header (a PagerDuty user's email)
    incident_label: str | None = None  # PagerDuty: the label or annotation naming the incident id


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
    if not known_section(doc, "notify", NOTIFY_KEYS, where, ValueError):
        return NotifyConfig()
    try:
        attempts, backoff = int(doc.get("attempts", 4)), float(doc.get("backoff", 2.0))
        timeout, size = float(doc.get("timeout", 10.0)), int(doc.get("queue", 64))
    except (TypeError, ValueError):
        raise ValueError(f"{where}: notify: attempts, backoff, timeout and queue are numbers") from None
    if not (1 <= attempts <= 20 and 0 <= backoff <= 600 and 0 < timeout <= 120 and 1 <= size <= 10000):
        raise ValueError(f"{where}: notify: attempts 1-20, backoff 0-600 s, timeout up to 120 s, queue 1-10000")
    targets = tuple(_target(kind, doc[kind], f"{where}: notify.{kind}") for kind in TARGET_KEYS if doc.get(kind))
    link_base = str(doc["link_base"]).rstrip("/") if doc.get("link_base") else None
    return NotifyConfig(targets, link_base, attempts, backoff, timeout, size)


def _target(kind: str, doc: Any, where: str) -> Target:
    if not isinstance(doc, Mapping):
        raise ValueError(f"{where}: a mapping")
    unknown = set(doc) - TARGET_KEYS[kind]
    if unknown:
        raise ValueError(f"{where}: unknown key(s) {', '.join(sorted(unknown))}")
    if kind == "pagerduty":
        token = read_secret(doc, "token", where)
        if not token or not doc.get("from"):
            raise ValueError(f"{where}: needs a REST API key (token_file or token_env) and `from` (a user's email)")
        api = str(doc.get("api_url") or PAGERDUTY_API).rstrip("/")
        label = str(doc["incident_label"]) if doc.get("incident_label") else None
        return Target(kind, _http_url(api, where), token, str(doc["from"]), label)
    url = read_secret(doc, "url", where)
    if not url:
        raise ValueError(f"{where}: needs url, url_file or url_env (the variable is unset or empty)")
    token = read_secret(doc, "token", where) if kind == "webhook" else None
    return Target(kind, _http_url(url, where), token)


def _http_url(url: str, where: str) -> str:
    if not url.startswith(("http://", "https://")):
        raise ValueError(f"{where}: {url.split('?')[0][:40]!r} is not an http(s) URL")
    return url


# --- what is said ----------------------------------------------------------------------------------
def draft_url(record: Mapping[str, Any], link_base: str | None) -> str | None:
    run_id = record.get("run_id")
    return f"{link_base}/captures/{run_id}/postmortem.html" if run_id and link_base else None


# Size limits of each target, and where they are documented. PagerDuty's API reference gives no length for
# a note's `content` (only "a maximum of 2000 notes can be added to an incident",
# https://developer.pagerduty.com/api-reference/3df2b685a0dbc-create-a-note-on-an-incident); nightowl keeps
# a note well under the size its web app and mobile app show in one screen. Slack: a section block's text
# is at most 3000 characters (https://api.slack.com/reference/block-kit/blocks#section) and a message's
# `text` is truncated past 40,000 (https://api.slack.com/methods/chat.postMessage#truncating).
PAGERDUTY_NOTE_CHARS = 4000
SLACK_SECTION_CHARS = 3000
SLACK_TEXT_CHARS = 4000  # the notification fallback: the headline and the finding, not the whole update
WEBHOOK_TEXT_CHARS = 16000
STATUS_UPDATE_BYTES = 16384  # what is read of the bundle's status-update.md
CUT = "… (cut to fit; the whole status update is in the bundle)"


def finding_lines(record: Mapping[str, Any]) -> list[str]:
    """The finding beyond the headline: GPU(s), the why line, the first action, and for a job the members
    implicated and not; one printable line each. Nothing when the capture has no verdict."""
    from nightowl.safetext import one_line

    verdict = record.get("verdict") if isinstance(record.get("verdict"), Mapping) else None
    if not verdict:
        return []
    lines = []
    cause = verdict.get("common_cause") if isinstance(verdict.get("common_cause"), Mapping) else None
    if cause:  # a storm whose hosts share a domain: the domain is checked before any node is acted on
        lines.append(f"Common cause first: {str(cause.get('line') or '').removeprefix('common cause: ')}")
    gpus = verdict.get("gpus")
    if isinstance(gpus, list) and gpus:
        lines.append(f"GPU(s): {', '.join(str(g) for g in gpus)}")
    summary = str(verdict.get("host_summary") or verdict.get("summary") or "")  # a storm's own, past its cause
    head, dot, _ = summary.partition(". ")
    if head:
        lines.append(f"Why: {head}{'.' if dot else ''}")
    implicated = verdict.get("implicated")
    if isinstance(implicated, list):
        on = ", ".join(map(str, implicated)) or ("the whole job" if verdict.get("whole_job") else "no member")
        others = ", ".join(map(str, verdict.get("not_implicated") or []))
        lines.append(
            f"First action: {verdict.get('action')} on {on}" + (f" (not implicated: {others})" if others else "")
        )
    elif cause:
        lines.append(
            f"First action: inspect {cause.get('kind')} {cause.get('name')}; then {verdict.get('action')} "
            f"only on those of its {cause.get('shared_by')} nodes whose fault the {cause.get('kind')} does not explain"
        )
    else:
        lines.append(f"First action: {verdict.get('action')}")
    return [one_line(line) for line in lines]


def status_update_lines(record: Mapping[str, Any]) -> list[str]:
    """The bundle's status update (status-update.md), line by line; empty when the capture wrote none."""
    from pathlib import Path

    from nightowl.safetext import printable

    path = record.get("status_update")
    if not isinstance(path, str) or not path:
        return []
    try:
        with Path(path).open("rb") as handle:
            text = handle.read(STATUS_UPDATE_BYTES).decode("utf-8", errors="replace")
    except OSError:
        return []
    return [line for line in printable(text).splitlines() if line.strip()]


def fit(lines: list[str], limit: int, join: str = "\n") -> str:
    """``lines`` joined, within ``limit`` characters: whole lines while they fit, then the next one cut with a
    mark saying so. A line is never split into two, and the result never ends inside an escape."""
    out: list[str] = []
    used = 0
    for line in lines:
        extra = len(line) + (len(join) if out else 0)
        if used + extra <= limit:
            out.append(line)
            used += extra
            continue
        room = limit - used - (len(join) if out else 0) - len(CUT)
        if room > 20:
            out.append(_cut(line, room) + CUT)
        elif out and len(out[-1]) > len(CUT) + 20:
            out[-1] = _cut(out[-1], len(out[-1]) - len(CUT)) + CUT
        break
    return join.join(out)


def _cut(line: str, room: int) -> str:
    cut = line[: max(0, room)]
    amp = cut.rfind("&")  # never leave half of an escaped `&lt;` behind
    if amp != -1 and ";" not in cut[amp:]:
        cut = cut[:amp]
    return cut.rstrip()


def request_for(
    target: Target, record: Mapping[str, Any], text: str, link: str | None
) -> tuple[str, dict[str, str], Any]:
    """(url, headers, JSON body) of one target's message, or raise LookupError when it does not apply.

    Each carries the verdict line, the finding (GPU(s), why, first action, a job's members) and the status
    update, within the target's size limit (above)."""
    from nightowl.safetext import chat_text, one_line

    # One line: a PagerDuty title with a newline must not forge a second line of the note or message.
    headline = one_line(f"nightowl: {record.get('alert') or 'alert'} on {record.get('host') or '-'}: {text}")
    finding, update = finding_lines(record), status_update_lines(record)
    if target.kind == "pagerduty":
        incident = _incident_id(target, record)
        tail = f"Postmortem draft: {link}" if link else ""
        room = PAGERDUTY_NOTE_CHARS - len(tail) - 1
        body_lines = [headline, *finding] + (["", "Status update:", *update] if update else [])
        content = fit(body_lines, room) + (f"\n{tail}" if tail else "")
        headers = {
            "Authorization": f"Token token={target.token}",
            "From": str(target.sender),
            "Accept": PAGERDUTY_ACCEPT,
        }
        return f"{target.url}/incidents/{quote(incident, safe='')}/notes", headers, {"note": {"content": content}}
    if target.kind == "chat":
        # Both `text` and the blocks are read as markup: both escaped (`<!channel>` stays text).
        safe = chat_text(headline)
        main = fit([safe, *(chat_text(line) for line in finding)], SLACK_SECTION_CHARS)
        blocks: list[dict[str, Any]] = [{"type": "section", "text": {"type": "mrkdwn", "text": main}}]
        if link:
            blocks.append({"type": "context", "elements": [{"type": "mrkdwn", "text": f"<{link}|postmortem draft>"}]})
        if update:
            shown = fit([chat_text(line) for line in update], SLACK_SECTION_CHARS - 8)
            blocks.append({"type": "section", "text": {"type": "mrkdwn", "text": f"```\n{shown}\n```"}})
        fallback = fit([safe, *(chat_text(line) for line in finding)], SLACK_TEXT_CHARS - len(link or "") - 1, " ")
        return target.url, {}, {"text": fallback + (f" {link}" if link else ""), "blocks": blocks}
    headers = {"Authorization": f"Bearer {target.token}"} if target.token else {}
    note = fit([headline, *finding] + (["", *update] if update else []), WEBHOOK_TEXT_CHARS)
    body = {
        "event": "nightowl.capture",
        "text": headline,
        "note": note,
        "finding": finding,
        "status_update_text": "\n".join(update) or None,
        "draft_url": link,
        "capture": dict(record),
    }
    return target.url, headers, body


def _incident_id(target: Target, record: Mapping[str, Any]) -> str:
    if record.get("source") == "pagerduty" and record.get("fingerprint"):
        return str(record["fingerprint"])  # the v3 webhook's incident id
    labels = {**(record.get("annotations") or {}), **(record.get("labels") or {})}
    if target.incident_label and labels.get(target.incident_label):
        return str(labels[target.incident_label])
    raise LookupError(
        "no PagerDuty incident: the alert came from "
        f"{record.get('source') or '?'} and carries no `{target.incident_label or 'incident_label'}` label"
    )


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

    def __init__(self, record: dict[str, Any], text: str, done: Callable[[list[dict[str, Any]]], None], n: int) -> None:
        self.record, self.text, self.done = record, text, done
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

    def submit(self, record: dict[str, Any], text: str, done: Callable[[list[dict[str, Any]]], None]) -> bool:
        """Queue one capture's message; a target whose queue is full is recorded failed at once."""
        job = _Job(record, text, done, len(self.config.targets))
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
            job.report(index, self.send_one(target, job.record, job.text))

    def send_one(self, target: Target, record: Mapping[str, Any], text: str) -> dict[str, Any]:
        """One target's outcome for one capture; never raises."""
        try:
            url, headers, body = request_for(target, record, text, draft_url(record, self.config.link_base))
        except LookupError as exc:
            return _result(target, "skipped", 0, str(exc))
        except Exception as exc:  # noqa: BLE001 - a crafted record is this message's problem only
            return _result(target, "failed", 0, f"{type(exc).__name__} while composing the message")
        return deliver(target, url, headers, body, self.config, self._sleep)

    def send(self, record: Mapping[str, Any], text: str) -> list[dict[str, Any]]:
        """Every target's outcome for one capture, in config order (one after the other, here)."""
        return [self.send_one(target, record, text) for target in self.config.targets]

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
