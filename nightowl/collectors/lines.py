"""Lines of a log found without cutting the whole text into lines: where the lines holding a hint word end
(``str.find`` walks the text in C, instead of testing the hints on each line in Python), and the lines one
at a time for a reader that stops at the first few."""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator

# What str.splitlines() cuts at ("\r\n" as one break).
_LINE_BREAK = re.compile("\r\n|[\n\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029]")


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
