"""What one run parsed, kept with the run: its bundle's readers get the results the verdict used.

A run parses each command's output (nightowl/engine/runner.py). The bundle's readers (the history store
and the postmortem draft) read the outputs back; parsing them again cost as much as the run's own parse on
a real-size node, and where redaction changed a file (a secret inside a judged line) the scrubbed copy
parsed differently from what the verdict saw. A :class:`ParsedOutputs` belongs to one run (its
``RunContext``, nightowl/engine/context.py; the ``RunResult`` hands it on): the engine leaves each parse
result of the kinds its readers ask for here, keyed by its kind and the SHA-256 of the exact text its
parser read; the bundle writer notes, for an output it scrubbed, the digests of the file as stored
(``alias``), so a reader that asks for the stored file's text or digest gets the run's result; and the
writer keeps those results, scrubbed, in the bundle (``parsed/``, docs/contract-extensions.md) for a
reader that comes later. The results are not copied: their callers only read them.
"""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

MAX_KEPT = 1024  # results kept at most (about 200 hosts); past it a reader parses again, as before

Key = tuple[str, bytes]


def text_digest(text: str) -> bytes:
    """The SHA-256 of ``text`` as a file holding it has it (valid UTF-8 as it is); a text holding lone
    surrogates (undecodable bytes kept) reads back from its file as another text, so its digest is marked:
    no file digest ever finds it."""
    try:
        return hashlib.sha256(text.encode("utf-8")).digest()
    except UnicodeEncodeError:
        return b"surrogates:" + hashlib.sha256(text.encode("utf-8", "surrogateescape")).digest()


@dataclass(frozen=True)
class HandedOver:
    """What a sweep's worker process sends its parent (nightowl/fleet/workers.py): the results, the stored
    files' digests that stand for the texts parsed, and the files kept scrubbed (bundle path -> parse key)."""

    kept: dict[Key, Any] = field(default_factory=dict)
    aliases: dict[bytes, bytes] = field(default_factory=dict)
    scrubbed: dict[str, Key] = field(default_factory=dict)


