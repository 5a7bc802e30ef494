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
docs/reference.md#incremental-reads.
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from nightowl.engine import layout
from nightowl.transports.base import CommandResult, Transport, is_recorded

CARRIED = "carried.json"  # at the bundle's top level: per host folder, per kind, what was carried and why


class Piece(Protocol):
    body: str
    state: dict[str, Any] | None
    gap: str | None


class CursorReader(Protocol):
    """What the engine needs of a collector's ``cursor``."""

    def commands(self, state: Mapping[str, Any] | None) -> list[tuple[tuple[str, ...], dict[str, str]]]: ...

    def read(self, argv: tuple[str, ...], stdout: str, state: Mapping[str, Any] | None) -> Piece: ...

    def keep(self, text: str) -> str: ...


@dataclass(frozen=True)
class SavedCursor:
    """A host's saved position for one kind: the reader's state, the lines carried, the bundle that read them."""

    state: dict[str, Any]
    carried: str
    bundle_id: str
    bundle_sha256: str


def digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogateescape")).hexdigest()


class CursorBook:
    """The run's positions: read from the store (``load(host, kind)``), staged per host as reads finish, and
    written into the bundle (``carried.json``) and back to the store (``commit``). ``full`` forces full reads.
    Thread-safe (hosts finish in many threads)."""

    def __init__(
        self, load: Callable[[str, str], SavedCursor | None], full: bool = False, origin: Path | None = None
    ) -> None:
        self.load = load
        self.full = full
        self.origin = origin  # the store ``load`` reads (a sweep's workers open their own book on it)
        self.staged: dict[tuple[str, str], dict[str, Any]] = {}
        self._lock = threading.Lock()

    def saved(self, host: str, kind: str) -> SavedCursor | None:
        if self.full:
            return None
        try:
            return self.load(host, kind)
        except Exception:  # noqa: BLE001 - an unreadable store means a full read, never a failed host
            return None

    def stage(self, host: str, kind: str, entry: dict[str, Any]) -> None:
        with self._lock:
            self.staged[(host, kind)] = entry

    def adopt(self, entries: list[dict[str, Any]]) -> None:
        """Entries staged in another process (a sweep's worker: fleet/shard.py)."""
        for entry in entries:
            self.stage(entry["host"], entry["kind"], entry)

    def entries_for(self, host: str) -> list[dict[str, Any]]:
        with self._lock:
            return [entry for (h, _), entry in self.staged.items() if h == host]

    def document(self) -> dict[str, Any]:
        """``carried.json``: per host folder and kind, the read (full or incremental, and why full), the argv,
        the positions before and after, and the carried text with its sha256 and the bundle it came from."""
        hosts: dict[str, dict[str, Any]] = {}
        with self._lock:
            for (host, kind), entry in sorted(self.staged.items()):
                public = {k: v for k, v in entry.items() if k not in ("host", "kind", "keep")}
                hosts.setdefault(layout.host_dirname(host), {})[kind] = public
        return {"hosts": hosts}

    def add_to(self, writer: Any) -> None:
        """Write ``carried.json`` into the bundle before it is finished (so the manifest hashes it)."""
        if self.staged:
            writer.add_file(CARRIED, json.dumps(self.document(), indent=1, sort_keys=True) + "\n")

    def commit(self, bundle: Path, save: Callable[[str, str, dict[str, Any], str, str, str], None]) -> int:
        """Save every staged position with the written bundle's id and sha256; the count saved."""
        sha = (bundle / layout.MANIFEST_HASH).read_text().split()[0]
        with self._lock:
            staged = list(self.staged.values())
        for entry in staged:
            save(entry["host"], entry["kind"], entry["state"], entry["keep"], bundle.name, sha)
        return len(staged)


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
    commands: list[tuple[str, ...]],
    deadline: float | None,
) -> Any:
    """The collector's run read incrementally, or None: the engine's ordinary path then runs ``commands``."""
    reader: CursorReader | None = getattr(collector, "cursor", None)
    if reader is None:
        return None
    if is_recorded(transport):
        return _replay(transport, collector, reader, recorder, options, deadline)
    book: CursorBook | None = getattr(options, "cursors", None)
    if book is None or options.params.get("since"):
        return None  # `since` asks for a window of the log, not the log so far
    return _live(transport, collector, reader, recorder, options, book, deadline)


def _live(
    transport: Transport,
    collector: Any,
    reader: CursorReader,
    recorder: Any,
    options: Any,
    book: CursorBook,
    deadline: float | None,
) -> Any:
    host, kind = transport.host, collector.kind
    saved = book.saved(host, kind)
    why_full = "forced full read (--full)" if book.full else "no position saved for this host yet"
    tried: list[CommandResult] = []
    if saved is not None:
        answer = _first_answer(transport, collector, reader, saved.state, options, deadline, tried)
        if answer is not None and answer[2].state is None:  # timed out or late: the host's answer, no retry
            return _finish(transport, collector, reader, recorder, options, None, tried, answer, None, deadline)
        if answer is not None and answer[2].gap is None:
            return _finish(transport, collector, reader, recorder, options, book, tried, answer, saved, deadline)
        why_full = answer[2].gap or why_full if answer is not None else "the read from the saved position failed"
    answer = _first_answer(transport, collector, reader, None, options, deadline, tried)
    if answer is not None and (answer[2].state is not None or not answer[1].ok):
        return _finish(transport, collector, reader, recorder, options, book, tried, answer, None, deadline, why_full)
    for attempt in tried:  # recorded, none kept: the ordinary commands run next
        recorder.record_command(host, kind, attempt, False)
    return None


