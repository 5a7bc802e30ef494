"""Incremental reads: a collector that can read only what a source added since the last read (issue 46).

A collector may carry a ``cursor`` (the kernel log's: collectors/gpu/kernel_log/cursor.py): argvs for a saved
position, the reading of what they print (the new part, the position after it, or why it does not follow the
last read) and ``keep`` (what later reads need of the text so far). The engine knows nothing of what the text
means: it runs the argvs, parses ``carried + new`` with the collector's own parser, and stages the position.

Where a run has a :class:`CursorBook` (``RunOptions.cursors``: the sweeping machine's history store, read by
``load``), a host's read starts from its saved position; a gap that cannot be proven closed is a full read, and
the bundle's ``carried.json`` says why. The positions are saved only once the bundle is written
(:meth:`CursorBook.commit`, with the bundle's id and sha256), so a carried line always names a bundle that
exists. A replay of such a bundle reads ``carried.json`` back and parses the same text: the same verdict.

A reader whose later reads add nothing to a full text they stand for (``cites_text``: the cheap-first readers,
collectors/gpu/nvidia_smi/cheap.py) is not copied into each bundle: its entry cites the full read's own output
file (``carried_file``, in the bundle ``carried_from`` names, whose manifest lists the file's sha256), and its
saved row stays the full read's until the next full read, so a pruned full read drops the row (a full read
next). Any other carried text is copied into one bundle's carried.json, the first read to carry it; the reads
after it that carry the same text on (a quiet log: no new line the reader keeps) cite that entry
(``carried_in``), and the row keeps naming that bundle. docs/reference.md#incremental-reads.
"""

from __future__ import annotations

import hashlib
import json
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import Any, Protocol

from nightowl.engine import jsondoc, layout
from nightowl.engine.runbook_data import split_entry
from nightowl.engine.shared_reads import SharedReads
from nightowl.transports.base import CommandResult, Transport, is_recorded

CARRIED = "carried.json"  # at the bundle's top level: per host folder, per kind, what was carried and why
TEXT_FILE = "text_file"  # a citing reader's saved state: where in its bundle the full read's output is
# A saved state whose bundle holds its carried text in full (its carried.json entry's, with this sha256): a
# read that carries the same text on cites that entry instead of copying it again.
HELD = "text_held"
# A citing reader's saved state: the facts its full read parsed of the text (a later read that adds nothing
# takes them instead of parsing the same text again). Kept out of carried.json: the bundle cites the text.
PARSED = "parsed"
# A saved state whose carried text ends settled (its reader's ``settled``: nothing near its end that later lines
# would join): a read whose new lines the reader finds ``quiet`` then adds nothing to it, told without the text,
# which stays in the store (a quiet kernel log's 0.1 MB a host, read every round for nothing).
SETTLED = "settled"
# The nightowl release whose parser gave ``PARSED``: another release's facts are never taken (a parser fixed in
# an upgrade reads the text again), and a citing reader then reads its full form anew.
PARSED_BY = "parsed_by"


_STORE_ONLY = ("host", "kind", "keep", "file", "same_text", "parsed", "settled")  # for the store, not carried.json


_ENGINE_STATE = (PARSED, PARSED_BY, HELD, SETTLED)  # what the engine adds to a reader's state: kept out of carried.json


def kept_facts(state: Mapping[str, Any], release: str) -> Mapping[str, Any] | None:
    """The last parse's facts a saved state holds (``PARSED``), where ``release``'s parser gave them; else None."""
    facts = state.get(PARSED)
    return facts if facts and isinstance(facts, Mapping) and state.get(PARSED_BY) == release else None


class Piece(Protocol):
    """What one read gave: the new text, the position after it, and why it does not follow the last read."""

    @property
    def body(self) -> str: ...

    @property
    def state(self) -> dict[str, Any] | None: ...

    @property
    def gap(self) -> str | None: ...


class CursorReader(Protocol):
    """What the engine needs of a collector's ``cursor``."""

    def commands(
        self, state: Mapping[str, Any] | None, params: Mapping[str, Any]
    ) -> list[tuple[tuple[str, ...], dict[str, str]]]:
        """(argv template, its parameters) in order: from ``state`` on, or a full read (``state`` None); none
        when the saved position cannot be read from with these runbook ``params``."""
        ...

    def read(self, argv: tuple[str, ...], stdout: str, state: Mapping[str, Any] | None) -> Piece: ...

    def keep(self, text: str) -> str: ...


