"""Parse results kept for the length of a run, so one output is parsed once.

A run parses each command's output (nightowl/engine/runner.py), and at its end the history store reads the
bundle back and parses the same outputs again (nightowl/history/extract.py): on a real-size GPU node (an
8-GPU ``nvidia-smi -q``, three boots of kernel log) that second pass cost as much as the first. While a
run keeps results (``keeping(kinds)``, the kinds its caller will read back), the engine leaves each parse
result of those kinds here,
keyed by its kind and the SHA-256 of the exact text its parser read; the history's reader asks for the text
it read from the bundle. A text that differs in any way (secrets scrubbed in the bundle, a parse input cut
to its head and tail, escapes stripped first) has another digest and is parsed anew, so a result found is
always the one its parser gives that text. The results are not copied: their callers only read them.
"""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

MAX_KEPT = 1024  # results kept at most (about 200 hosts); past it the history parses again, as before

_lock = threading.Lock()
_kept: dict[tuple[str, bytes], Any] = {}
_runs = [0]  # runs under way that keep results
_kinds: set[str] = set()  # the kinds they keep


def _key(kind: str, text: str) -> tuple[str, bytes]:
    return kind, hashlib.sha256(text.encode("utf-8", "surrogateescape")).digest()


def _digest_key(kind: str, text: str) -> tuple[str, bytes]:
    """The key, which is also the SHA-256 of the file holding ``text`` (as the bundle's manifest lists it)
    when ``text`` is valid UTF-8 as it is. A text holding lone surrogates (undecodable bytes kept) reads back
    from its file as another text, so its key is marked: no file digest ever finds it (``recall_file``)."""
    try:
        return kind, hashlib.sha256(text.encode("utf-8")).digest()
    except UnicodeEncodeError:
        return kind, b"surrogates:" + _key(kind, text)[1]


@contextmanager
def keeping(kinds: frozenset[str]) -> Iterator[None]:
    """Keep parse results of ``kinds`` while the block runs; they are dropped once the last such run ends."""
    with _lock:
        _runs[0] += 1
        _kinds.update(kinds)
    try:
        yield
    finally:
        with _lock:
            _runs[0] -= 1
            if not _runs[0]:
                _kept.clear()
                _kinds.clear()


def remember(kind: str, text: str, result: Any) -> None:
    """Keep ``result`` as what ``kind``'s parser gives ``text`` (only during a run, only the history's kinds)."""
    if not _runs[0] or kind not in _kinds or len(_kept) >= MAX_KEPT:
        return
    key = _digest_key(kind, text)
    with _lock:
        if _runs[0]:
            _kept[key] = result


def parse_and_keep(kind: str, parse: Callable[[str], Any], text: str) -> Any:
    """``parse(text)``, kept for a reader of the bundle: the bundle keeps ``text`` as received, and the parse
    (the collector's normaliser included, a pure function of the text) gives that reader the same result."""
    parsed = parse(text)
    remember(kind, text, parsed)
    return parsed


def recall(kind: str, text: str) -> Any | None:
    """The result kept for ``kind`` and exactly ``text``, else None."""
    if not _kept or kind not in _kinds:
        return None
    return _kept.get(_digest_key(kind, text))


def recall_file(kind: str, sha256_hex: str | None) -> Any | None:
    """The result kept for ``kind`` and the text of a file whose SHA-256 is ``sha256_hex`` (the manifest's),
    else None: the history need not read the file back, nor hash it again."""
    if not _kept or kind not in _kinds or not sha256_hex:
        return None
    try:
        return _kept.get((kind, bytes.fromhex(sha256_hex)))
    except ValueError:
        return None


def hand_over() -> dict[tuple[str, bytes], Any]:
    """Every result kept so far, forgotten here: a sweep's worker process sends them to the parent, whose
    history reads the bundle the workers wrote (nightowl/fleet/workers.py)."""
    with _lock:
        kept = dict(_kept)
        _kept.clear()
    return kept


def adopt(kept: dict[tuple[str, bytes], Any]) -> None:
    """Results another process kept (``hand_over``), for this process's runs that keep results of their kinds."""
    if not kept or not _runs[0]:
        return
    with _lock:
        for key, result in kept.items():
            if key[0] in _kinds and len(_kept) < MAX_KEPT:
                _kept[key] = result
