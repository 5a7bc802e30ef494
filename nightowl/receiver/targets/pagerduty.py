"""PagerDuty: a note on the incident whose webhook started the capture, or the one an alert's label names.

``POST {api_url}/incidents/{id}/notes`` with ``Authorization: Token token=KEY`` and ``From: EMAIL``, body
``{"note": {"content": TEXT}}`` (https://developer.pagerduty.com/api-reference/3df2b685a0dbc-create-a-note-on-an-incident).
PagerDuty's API reference gives no length for a note's ``content`` (only "a maximum of 2000 notes can be added
to an incident"); nightowl keeps a note well under the size its web app and mobile app show in one screen.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from nightowl.receiver.credentials import read_secret
from nightowl.receiver.targets.base import Request, Target, fit, headline, http_url

if TYPE_CHECKING:
    from nightowl.outcome import Outcome

KIND = "pagerduty"
RANK = 0
KEYS = frozenset({"api_url", "token", "token_file", "token_env", "from", "incident_label"})
PAGERDUTY_API = "https://api.pagerduty.com"
PAGERDUTY_ACCEPT = "application/vnd.pagerduty+json;version=2"
NOTE_CHARS = 4000


def parse(doc: Mapping[str, Any], where: str) -> Target:
    token = read_secret(doc, "token", where)
    if not token or not doc.get("from"):
        raise ValueError(f"{where}: needs a REST API key (token_file or token_env) and `from` (a user's email)")
    api = str(doc.get("api_url") or PAGERDUTY_API).rstrip("/")
    label = str(doc["incident_label"]) if doc.get("incident_label") else None
    return Target(KIND, http_url(api, where), token, str(doc["from"]), label)


def request(target: Target, outcome: Outcome, link: str | None) -> Request:
    incident = incident_id(target, outcome)
    tail = f"Postmortem draft: {link}" if link else ""
    room = NOTE_CHARS - len(tail) - 1
    update = outcome.status_update_lines()
    body_lines = [headline(outcome), *outcome.findings] + (["", "Status update:", *update] if update else [])
    content = fit(body_lines, room) + (f"\n{tail}" if tail else "")
    headers = {"Authorization": f"Token token={target.token}", "From": str(target.sender), "Accept": PAGERDUTY_ACCEPT}
    return f"{target.url}/incidents/{quote(incident, safe='')}/notes", headers, {"note": {"content": content}}


def incident_id(target: Target, outcome: Outcome) -> str:
    """The incident the note goes on: the one whose v3 webhook started the run, else the one the alert's
    ``incident_label`` label or annotation names; LookupError (the target is skipped) when neither."""
    if outcome.incident:
        return outcome.incident
    labels = {**outcome.annotations, **outcome.labels}
    if target.incident_label and labels.get(target.incident_label):
        return str(labels[target.incident_label])
    raise LookupError(
        "no PagerDuty incident: the alert came from "
        f"{outcome.source or '?'} and carries no `{target.incident_label or 'incident_label'}` label"
    )
