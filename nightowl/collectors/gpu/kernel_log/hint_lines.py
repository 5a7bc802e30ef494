"""Where the lines of a log that hold a hint word end, found in the joined text by ``str.find`` (which walks
it in C) instead of testing the hints on each line in Python."""

from __future__ import annotations

from collections.abc import Iterable


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