class ParsedOutputs:
    """The parse results of one run, of the ``kinds`` its readers read back; thread-safe."""

    def __init__(self, kinds: Iterable[str] = (), to_json: Callable[[Any], Any] | None = None) -> None:
        self.kinds = frozenset(kinds)
        # How a result is written into the bundle (``collectors.base.to_jsonable``, handed in: the engine
        # knows no result types). None: the bundle keeps no results (a reader parses the file again).
        self.to_json = to_json
        self._lock = threading.Lock()
        self._kept: dict[Key, Any] = {}
        self._aliases: dict[bytes, bytes] = {}  # a stored file's digest -> the digest of the text parsed
        self._scrubbed: dict[str, Key] = {}  # bundle path of an output stored scrubbed -> its parse key
        # Scrubs a JSON value's strings as the bundle writer scrubs its documents (set by the writer: ``keep_for``).
        # The result of an output stored scrubbed was parsed from the text with its secrets: a reader gets it
        # only as JSON with its strings scrubbed (``_view``), never as the object the run judged.
        self.scrub_json: Callable[[Any], Any] | None = None
        self._views: dict[Key, Any] = {}

    def remember(self, kind: str, text: str, result: Any) -> None:
        """Keep ``result`` as what ``kind``'s parser gives ``text`` (only the kinds asked for)."""
        if kind not in self.kinds or len(self._kept) >= MAX_KEPT:
            return
        key = (kind, text_digest(text))
        with self._lock:
            self._kept[key] = result

    def parse_and_keep(self, kind: str, parse: Callable[[str], Any], text: str) -> Any:
        """``parse(text)``, kept for a reader of the bundle (the parse, normaliser included, is a pure
        function of the text)."""
        parsed = parse(text)
        self.remember(kind, text, parsed)
        return parsed

    def alias(self, parsed_texts: Iterable[str], stored_texts: Iterable[str], rel: str | None, kind: str) -> None:
        """The bundle stores ``stored_texts`` (the output scrubbed, whole and as the parser's head and tail)
        where the parser read ``parsed_texts``: a reader asking for the stored text gets the parsed one's
        result. ``rel`` is the stored file's bundle path (None: not kept as a file)."""
        parsed = [text_digest(text) for text in parsed_texts]
        with self._lock:
            for stored, source in zip((text_digest(text) for text in stored_texts), parsed, strict=False):
                self._aliases[stored] = source
            if rel is not None and parsed and kind in self.kinds:
                self._scrubbed[rel] = (kind, parsed[-1])

    def _find(self, kind: str, digest: bytes, as_json: bool) -> Any | None:
        """The result for the text of ``digest``: as kept when the run parsed that very text (the bundle stores
        it unchanged: no secret in it), or, for an output stored scrubbed and a reader of JSON, the run's
        result scrubbed (``_view``)."""
        found = self._kept.get((kind, digest))
        if found is not None or digest not in self._aliases or not as_json:
            return found
        key = (kind, self._aliases[digest])
        return self._view(key) if key in self._kept else None

    def _view(self, key: Key) -> Any | None:
        """What the run parsed of an output stored scrubbed, as the bundle keeps it: JSON, its strings scrubbed
        (None when the run was given no way to write it)."""
        if self.to_json is None or self.scrub_json is None:
            return None
        with self._lock:
            view = self._views.get(key)
        if view is None:
            view = self.scrub_json(self.to_json(self._kept[key]))
            with self._lock:
                self._views[key] = view
        return view

    def recall(self, kind: str, text: str, as_json: bool = False) -> Any | None:
        """The result kept for ``kind`` and exactly ``text``, else None; with ``as_json`` (the caller reads
        plain JSON) also where the bundle stores ``text`` for what the run parsed: the run's result, scrubbed."""
        if not self._kept or kind not in self.kinds:
            return None
        return self._find(kind, text_digest(text), as_json)

    def recall_file(self, kind: str, sha256_hex: str | None, as_json: bool = False) -> Any | None:
        """The result kept for ``kind`` and the text of a file whose SHA-256 is ``sha256_hex`` (the
        manifest's), else None: a reader need not read the file back, nor hash it again (``as_json``: as
        ``recall``)."""
        if not self._kept or kind not in self.kinds or not sha256_hex:
            return None
        try:
            return self._find(kind, bytes.fromhex(sha256_hex), as_json)
        except ValueError:
            return None

    def scrubbed_results(self) -> dict[str, tuple[str, Any]]:
        """Bundle path -> (kind, result as JSON, scrubbed) of each output stored scrubbed whose result is kept:
        what the bundle keeps in ``parsed/`` so a later reader need not parse the scrubbed copy."""
        with self._lock:
            items = list(self._scrubbed.items())
        views = {rel: (key[0], self._view(key)) for rel, key in items if key in self._kept}
        return {rel: (kind, view) for rel, (kind, view) in views.items() if view is not None}

    def rename(self, renamed: dict[str, str]) -> None:
        """Follow the writer's renames (a first take ``kind.out`` became ``kind.1.out`` when a second came)."""
        with self._lock:
            self._scrubbed = {renamed.get(rel, rel): key for rel, key in self._scrubbed.items()}

    def hand_over(self) -> HandedOver:
        """Everything kept so far, forgotten here (a worker sends it to the sweep's parent after each host)."""
        with self._lock:
            handed = HandedOver(dict(self._kept), dict(self._aliases), dict(self._scrubbed))
            self._kept.clear()
            self._aliases.clear()
            self._scrubbed.clear()
        return handed

    def adopt(self, handed: HandedOver) -> None:
        """Results another process kept (``hand_over``), for this run's readers."""
        with self._lock:
            for key, result in handed.kept.items():
                if key[0] in self.kinds and len(self._kept) < MAX_KEPT:
                    self._kept[key] = result
            self._aliases.update(handed.aliases)
            self._scrubbed.update(handed.scrubbed)
