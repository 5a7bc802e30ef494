"""How much of an output its parser read: lines with text, lines of a known shape, and whether the parse
found what it needs to stand for the whole (collectors/readable.yaml).

An output with text from which nothing needed was recognised is *unreadable*: the engine gives its
collector that status, keeps none of its facts, and a verdict that would rest on it becomes "cannot
judge" (docs/reference.md#unreadable). Unread is neither healthy nor a fault.
"""

from __future__ import annotations

import functools
import re
from pathlib import Path
from typing import Any

from nightowl.collectors.normalise import SAMPLE_LINES, normalise

READABLE_FILE = Path(__file__).with_name("readable.yaml")
# How many of the first unrecognised lines a coverage keeps (and the "cannot judge" reason quotes).
UNREAD_SAMPLE = 3
_TEXT_LINE = re.compile(r"^[ \t]*\S", re.M)


@functools.cache
def _rules() -> dict[str, tuple[tuple[str, ...], re.Pattern[str] | None]]:
    from nightowl.knowledge import load_yaml

    data = load_yaml(READABLE_FILE) or {}
    rules = {}
    for kind, entry in data.items():
        needs = tuple(entry.get("needs") or ())
        shapes = entry.get("shapes") or ()
        pattern = re.compile("^(?:" + "|".join(f"(?:{shape})" for shape in shapes) + ")", re.M) if shapes else None
        rules[kind] = (needs, pattern)
    return rules


def _present(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, (int, float)):
        return value != 0
    return bool(value)


def _needed(facts: dict[str, Any], name: str) -> bool:
    """Whether a needed fact was found: non-empty, non-zero or true; ``name?``: any value but null (an exit
    status of 0 is a finding)."""
    if name.endswith("?"):
        return facts.get(name[:-1]) is not None
    return _present(facts.get(name))


def assess(kind: str, text: str, facts: dict[str, Any] | None) -> dict[str, Any]:
    """``{"coverage": {lines, recognised, understood, unread}, "normalised": [families]}`` for one output.

    ``understood`` is False when the output has text and its parse found none of the kind's needs (or,
    for a kind judged by shapes alone, no line of a known shape)."""
    reading = normalise(text, kind)
    body = reading.text
    lines = len(_TEXT_LINE.findall(body))
    needs, pattern = _rules().get(kind, ((), None))
    recognised, unread = _recognised(body, pattern, lines)
    if needs:
        understood = lines == 0 or any(_needed(facts or {}, name) for name in needs)
        if not understood and pattern is None:
            recognised = 0
    else:
        understood = lines == 0 or pattern is None or recognised > 0
    coverage: dict[str, Any] = {
        "lines": lines,
        "recognised": recognised if pattern is not None or not understood else lines,
        "understood": understood,
        "unread": unread if not understood or pattern is not None else [],
    }
    return {"coverage": coverage, "normalised": list(reading.families)}


def _recognised(body: str, pattern: re.Pattern[str] | None, lines: int) -> tuple[int, list[str]]:
    """Lines of a known shape and the first few that are not (without a pattern: every line, none)."""
    if pattern is None:
        first = [line.strip()[:160] for line in body.split("\n", 40)[:40] if line.strip()][:UNREAD_SAMPLE]
        return lines, first
    # Counted in C over the whole text (a boot log is megabytes); the unread sample from its first lines.
    recognised = min(lines, sum(1 for _ in pattern.finditer(body)))
    unread: list[str] = []
    for line in body.split("\n", SAMPLE_LINES)[:SAMPLE_LINES]:
        if line.strip() and not pattern.match(line):
            unread.append(line.strip()[:160])
            if len(unread) >= UNREAD_SAMPLE:
                break
    return recognised, unread