def _counts_added(facts: Mapping[str, Any], read: Mapping[str, Any]) -> dict[str, Any]:
    """What a parse counts of its text (``lines_read``, ``coverage``) with ``read``'s (the new lines') added: a
    read that adds nothing its reader keeps takes the last parse's facts, and reads its own lines for these."""
    out: dict[str, Any] = {}
    if isinstance(facts.get("lines_read"), int) and isinstance(read.get("lines_read"), int):
        out["lines_read"] = facts["lines_read"] + read["lines_read"]
    before, now = facts.get("coverage"), read.get("coverage")
    if isinstance(before, dict) and isinstance(now, dict):
        out["coverage"] = {
            "lines": before.get("lines", 0) + now.get("lines", 0),
            "recognised": before.get("recognised", 0) + now.get("recognised", 0),
            "understood": bool(before.get("understood")) or bool(now.get("understood")),
            "unread": before.get("unread") or now.get("unread") or [],  # the first lines not recognised
        }
    return out


def joined(reader: Any, carried: str, body: str) -> str:
    """The text a read parses: the carried text then the new one, or as the reader's ``join`` puts them."""
    join = getattr(reader, "join", None)
    return join(carried, body) if join is not None else carried + body  # type: ignore[no-any-return]


@dataclass(frozen=True)
class SavedCursor:
    """A host's saved position for one kind: the reader's state, the lines carried, the bundle that read them."""

    state: dict[str, Any]
    carried: str
    bundle_id: str
    bundle_sha256: str
    # The carried text was left in the store ("" here): a citing reader whose row holds the full read's facts
    # (``PARSED``) needs none of it (CursorBook.saved with ``text=False``).
    text_left: bool = False


def digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogateescape")).hexdigest()


