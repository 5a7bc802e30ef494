"""The same output, the same facts: parse results kept across the runs of one process that repeats
(`nightowl sweep --every`).

A steady sweep round fetches little (docs/reference.md#incremental-reads), but most of what it fetches is
the very text the last round fetched: NVLink status and error counters, the list of boots, the Fabric
Manager's state, an empty port listing. A parser is a pure function of its text (nightowl/collectors: no
clock, no environment), so the facts it gave that text last round are the facts it gives now. While
``remembering()`` is in force, ``engine.runner.parse_output`` looks a text up here by its host (``HOST``, set
while a collector runs on one: another host's identical text is parsed for its own), its collector, its
SHA-256 and what the transport cut, before parsing it: a hit hands out a fresh copy of the facts (the run
adds to them) and the parse result itself (only read by the bundle's readers). Only clean parses are kept:
one that failed, ran out of time or could not measure its coverage is parsed again next time.
"""

from __future__ import annotations

import collections
import contextlib
import contextvars
import pickle
import threading
from collections.abc import Iterator
from typing import Any

from nightowl.engine.parse_memo import text_digest

MAX_TEXT_CHARS = 1024 * 1024  # a longer text is not kept (a full read: a boot's log, `-q -x`)
MAX_KEPT_CHARS = 32 * 1024 * 1024  # the texts kept, all hosts together; past it the least recently used go

Key = tuple[str, str, int, bytes, int]  # host, kind, collector, SHA-256 of the text, bytes cut
# The host whose output is being parsed (engine.runner.collect_on sets it); None: no host, nothing kept.
HOST: contextvars.ContextVar[str | None] = contextvars.ContextVar("nightowl_same_text_host", default=None)


class SameText:
    """The last clean parse of each host's output of each collector (only the last text can come again next
    round; one slot each, so a text that changes every round takes no more room), thread-safe, within a budget
    of kept text: the least recently used go first."""

    def __init__(self, budget: int = MAX_KEPT_CHARS) -> None:
        self.budget = budget
        self._kept: collections.OrderedDict[tuple[str, str, int], tuple[bytes, int, Any, bytes, int]] = (
            collections.OrderedDict()
        )
        self._chars = 0
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    @staticmethod
    def key(collector: Any, text: str, cut_bytes: int) -> Key | None:
        """The text's key; None outside a host's collector or for a long text (nothing is kept for it)."""
        host = HOST.get()
        if host is None or len(text) > MAX_TEXT_CHARS:
            return None
        return (host, str(getattr(collector, "kind", "")), id(collector), text_digest(text), cut_bytes)

    def get(self, key: Key) -> tuple[Any, dict[str, Any]] | None:
        """(the parse result, a fresh copy of the facts) kept for ``key``, or None."""
        slot, digest, cut = key[:3], key[3], key[4]
        with self._lock:
            found = self._kept.get(slot)
            if found is None or found[0] != digest or found[1] != cut:
                self.misses += 1
                return None
            self._kept.move_to_end(slot)
            self.hits += 1
        return found[2], pickle.loads(found[3])  # noqa: S301 - bytes this process pickled itself

    def put(self, key: Key, parsed: Any, facts: dict[str, Any], chars: int) -> None:
        """Keep what a clean parse of a text of ``chars`` characters gave, in its host's and collector's slot
        (facts that cannot be pickled are simply not kept)."""
        try:
            blob = pickle.dumps(facts, protocol=pickle.HIGHEST_PROTOCOL)
        except Exception:  # noqa: BLE001 - unpicklable or too deep: parsed again next time, as without a memo
            return
        slot = key[:3]
        with self._lock:
            older = self._kept.pop(slot, None)
            self._chars -= older[4] if older is not None else 0
            self._kept[slot] = (key[3], key[4], parsed, blob, chars)
            self._chars += chars
            while self._chars > self.budget and len(self._kept) > 1:
                _, dropped = self._kept.popitem(last=False)
                self._chars -= dropped[4]


_active: SameText | None = None


def recalled(collector: Any, text: str, cut_bytes: int, kept: Any) -> tuple[Key | None, dict[str, Any] | None]:
    """(the text's key, the facts kept for it) while a memo is in force, the parse result handed to ``kept``
    (the run's ParsedOutputs) as a parse would have; (key or None, None) when nothing is kept for it."""
    memo = _active
    key = memo.key(collector, text, cut_bytes) if memo is not None else None
    found = memo.get(key) if memo is not None and key is not None else None
    if found is None:
        return key, None
    if kept is not None:
        kept.remember(str(getattr(collector, "kind", "")), text, found[0])
    return key, found[1]


def keep(key: Key | None, parsed: Any, facts: dict[str, Any], chars: int) -> None:
    """Keep a clean parse of the text of ``key`` (from ``recalled``, ``chars`` long) while a memo is in force."""
    memo = _active
    if memo is not None and key is not None:
        memo.put(key, parsed, facts, chars)


@contextlib.contextmanager
def remembering(budget: int = MAX_KEPT_CHARS) -> Iterator[SameText]:
    """Keep parse results for as long as the block runs (a repeated sweep's life), then forget them."""
    global _active
    previous, _active = _active, SameText(budget)
    try:
        yield _active
    finally:
        _active = previous
