"""Lines of an output as ``str.splitlines`` cuts them, found without cutting a whole megabytes-long text
into lines: whether ``"\\n"`` alone breaks it, where the lines holding a hint word end (``str.find`` walks the
text in C, instead of testing the hints on each line in Python), and the lines one at a time for a reader
that stops at the first few."""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator

# What str.splitlines() cuts at besides a newline (a carriage return and newline is one break).
OTHER_LINE_BREAKS = "\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029"
_LINE_BREAK = re.compile(f"\r\n|[\n{OTHER_LINE_BREAKS}]")


def newline_joined(text: str) -> str:
    """``text`` with the lines ``str.splitlines`` cuts joined by ``"\\n"``, for a reader that walks
    ``"\\n"``-ended lines. Most outputs break at ``"\\n"`` alone: they are returned as they are (the same
    object, a last ``"\\n"`` kept)."""
    if any(brk in text for brk in OTHER_LINE_BREAKS):
        return "\n".join(text.splitlines())
    return text


def hint_line_ends(joined: str, hints: Iterable[str]) -> list[int]:
    """Where each line of ``joined`` (lines joined by ``"\\n"``) that holds any of ``hints`` ends, ascending
    and distinct: the index of its ``"\\n"``, or ``len(joined)`` for the last line. No hint holds a ``"\\n"``."""
    find = joined.find
    ends: set[int] = set()
    for hint in hints:
        at = find(hint)
        while at >= 0:
            end = find("\n", at)
            if end < 0:
                ends.add(len(joined))
                break
            ends.add(end)
            at = find(hint, end + 1)
    return sorted(ends)


def iter_lines(text: str) -> Iterator[str]:
    """``text.splitlines()`` one line at a time: a reader that decides on the first lines of an output
    (``shows_nothing``) does not cut a whole boot log into lines first."""
    start = 0
    for brk in _LINE_BREAK.finditer(text):
        yield text[start : brk.start()]
        start = brk.end()
    if start < len(text):
        yield text[start:]