class CursorBook:
    """The run's positions: read from the store (``load(host, kind)``), staged per host as reads finish, and
    written into the bundle (``carried.json``) and back to the store (``commit``). ``full`` forces full reads.
    Thread-safe (hosts finish in many threads)."""

    def __init__(
        self,
        load: Callable[[str, str], SavedCursor | None],
        full: bool = False,
        origin: Path | None = None,
        full_every: float | None = None,
        load_state: Callable[[str, str], SavedCursor | None] | None = None,
        release: str = "",
    ) -> None:
        self.load = load
        self.full = full
        # A saved state that records its full read's time (``full_at``: a cheap-first reader's) is read in full
        # again once it is older than this many seconds (--full-every); None: never.
        self.full_every = full_every
        self.origin = origin  # the store ``load`` reads (a sweep's workers open their own book on it)
        self.load_state = load_state  # ``load`` less the carried text (SavedCursor.text_left), or None
        self.release = release  # the release whose parsers give this run's facts (``PARSED_BY``)
        self.staged: dict[tuple[str, str], dict[str, Any]] = {}
        self.shared = SharedReads()  # what readers of two kinds ask alike runs once a host (shared_reads.py)
        self._lock = threading.Lock()

    def saved(self, host: str, kind: str, text: bool = True) -> SavedCursor | None:
        """The saved position; with ``text`` False, without its carried text where the store can leave it
        (``load_state``: a cheap read's row holds a full read's 0.1 to 0.2 MB, read every round for nothing)."""
        if self.full:
            return None
        try:
            return self.load(host, kind) if text or self.load_state is None else self.load_state(host, kind)
        except Exception:  # noqa: BLE001 - an unreadable store means a full read, never a failed host
            return None

    def stage(self, host: str, kind: str, entry: dict[str, Any]) -> None:
        with self._lock:
            self.staged[(host, kind)] = entry

    def adopt(self, entries: list[dict[str, Any]]) -> None:
        """Entries staged in another process (a sweep's worker: fleet/shard.py)."""
        for entry in entries:
            self.stage(entry["host"], entry["kind"], entry)

    def news(self, host: str, kind: str) -> str | None:
        """What this run's read of ``host``'s ``kind`` found that the last one had not (None: nothing, or no
        read staged): lines its reader keeps, or a full read (a gap, or no position before)."""
        with self._lock:
            entry = self.staged.get((host, kind))
        if entry is None:
            return None
        if entry.get("read") == "full":
            return "read in full (" + str(entry.get("why_full") or "no position") + ")"
        return None if entry.get("same_text", True) else "new lines it keeps"

    def entries_for(self, host: str) -> list[dict[str, Any]]:
        with self._lock:
            return [entry for (h, _), entry in self.staged.items() if h == host]

    def document(self, scrub: Callable[[str], str] = str) -> dict[str, Any]:
        """``carried.json``: per host folder and kind, the read (full or incremental, and why full), the argv,
        the positions before and after, and the carried text with its sha256 (or, for a cited one, the file
        that holds it: ``carried_file``) and the bundle it came from. ``scrub``: the bundle's secret scrubbing,
        applied to the carried text as to every output it stores."""
        hosts: dict[str, dict[str, Any]] = {}
        with self._lock:
            for (host, kind), entry in sorted(self.staged.items()):
                public = {k: v for k, v in entry.items() if k not in _STORE_ONLY}
                for key in ("state", "state_before"):
                    if isinstance(public.get(key), dict):
                        public[key] = {k: v for k, v in public[key].items() if k not in _ENGINE_STATE}
                if "carried_text" in public:
                    public["carried_text"] = text = scrub(public["carried_text"])
                    public["carried_sha256"] = entry["carried_sha256"] = digest(text)
                hosts.setdefault(layout.host_dirname(host), {})[kind] = public
        return {"hosts": hosts}

    def add_to(self, writer: Any) -> None:
        """Write ``carried.json`` into the bundle before it is finished (so the manifest hashes it)."""
        if self.staged:
            document = self.document(getattr(writer, "scrub", str))
            hosts = len(document["hosts"])  # compact past 16 hosts read from a position (engine/jsondoc.py)
            writer.add_file(CARRIED, jsondoc.dumps(document, hosts, indent=1, sort_keys=True) + "\n")

    def commit(self, bundle: Path, save: Callable[..., None]) -> int:
        """Save every staged position with the bundle that holds its text (id and sha256; ``None`` for the text:
        the saved one stands, where the row is still the one read: ``read_from``, its bundle); the count saved. A
        read that cites its text's file (``carried_file``) saves nothing: the row stays the full read's, which is
        what the next read cites."""
        sha = (bundle / layout.MANIFEST_HASH).read_text().split()[0]
        with self._lock:
            staged = [entry for entry in self.staged.values() if "carried_file" not in entry]
        for entry in staged:
            state = entry["state"] if entry.get("file") is None else {**entry["state"], TEXT_FILE: entry["file"]}
            if entry.get("parsed") is not None:
                state = {**state, PARSED: entry["parsed"], PARSED_BY: self.release}
            if entry.get("settled") is not None:
                state = {**state, SETTLED: entry["settled"]}
            if not entry.get("same_text"):
                save(entry["host"], entry["kind"], state, entry["keep"], bundle.name, sha)
                continue
            # the text carried on unchanged: held in full by this bundle (copied here) or by the one it cites
            holder = entry["carried_from"] if entry.get("carried_in") else {"bundle": bundle.name, "sha256": sha}
            state = {**state, HELD: entry["carried_sha256"]}
            read_from = (entry.get("carried_from") or {}).get("bundle")  # the row as it was read: still that one's
            save(entry["host"], entry["kind"], state, None, holder["bundle"], holder["sha256"], read_from)
        return len(staged)


@dataclass(frozen=True)
class EngineParts:
    """What an incremental read needs of the runner, handed in by it (engine/runner.py imports this module)."""

    new_run: Callable[..., Any]  # runner.CollectorRun
    parse_output: Callable[..., tuple[dict[str, Any], str | None]]
    timeout_for: Callable[[Any, Any, float | None], float]
    resolve_argv: Callable[[tuple[str, ...], dict[str, Any]], tuple[str, ...] | None]


