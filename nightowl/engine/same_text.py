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
import hashlib
import pickle
import threading
from collections.abc import Iterator
from typing import Any

MAX_TEXT_CHARS = 1024 * 1024  # larger: a full read (a boot's log, -q -x), rarely the same next round; not kept
MAX_TEXTS = 16384  # distinct outputs kept (about nine per host of a 1,800-host sweep); the oldest go first

Key = tuple[str, str, int, bytes, int]
# The host whose output is being parsed (engine.runner.collect_on sets it); None: no host, nothing kept.
HOST: contextvars.ContextVar[str | None] = contextvars.ContextVar("nightowl_same_text_host", default=None)


class SameText:
    """Parse results by (host, kind, collector, SHA-256 of the text, bytes cut); thread-safe, least recently used
    out."""

    def __init__(self, size: int = MAX_TEXTS) -> None:
        self.size = size
        self._kept: collections.OrderedDict[Key, tuple[Any, bytes]] = collections.OrderedDict()
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    @staticmethod
    def key(collector: Any, text: str, cut_bytes: int) -> Key | None:
        """The text's key; None outside a host's collector or for a long text (nothing is kept for it)."""
        host = HOST.get()
        if host is None or len(text) > MAX_TEXT_CHARS:
            return None
        digest = hashlib.sha256(text.encode("utf-8", "surrogateescape")).digest()
        return (host, str(getattr(collector, "kind", "")), id(collector), digest, cut_bytes)

    def get(self, key: Key) -> tuple[Any, dict[str, Any]] | None:
        """(the parse result, a fresh copy of the facts) kept for ``key``, or None."""
        with self._lock:
            found = self._kept.get(key)
            if found is None:
                self.misses += 1
                return None
            self._kept.move_to_end(key)
            self.hits += 1
        parsed, facts = found
        return parsed, pickle.loads(facts)  # noqa: S301 - bytes this process pickled itself

    def put(self, key: Key, parsed: Any, facts: dict[str, Any]) -> None:
        """Keep what a clean parse gave (facts that cannot be pickled are simply not kept)."""
        try:
            blob = pickle.dumps(facts, protocol=pickle.HIGHEST_PROTOCOL)
        except (pickle.PicklingError, TypeError, AttributeError):
            return
        with self._lock:
            self._kept[key] = (parsed, blob)
            self._kept.move_to_end(key)
            while len(self._kept) > self.size:
                self._kept.popitem(last=False)


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


def keep(key: Key | None, parsed: Any, facts: dict[str, Any]) -> None:
    """Keep a clean parse of the text of ``key`` (from ``recalled``) while a memo is in force."""
    memo = _active
    if memo is not None and key is not None:
        memo.put(key, parsed, facts)


def active() -> SameText | None:
    """The memo in force (``remembering``), else None: a one-shot run parses every text it reads."""
    return _active


@contextlib.contextmanager
def remembering(size: int = MAX_TEXTS) -> Iterator[SameText]:
    """Keep parse results for as long as the block runs (a repeated sweep's life), then forget them."""
    global _active
    previous, _active = _active, SameText(size)
    try:
        yield _active
    finally:
        _active = previous
