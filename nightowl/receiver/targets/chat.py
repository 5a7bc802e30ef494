"""Chat: a Slack-compatible incoming webhook, ``{"text": ..., "blocks": [...]}``
(https://api.slack.com/messaging/webhooks; Mattermost and Rocket.Chat accept the same ``text``).

A section block's text is at most 3000 characters (https://api.slack.com/reference/block-kit/blocks#section)
and a message's ``text`` is truncated past 40,000 (https://api.slack.com/methods/chat.postMessage#truncating).
Both ``text`` and the blocks are read as markup: both escaped (``<!channel>`` stays text).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from nightowl.receiver.targets.base import Request, Target, fit, headline, required_url

if TYPE_CHECKING:
    from nightowl.outcome import Outcome

KIND = "chat"
RANK = 1
KEYS = frozenset({"url", "url_file", "url_env"})
SECTION_CHARS = 3000
TEXT_CHARS = 4000  # the notification fallback: the headline and the finding, not the whole update


def parse(doc: Mapping[str, Any], where: str) -> Target:
    return Target(KIND, required_url(doc, where))


def request(target: Target, outcome: Outcome, link: str | None) -> Request:
    from nightowl.safetext import chat_text

    safe = chat_text(headline(outcome))
    finding = [chat_text(line) for line in outcome.findings]
    blocks: list[dict[str, Any]] = [
        {"type": "section", "text": {"type": "mrkdwn", "text": fit([safe, *finding], SECTION_CHARS)}}
    ]
    if link:
        blocks.append({"type": "context", "elements": [{"type": "mrkdwn", "text": f"<{link}|postmortem draft>"}]})
    update = outcome.status_update_lines()
    if update:
        shown = fit([chat_text(line) for line in update], SECTION_CHARS - 8)
        blocks.append({"type": "section", "text": {"type": "mrkdwn", "text": f"```\n{shown}\n```"}})
    fallback = fit([safe, *finding], TEXT_CHARS - len(link or "") - 1, " ")
    return target.url, {}, {"text": fallback + (f" {link}" if link else ""), "blocks": blocks}