def waves(commands: list[str], lookup: Callable[[str], Any], options: Any) -> list[list[str]]:
    """The collector entries of one batch in the order their reads may start: where the run keeps positions
    (``options.cursors``), a collector whose cursor reads in full after news in another kind's read
    (``full_after``, e.g. nvidia-smi after the kernel log) starts once that batch's other reads are done, so
    its read can follow what they found (``CursorBook.news``); otherwise one wave."""
    if getattr(options, "cursors", None) is None:
        return [commands]
    later = [e for e in commands if getattr(getattr(lookup(split_entry(e)[0]), "cursor", None), "full_after", ())]
    first = [e for e in commands if e not in later]
    return [wave for wave in (first, later) if wave]


def cited_text(
    bundle: Path, entry: Mapping[str, Any], where: tuple[str, str] = ("", "")
) -> tuple[str | None, str | None]:
    """(the text, None) of a citing entry of ``bundle``'s carried.json (``where``: its host folder and kind),
    read from the bundle it cites (beside this one) and held to that bundle's manifest hash and the sha256 its
    manifest lists for the file: the output file a ``carried_file`` names, or for ``carried_in`` that bundle's
    carried.json, whose entry for the same host and kind holds the text (its sha256 the one cited); (None,
    why) when it cannot be."""
    found = entry.get("carried_from")
    cited: Mapping[str, Any] = found if isinstance(found, Mapping) else {}
    name = str(cited.get("bundle"))
    path = CARRIED if entry.get("carried_in") else str(entry.get("carried_file"))
    text, problem = _listed_file(bundle.parent / name, name, path, str(cited.get("sha256")))
    if text is None or not entry.get("carried_in"):
        return text, problem
    try:
        held = json.loads(text)["hosts"][where[0]][where[1]]["carried_text"]
    except (ValueError, KeyError, TypeError):
        return None, f"missing: {name} holds no carried text for {where[0]} {where[1]}"
    if digest(str(held)) != entry.get("carried_sha256"):
        return None, f"changed: {name}'s carried text for {where[0]} {where[1]} (not the sha256 cited)"
    return str(held), None


def _listed_file(earlier: Path, name: str, path: str, manifest_sha: str) -> tuple[str | None, str | None]:
    """(the text, None) of ``path`` in the bundle ``earlier`` when its manifest is the one cited and lists the
    file's sha256; (None, why) otherwise."""
    try:
        manifest = (earlier / layout.MANIFEST).read_bytes()
        if hashlib.sha256(manifest).hexdigest() != manifest_sha:
            return None, f"changed: {name} (its manifest is not the one cited)"
        document = json.loads(manifest)
        listed = {c.get("file"): c.get("sha256") for c in document.get("commands", [])}
        listed |= {f.get("path"): f.get("sha256") for f in document.get("files", [])}
        data = (earlier / path).read_bytes() if path in listed and ".." not in Path(path).parts else b""
    except FileNotFoundError:
        return None, f"not beside this bundle: {name}, whose {path} holds the carried text"
    except (OSError, ValueError, AttributeError, TypeError) as exc:
        return None, f"unreadable: {name}/{path} ({exc.__class__.__name__})"
    if path not in listed or hashlib.sha256(data).hexdigest() != listed[path]:
        return None, f"changed: {name}/{path} (not the output its manifest lists)"
    return data.decode("utf-8", "surrogateescape"), None


def cited_bundles(bundle: Path) -> set[str]:
    """The ids of the bundles ``bundle``'s carried.json cites (none when it has none or it is unreadable)."""
    try:
        hosts = json.loads((bundle / CARRIED).read_text(encoding="utf-8"))["hosts"]
        entries = [entry for kinds in hosts.values() for entry in kinds.values()]
        return {str(e["carried_from"]["bundle"]) for e in entries if isinstance(e.get("carried_from"), dict)}
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return set()


def collect(
    transport: Transport,
    collector: Any,
    recorder: Any,
    options: Any,
    parts: EngineParts,
    deadline: float | None,
) -> Any:
    """The collector's run read incrementally, or None: the engine's ordinary path then runs its commands."""
    reader: CursorReader | None = getattr(collector, "cursor", None)
    if reader is None:
        return None
    read = _Read(transport, collector, reader, recorder, options, parts, deadline)
    if is_recorded(transport):
        return read.replay()
    book: CursorBook | None = getattr(options, "cursors", None)
    if book is None or (options.params.get("since") and getattr(reader, "follows_since", True)):
        return None  # `since` asks for a window of the log, not the log so far
    return read.live(book)


