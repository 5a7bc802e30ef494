"""Text from a replica, a log or an alert, made safe to show: no terminal control sequences, chat
markup that stays text, and one line that stays one line.

A bundle holds what a node printed and an alert's labels hold what a sender wrote; either can carry
escape sequences (OSC 52 writes the reader's clipboard, ``ESC [2J`` clears the screen), Unicode
direction overrides that reorder what a reader sees, or a newline that forges a second line of a
status update. Everything nightowl prints or posts passes through here on its way out.
"""

from __future__ import annotations

import re
from typing import Any

# ECMA-48: CSI (ESC [ ... final), OSC/DCS/SOS/PM/APC strings (ESC ] ... BEL or ST), then any other ESC
# pair; the 8-bit CSI and OSC introducers; then the C0 and C1 controls left (tab and newline kept),
# DEL, and Unicode bidirectional overrides and isolates.
_SEQUENCE = re.compile(
    r"\x1b\[[0-?]*[ -/]*[@-~]?"
    r"|[\x1b][\]PX^_][^\x07\x1b\x9c]*(?:\x07|\x1b\\|\x9c)?"
    r"|[\x9d\x90\x98\x9e\x9f][^\x07\x1b\x9c]*(?:\x07|\x1b\\|\x9c)?"
    r"|\x9b[0-?]*[ -/]*[@-~]?"
    r"|\x1b[ -~]?"
    r"|[\x00-\x08\x0b\x0c\x0e-\x1f\x7f\x80-\x9f\u202a-\u202e\u2066-\u2069]"
)
_LINE_BREAK = re.compile(r"\r\n|[\r\n\u0085\u2028\u2029]")
_MENTION = re.compile(r"@(here|channel|everyone|all)\b", re.I)


def printable(text: str) -> str:
    """``text`` without control sequences; newlines and tabs kept (``\\r\\n`` becomes ``\\n``)."""
    text = _LINE_BREAK.sub("\n", str(text))
    return _SEQUENCE.sub("", text)


def one_line(text: str) -> str:
    """``text`` as one printable line: every line break becomes a space."""
    return _SEQUENCE.sub("", _LINE_BREAK.sub(" ", str(text)))


def chat_text(text: str) -> str:
    """One line for a Slack-compatible chat: Slack's three control characters escaped
    (https://api.slack.com/reference/surfaces/formatting#escaping), so ``<!channel>`` and
    ``<https://evil|docs>`` stay text, and ``@here``-style mentions broken by a word joiner, so
    Mattermost and Rocket.Chat do not ping a whole channel."""
    text = one_line(text).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return _MENTION.sub(lambda m: "@\u2060" + m.group(1), text)


def all_one_line(value: Any) -> Any:
    """Every string inside ``value`` (dicts, lists, tuples) made one printable line."""
    if isinstance(value, str):
        return one_line(value)
    if isinstance(value, dict):
        return {k: all_one_line(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(all_one_line(v) for v in value)
    return value