def _first_answer(
    transport: Transport,
    collector: Any,
    reader: CursorReader,
    state: Mapping[str, Any] | None,
    options: Any,
    deadline: float | None,
    tried: list[CommandResult],
) -> tuple[tuple[str, ...], CommandResult, Piece] | None:
    """The first of the reader's commands whose output reads as a position (or as a gap, or a failure that
    must not be retried: a timeout, a late answer); every attempt is appended to ``tried``."""
    from nightowl.engine.runner import _timeout_for, resolve_argv

    for template, params in reader.commands(state):
        argv = resolve_argv(template, {**options.params, **params})
        if argv is None or collector.check_argv(argv) is not None:
            continue
        timeout = _timeout_for(collector, options, deadline)
        if timeout <= 0 or options.stop.is_set():
            return None
        result = transport.run(argv, timeout, kind=collector.kind)
        tried.append(result)
        if result.timed_out or result.late:
            return argv, result, _Failed()
        if not result.ok:
            continue
        piece = reader.read(argv, result.stdout, state)
        if piece.state is not None:
            return argv, result, piece
    return None


@dataclass(frozen=True)
class _Failed:
    body: str = ""
    state: dict[str, Any] | None = None
    gap: str | None = None


def _finish(
    transport: Transport,
    collector: Any,
    reader: CursorReader,
    recorder: Any,
    options: Any,
    book: CursorBook | None,
    tried: list[CommandResult],
    answer: tuple[tuple[str, ...], CommandResult, Piece],
    saved: SavedCursor | None,
    deadline: float | None,
    why_full: str | None = None,
) -> Any:
    """Record every attempt (the answer's output kept), parse carried + new, stage the position."""
    argv, result, piece = answer
    host, kind = transport.host, collector.kind
    run = None
    for attempt in tried:
        run_file = recorder.record_command(host, kind, attempt, attempt is result)
        run = run_file or run
    carried = saved.carried if saved is not None else ""
    text = carried + piece.body
    collected = parsed_run(collector, result, text, options, deadline, run)
    collected.attempts = list(tried)
    if book is not None and piece.state is not None and collected.status == "ok":
        before = saved.state if saved is not None else None
        book.stage(host, kind, {
            "host": host, "kind": kind, "read": "incremental" if saved is not None else "full",
            "why_full": None if saved is not None else why_full, "argv": list(argv), "state_before": before,
            "state": piece.state, "carried_from": None if saved is None else {
                "bundle": saved.bundle_id, "sha256": saved.bundle_sha256},
            "carried_text": carried, "carried_sha256": digest(carried), "keep": reader.keep(text),
        })  # fmt: skip
    return collected


def parsed_run(
    collector: Any, result: CommandResult, text: str, options: Any, deadline: float | None, file: str | None
) -> Any:
    """A CollectorRun for ``text`` (carried + new) as the engine's ordinary path judges an output."""
    from nightowl.engine.output_status import is_blank, output_status
    from nightowl.engine.runner import CollectorRun, _timeout_for, parse_output
    from nightowl.engine.unread import unread_facts, unreadable, unreadable_reason

    kind = collector.kind
    run = CollectorRun(kind=kind, namespace=kind, status="error", file=file)
    run.status, run.reason = output_status(result)
    if run.status != "ok":
        return run
    if is_blank(text):
        run.status, run.reason = "no_data", "the command printed nothing to read"
        return run
    budget = max(0.0, _timeout_for(collector, options, deadline))
    run.facts, run.parse_error = parse_output(collector, text, budget, result.stdout_truncated_bytes)
    if run.parse_error:
        run.status, run.reason = "error", run.parse_error
    elif unreadable(run.facts):
        assert run.facts is not None
        run.status, run.reason = "unreadable", unreadable_reason(kind, run.facts["coverage"])
        run.facts = unread_facts(run.facts)
    return run


def _replay(
    transport: Transport, collector: Any, reader: CursorReader, recorder: Any, options: Any, deadline: float | None
) -> Any:
    """A recorded host of a bundle with ``carried.json``: the same text the live run parsed."""
    folder = getattr(transport, "directory", None)
    if folder is None:
        return None
    document = Path(folder).parent.parent / CARRIED
    try:
        entry = json.loads(document.read_text())["hosts"][Path(folder).name][collector.kind]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    from nightowl.engine.runner import CollectorRun

    carried = str(entry.get("carried_text") or "")
    if digest(carried) != entry.get("carried_sha256"):
        return CollectorRun(collector.kind, collector.kind, "error", f"{CARRIED}: the carried text's sha256 differs")
    argv = tuple(entry.get("argv") or ())
    result = transport.run(argv, collector.timeout, kind=collector.kind)
    file = recorder.record_command(transport.host, collector.kind, result, True)
    piece = reader.read(argv, result.stdout, entry.get("state_before"))
    run = parsed_run(collector, result, carried + piece.body, options, deadline, file)
    run.attempts = [result]
    return run