Answer = tuple[tuple[str, ...], CommandResult, Piece]


@dataclass(frozen=True)
class _Failed:
    """A command that timed out or answered late: the host's answer, not retried with another command."""

    body: str = ""
    state: dict[str, Any] | None = None
    gap: str | None = None


@dataclass
class _Read:
    """One collector's incremental read on one host."""

    transport: Transport
    collector: Any
    reader: CursorReader
    recorder: Any
    options: Any
    parts: EngineParts
    deadline: float | None

    def live(self, book: CursorBook) -> Any:
        """From the saved position; a gap (or no position) means a full read, and the bundle says why."""
        saved = self._saved(book)
        why_full = "forced full read (--full)" if book.full else "no position saved for this host yet"
        stale = None if saved is None else self._stale(book, saved)
        if stale is not None:
            saved, why_full = None, stale
        tried: list[CommandResult] = []
        if saved is not None:
            answer = self._first_answer(saved.state, tried)
            if answer is not None and answer[2].state is None:  # timed out or late
                return self._finish(None, tried, answer, None)
            if answer is not None and answer[2].gap is None:
                whole, why_full = self._with_text(book, saved, answer[2].body)
                if whole is not None:
                    return self._finish(book, tried, answer, whole)
            elif answer is None:
                why_full = "no read from the saved position answered"
            else:
                why_full = answer[2].gap or why_full
        answer = self._first_answer(None, tried)
        if answer is not None and (answer[2].state is not None or not answer[1].ok):
            return self._finish(book, tried, answer, None, why_full)
        for attempt in tried:  # recorded, none kept: the ordinary commands run next
            self.recorder.record_command(self.transport.host, self.collector.kind, attempt, False)
        return None

    def _saved(self, book: CursorBook) -> SavedCursor | None:
        """The saved position, without its carried text where a read may need none of it (a citing reader's, or
        one that can tell a quiet read from its new lines alone): ``_with_text`` reads it once the answer says
        it is needed."""
        text_free = getattr(self.reader, "cites_text", False) or hasattr(self.reader, "quiet")
        return book.saved(self.transport.host, self.collector.kind, text=not text_free)

    def _kept(self, state: Mapping[str, Any]) -> Mapping[str, Any] | None:
        """``kept_facts`` of ``state`` for the run's book's release."""
        return kept_facts(state, getattr(getattr(self.options, "cursors", None), "release", ""))

    def _with_text(self, book: CursorBook, saved: SavedCursor, body: str) -> tuple[SavedCursor | None, str]:
        """(``saved`` with its carried text where this read, new part ``body``, needs it, ""), or (None, why not:
        the text could not be read, or the row is no longer the one whose position was read)."""
        if not saved.text_left or not self._needs_text(saved.state, body):
            return saved, ""
        whole = book.saved(self.transport.host, self.collector.kind)  # one query: its text and state are one row's
        if whole is None:
            return None, "the saved position's carried text could not be read from the store"
        if (whole.state, whole.bundle_id) != (saved.state, saved.bundle_id):
            return None, "the saved position changed while it was read (another run of this host saved its own)"
        return whole, ""

    def _needs_text(self, state: Mapping[str, Any], body: str) -> bool:
        """Whether ``_finish`` reads the carried text: a citing reader's row without the full read's facts
        (``PARSED``: a cheap read takes those, a full read reads anew), or a read that is not quiet on a settled
        text whose facts and bundle the row holds (``SETTLED``, ``PARSED``, ``HELD``)."""
        if getattr(self.reader, "cites_text", False):
            return self._kept(state) is None
        return not (state.get(HELD) and self._quiet_on(state, None, body))  # without the text: SETTLED decides

    def _quiet_on(self, state: Mapping[str, Any], carried: str | None, body: str) -> bool:
        """Whether ``body`` adds nothing the reader keeps to a carried text whose facts ``state`` holds for this
        release: the text ends ``settled`` (as ``state`` says, or its reader of ``carried``) and ``body`` is
        ``quiet``. ``carried`` None: the text was left in the store, and only ``state`` can say."""
        settled, quiet = getattr(self.reader, "settled", None), getattr(self.reader, "quiet", None)
        if settled is None or quiet is None or self._kept(state) is None:
            return False
        ends_settled = state[SETTLED] if SETTLED in state else carried is not None and settled(carried)
        return bool(ends_settled) and bool(quiet(body))

    def _stale(self, book: CursorBook, saved: SavedCursor) -> str | None:
        """Why a saved position may not be read from although it exists: its full read is older than
        ``book.full_every``, or the reader's ``why_full`` (a cheap-first reader's: the last full read found
        something) says so."""
        full_at = saved.state.get("full_at")
        if book.full_every is not None and isinstance(full_at, (int, float)):
            age = time.time() - full_at
            if age > book.full_every:
                return f"the last full read is {age / 3600:.1f} h old (--full-every {book.full_every / 3600:g} h)"
        if getattr(self.reader, "cites_text", False) and not saved.state.get(TEXT_FILE):
            return "the last full read's output is in no bundle to cite"
        if getattr(self.reader, "cites_text", False) and PARSED in saved.state and self._kept(saved.state) is None:
            return "the last full read's facts are another nightowl release's"
        for kind in getattr(self.reader, "full_after", ()):
            news = book.news(self.transport.host, kind)
            if news is not None:
                return f"this run's {kind} read found news ({news})"
        why_full = getattr(self.reader, "why_full", None)
        return why_full(saved.state) if why_full is not None else None

    def _first_answer(self, state: Mapping[str, Any] | None, tried: list[CommandResult]) -> Answer | None:
        """The first of the reader's commands whose output reads as a position (or a gap, or a timeout);
        every attempt is appended to ``tried``."""
        for template, params in self.reader.commands(state, self.options.params):
            argv = self.parts.resolve_argv(template, {**self.options.params, **params})
            if argv is None or self.collector.check_argv(argv) is not None:
                continue
            shared_limit = getattr(self.reader, "shares", {}).get(argv)  # one limit for every reader sharing it
            limit = self.collector if shared_limit is None else SimpleNamespace(timeout=shared_limit)
            timeout = self.parts.timeout_for(limit, self.options, self.deadline)
            if timeout <= 0 or self.options.stop.is_set():
                return None
            result = self._run(argv, timeout)
            tried.append(result)
            if result.timed_out or result.late:
                return argv, result, _Failed()
            if not result.ok:
                continue
            piece = self.reader.read(argv, result.stdout, state)
            if piece.state is not None:
                return argv, result, piece
        return None

    def _run(self, argv: tuple[str, ...], timeout: float) -> CommandResult:
        """The command's answer: an argv the reader shares (``shares``: argv -> the limit every reader runs it
        under) runs once a host and run for every kind that asks it (engine/shared_reads.py)."""

        def run() -> CommandResult:
            return self.transport.run(argv, timeout, kind=self.collector.kind)

        book: CursorBook | None = getattr(self.options, "cursors", None)
        if book is None or argv not in getattr(self.reader, "shares", ()):
            return run()
        return book.shared.run(self.transport.host, self.collector.kind, argv, timeout, run)

    def _finish(
        self,
        book: CursorBook | None,
        tried: list[CommandResult],
        answer: Answer,
        saved: SavedCursor | None,
        why_full: str | None = None,
    ) -> Any:
        """Record every attempt (the answer's output kept), parse carried + new, stage the position."""
        argv, result, piece = answer
        host, kind = self.transport.host, self.collector.kind
        file = None
        for attempt in tried:
            file = self.recorder.record_command(host, kind, attempt, attempt is result) or file
        carried = saved.carried if saved is not None else ""
        text = joined(self.reader, carried, piece.body)
        cites = getattr(self.reader, "cites_text", False)
        quiet = self._quiet(saved, carried, piece.body)
        known = self._kept(saved.state) if saved is not None and (quiet or (cites and not piece.body)) else None
        collected = self._known_run(result, known, file, piece.body if quiet else "") if known else None
        if collected is None:
            collected = self.parsed_run(result, text, file)
        collected.attempts = list(tried)
        keeps_facts = cites or hasattr(self.reader, "quiet")
        parsed = dict(known or collected.facts) if keeps_facts and isinstance(collected.facts, dict) else None
        form = getattr(piece, "read", None)  # a reader with forms (cheap, full) names the one read
        read = form or ("incremental" if saved is not None else "full")
        if form is not None and isinstance(collected.facts, dict):
            collected.facts["read_form"] = form
        if book is not None and piece.state is not None and collected.status == "ok":
            entry = self._entry(read, why_full, argv, saved, piece, carried, None if known and quiet else text, file)
            stored = parsed is not None and (saved is None or not cites)  # a citing reader's stays its full read's
            book.stage(host, kind, entry | ({"parsed": parsed} if stored else {}))
            self._name_next(argv, piece.state)
        return collected

    def _name_next(self, argv: tuple[str, ...], state: Mapping[str, Any]) -> None:
        """Tell a transport that learns what it is asked (a kept connection: transports/kept.py ``follow``) the
        argv this read's next one starts with, from the position just staged."""
        follow = getattr(self.transport, "follow", None)
        if not callable(follow):
            return
        for template, params in self.reader.commands(state, self.options.params)[:1]:
            following = self.parts.resolve_argv(template, {**self.options.params, **params})
            if following is not None and self.collector.check_argv(following) is None:
                follow(argv, following)

    def _quiet(self, saved: SavedCursor | None, carried: str, body: str) -> bool:
        """Whether this read adds nothing its reader keeps to a text whose facts the store holds (``PARSED``):
        those facts stand (the kernel log's quiet lines, a fresh list of boots). ``_quiet_on``."""
        return saved is not None and self._quiet_on(saved.state, None if saved.text_left else carried, body)

    def _known_run(self, result: CommandResult, facts: Mapping[str, Any], file: str | None, body: str) -> Any:
        """A read that adds nothing to a text whose facts the store kept (``PARSED``): those facts, not a parse of
        the same text again (the full read's parse is most of a cheap read's cost), or None where the command did
        not answer as a read must. ``body``: the new lines read, whose lines are added to what was read."""
        from nightowl.engine.output_status import output_status

        kind = self.collector.kind
        run = self.parts.new_run(kind=kind, namespace=kind, status="ok", file=file)
        run.status, run.reason = output_status(result)
        if run.status != "ok":
            return None
        run.facts = dict(facts)  # the store's row is read afresh each run; a copy keeps read_form off its state
        if body:
            budget = max(0.0, self.parts.timeout_for(self.collector, self.options, self.deadline))
            read, error = self.parts.parse_output(self.collector, body, budget, 0, None)
            if error:  # as a parse of the whole text that failed: an error, never the last facts as they were
                run.status, run.reason, run.parse_error, run.facts = "error", error, error, read
                return run
            refresh = getattr(self.reader, "refresh", _counts_added)  # what the new lines alone change
            run.facts.update(refresh(run.facts, read))
        return run

    def _entry(
        self, read: str, why_full: str | None, argv: tuple[str, ...], saved: SavedCursor | None, piece: Piece,
        carried: str, text: str | None, file: str | None,
    ) -> dict[str, Any]:  # fmt: skip
        """What is staged of one read: carried.json's entry, and what the store keeps (``keep``, ``file``)."""
        entry: dict[str, Any] = {
            "host": self.transport.host, "kind": self.collector.kind, "read": read,
            "why_full": None if saved is not None else why_full, "argv": list(argv),
            "state_before": saved.state if saved is not None else None, "state": piece.state,
            "carried_from": None if saved is None else {"bundle": saved.bundle_id, "sha256": saved.bundle_sha256},
        }  # fmt: skip
        cites = getattr(self.reader, "cites_text", False)
        if cites and saved is not None and not piece.body and saved.state.get(TEXT_FILE):
            return entry | {"carried_file": saved.state[TEXT_FILE]}  # adds nothing: cite the full read's file
        if saved is not None and saved.state.get(HELD):  # the saved bundle's carried.json holds the text: cite it
            entry |= {"carried_in": True, "carried_sha256": saved.state[HELD]}
        else:
            entry |= {"carried_text": carried, "carried_sha256": digest(carried)}
        keep = carried if text is None else self.reader.keep(text)  # None: the reader said it adds nothing
        same = saved is not None and keep == carried  # nothing new kept: the text carries on as it is
        entry |= {"keep": None if same else keep, "same_text": same, "settled": self._settled(saved, same, keep)}
        return entry | ({"file": file} if cites else {})

    def _settled(self, saved: SavedCursor | None, same: bool, keep: str) -> bool | None:
        """``SETTLED`` for the text carried on (``keep``): the saved state's where that text carries on unchanged
        and the state says it for this release (its ``PARSED_BY``: another release's reader may tell otherwise),
        else the reader's ``settled`` of it (None: a reader without one)."""
        settled = getattr(self.reader, "settled", None)
        if settled is None:
            return None
        if same and saved is not None and SETTLED in saved.state and self._kept(saved.state) is not None:
            return bool(saved.state[SETTLED])
        return bool(settled(keep))

    def parsed_run(self, result: CommandResult, text: str, file: str | None) -> Any:
        """A CollectorRun for ``text`` (carried + new) as the engine's ordinary path judges an output."""
        from nightowl.engine.output_status import is_blank, output_status, shows_nothing
        from nightowl.engine.unread import unread_facts, unreadable, unreadable_reason

        kind = self.collector.kind
        run = self.parts.new_run(kind=kind, namespace=kind, status="error", file=file)
        run.status, run.reason = output_status(result)
        if run.status != "ok":
            return run
        if is_blank(text):
            run.status, run.reason = "no_data", "the command printed nothing to read"
            return run
        # the engine's one check (a collector's own that raises leaves the output to the parse, which says why)
        if getattr(self.reader, "applies_shows_nothing", False) and shows_nothing(self.collector, text):
            return self._nothing(run, text, file)
        budget = max(0.0, self.parts.timeout_for(self.collector, self.options, self.deadline))
        cut = result.stdout_truncated_bytes
        run.facts, run.parse_error = self.parts.parse_output(self.collector, text, budget, cut, self.options.parsed)
        if run.parse_error:
            run.status, run.reason = "error", run.parse_error
        elif unreadable(run.facts):
            run.status, run.reason = "unreadable", unreadable_reason(kind, run.facts["coverage"])
            run.facts = unread_facts(run.facts)
        return run

    def _nothing(self, run: Any, text: str, file: str | None) -> Any:
        """An output that shows nothing, as the runner's ordinary path has it: no_data, or unreadable (text in
        no form the parser reads) with the parser's facts."""
        from nightowl.engine.unread import nothing_status

        run.status, run.reason, coverage = nothing_status(self.collector, text)
        if coverage is not None:
            budget = max(0.0, self.parts.timeout_for(self.collector, self.options, self.deadline))
            run.facts, run.parse_error = self.parts.parse_output(self.collector, text, budget, 0, self.options.parsed)
        return run

    def replay(self) -> Any:
        """A recorded host of a bundle with ``carried.json``: the same text the live run parsed."""
        folder = getattr(self.transport, "directory", None)
        if folder is None:
            return None
        kind = self.collector.kind
        try:
            document = json.loads((Path(folder).parent.parent / CARRIED).read_text())
            entry = document["hosts"][Path(folder).name][kind]
        except (OSError, ValueError, KeyError, TypeError):
            return None
        if entry.get("carried_file") or entry.get("carried_in"):
            cited, problem = cited_text(Path(folder).parent.parent, entry, (Path(folder).name, kind))
            if cited is None:
                return self.parts.new_run(kind, kind, "error", f"{CARRIED}: the carried text is {problem}")
            carried = cited
        else:
            carried = str(entry.get("carried_text") or "")
            if digest(carried) != entry.get("carried_sha256"):
                return self.parts.new_run(kind, kind, "error", f"{CARRIED}: the carried text's sha256 differs")
        argv = tuple(entry.get("argv") or ())
        result = self.transport.run(argv, self.collector.timeout, kind=kind)
        file = self.recorder.record_command(self.transport.host, kind, result, True)
        piece = self.reader.read(argv, result.stdout, entry.get("state_before"))
        run = self.parsed_run(result, joined(self.reader, carried, piece.body), file)
        run.attempts = [result]
        if getattr(piece, "read", None) is not None and isinstance(run.facts, dict):
            run.facts["read_form"] = entry.get("read")
        return run
