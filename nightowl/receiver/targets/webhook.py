"""Webhook: any HTTP endpoint, ``{"event": "nightowl.capture", ...}`` with the whole record, optionally with
``Authorization: Bearer TOKEN``.

``capture`` is the origin's record (serve: the capture's journal entry plus ``labels`` and ``annotations``)
under the outcome's own fields, so ``capture.verdict`` is the same object whatever started the run;
``outcome`` is the run's :class:`~nightowl.outcome.Outcome` as JSON.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from nightowl.receiver.credentials import read_secret
from nightowl.receiver.targets.base import Request, Target, fit, headline, required_url

if TYPE_CHECKING:
    from nightowl.outcome import Outcome

KIND = "webhook"
RANK = 2
KEYS = frozenset({"url", "url_file", "url_env", "token", "token_file", "token_env"})
TEXT_CHARS = 16000


def parse(doc: Mapping[str, Any], where: str) -> Target:
    return Target(KIND, required_url(doc, where), read_secret(doc, "token", where))


def request(target: Target, outcome: Outcome, link: str | None) -> Request:
    headers = {"Authorization": f"Bearer {target.token}"} if target.token else {}
    update = outcome.status_update_lines()
    title = headline(outcome)
    body = {
        "event": "nightowl.capture",
        "text": title,
        "note": fit([title, *outcome.findings] + (["", *update] if update else []), TEXT_CHARS),
        "finding": list(outcome.findings),
        "status_update_text": "\n".join(update) or None,
        "draft_url": link,
        "capture": outcome.capture_record(),
        "outcome": outcome.as_json(),
    }
    return target.url, headers, body
