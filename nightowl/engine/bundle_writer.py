"""Evidence bundles (docs/reference.md#recorded-hosts-and-bundles), written so a crash never leaves a half bundle.

Everything goes to a hidden temporary folder next to the destination; ``finish``
writes the JSON files and renames it into place. Raw outputs are written the
moment each command returns, so an interrupted run still keeps them (marked
partial). Evidence can hold what a host would not show everyone: every file is
0600 and every folder 0700, whatever the umask. ``manifest.sha256`` holds the
manifest's own hash, so ``postmortem --verify`` covers exit codes, argv and the
alert as well as the files.

The bundle's file names are in ``layout``, the owner-only file helpers in ``private_files``, the JSON
documents in ``bundle_summary`` and ``postmortem --verify`` in ``bundle_verify``.
"""

from __future__ import annotations

import hashlib
import json
import os
import secrets
import shutil
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from nightowl.engine import jsondoc, layout, same_file
from nightowl.engine.bundle_summary import trace_document, triage_summary
from nightowl.engine.private_files import encoded, private_dir, sha256_file, write_private
from nightowl.engine.runner import HostRun
from nightowl.transports.base import CommandResult


def new_run_id(runbook_id: str) -> str:
    """``<UTC time>-<runbook>-<6 hex>``: sorts by time, says what ran, unique without coordination."""
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    return f"{stamp}-{runbook_id}-{secrets.token_hex(3)}"


NO_EXIT_STATUS = "none"  # a `.rc` for a command that ended without one (connection lost, killed by a signal)


class BundleNotWritten(Exception):
    """The bundle could not be written (full disk, unwritable folder); the runs and their verdicts are kept."""

    def __init__(self, reason: str, runs: list[HostRun], run_id: str) -> None:
        super().__init__(reason)
        self.reason = reason
        self.runs = runs
        self.run_id = run_id


class BundleWriter:
    """Writes one evidence bundle: raw outputs as they arrive, then verdicts, trace and manifest.

    Guarantees: nothing appears at ``out_dir/<run_id>`` until :meth:`finish` renames the
    complete folder into place (until then it is a private ``.<run_id>.partial``, mode 0700);
    every raw output is on disk the moment its command returns, so an interrupted run keeps its
    evidence; outputs, argv and every JSON string pass through ``redact`` before they are
    written (``add_file`` writes as given); the manifest lists the sha256 of every file as
    stored. Implements the runner's :class:`Recorder` (thread-safe).
    """

    def __init__(
        self,
        out_dir: Path,
        runbook_id: str,
        run_id: str | None = None,
        redact: Callable[[str], str] | None = None,
    ) -> None:
        self.run_id = run_id or new_run_id(runbook_id)
        self.runbook_id = runbook_id
        self.out_dir = Path(out_dir)
        self.final_path = self.out_dir / self.run_id
        self.tmp_path = self.out_dir / f".{self.run_id}.partial"
        self._host_dirs: dict[str, Path] = {}
        # What this writer stored, by path inside the bundle: (bytes, sha256). The manifest lists every
        # file; these need not be read back (a 1,000-host sweep writes thousands of files).
        self._stored: dict[str, tuple[int, str]] = {}
        # In a repeating sweep, the files this bundle holds under hosts/ by (bytes, sha256): a later one with the
        # very same bytes (the shared query's answer stored as each reader's output, an empty listing, an exit
        # status) is linked to it.
        self._twins: dict[tuple[int, str], Path] = {}
        self._hosts_made: Path | None = None
        # A full disk or an unwritable --out must not cost the verdict: the run goes on without writing and
        # ``finish`` raises BundleNotWritten (with the runs) after removing what was half written.
        self.write_error: str | None = None
        self.started = time.time()
        self.commands: list[dict[str, Any]] = []
        self._taken: dict[tuple[str, str], int] = {}
        self._lock = threading.Lock()
        self._redact = redact or (lambda text: text)
        self._redacts = redact is not None
        self._hosts = 1  # set by finish: documents of many hosts are written without indentation (jsondoc)
        self.renamed: dict[str, str] = {}
        self._finished = False  # after an interrupt, threads still running must not write into a closed bundle
        # The run's parse results (engine/parse_memo.py), set by the session: an output stored scrubbed is noted
        # there, and what the run parsed of it is kept in ``parsed/`` (a reader of the scrubbed copy would
        # parse another text than the verdict's).
        self.parsed: Any = None
        try:
            self.out_dir.mkdir(parents=True, exist_ok=True)
            self.tmp_path.mkdir(mode=0o700)
            os.chmod(self.tmp_path, 0o700)
        except OSError as exc:
            self._failed(exc)

    def host_dir(self, host: str) -> Path:
        """The host's folder inside the bundle (``hosts/<host>/``), created on first use (0700).

        Made once per host and remembered: a sweep writes thousands of files, and re-creating and
        re-chmodding ``hosts/`` for each was most of a 1,000-host bundle's finishing time."""
        made = self._host_dirs.get(host)
        if made is None:
            made = private_dir(self._hosts_root() / layout.host_dirname(host))
            self._host_dirs[host] = made
        return made

    def _hosts_root(self) -> Path:
        if self._hosts_made is None:
            self._hosts_made = private_dir(self.tmp_path / layout.HOSTS)
        return self._hosts_made

    def record_command(self, host: str, kind: str, result: CommandResult, keep_output: bool) -> str | None:
        """Write a command's output now; only the output the run used is kept as ``<kind>.out``.

        Secrets are scrubbed (``redact``) before anything is written, the manifest included, and
        the manifest's sha256 is of what is stored.
        """
        stored = self._redact(result.stdout)
        entry: dict[str, Any] = {
            "host": host,
            "kind": kind,
            "argv": [self._redact(arg) for arg in result.argv],
            "start": result.started,
            "duration": round(result.duration, 4),
            "exit_code": result.rc,
            "timed_out": result.timed_out,
            "error": self._redact(result.error) if result.error else None,
            "bytes": len(raw := encoded(stored)),  # as write_private stores it
            "truncated_bytes": result.stdout_truncated_bytes,
            "late": result.late,
            "sha256": (digest := hashlib.sha256(raw).hexdigest()),
            "file": None,
        }
        if result.extra.get("answer_of"):  # another kind's run of the same argv: it ran once (shared_reads.py)
            entry["answer_of"] = result.extra["answer_of"]
        if result.extra.get("batch"):  # read with others in one session: its start and duration are the session's
            entry["batch"] = result.extra["batch"]
            if (seconds := result.host_seconds) is not None:  # its own time, by the host's clock
                entry["host_seconds"] = seconds
        rel: str | None = None
        if keep_output and self.write_error is None:
            try:
                rel = self._write_output(host, kind, result, raw, digest)
            except OSError as exc:
                self._failed(exc)
            entry["file"] = rel
        if self.parsed is not None and stored != result.stdout:
            self._note_scrubbed(kind, result.stdout, stored, rel)
        with self._lock:
            if self._finished:
                return None
            self.commands.append(entry)
        return rel

    def keep_for(self, parsed: Any) -> None:
        """Note outputs this writer stores scrubbed in the run's parse results (engine/parse_memo.py), which
        hand what the run parsed of them to readers scrubbed as this writer scrubs its documents."""
        self.parsed = parsed
        if parsed is not None:
            parsed.scrub_json = lambda value: _scrub(value, self._redact)

    def _note_scrubbed(self, kind: str, received: str, stored: str, rel: str | None) -> None:
        """Tell the run's parse results that the bundle stores ``stored`` where the parser read ``received``:
        whole, and as a reader's head and tail of a file bigger than the parse cap (engine/readback.py)."""
        from nightowl.engine.parse_budget import bounded_input

        self.parsed.alias(
            (received, bounded_input(received)[0]), (stored, bounded_input(stored)[0]), rel, kind.split(":")[0]
        )

    def _write_output(self, host: str, kind: str, result: CommandResult, raw: bytes, digest: str) -> str | None:
        """The output's files; ``raw`` is the scrubbed output as encoded (and hashed) once by the caller."""
        with self._lock:
            if self._finished:
                return None
            stem = self._next_stem(host, kind)
        folder = self.host_dir(host)
        self._store(folder / f"{stem}{layout.OUT}", raw, (len(raw), digest))
        if result.stderr:
            self._store(folder / f"{stem}{layout.ERR}", self._redact(result.stderr))
        if result.rc:  # exit 0 is the absence of the file, as in a recorded host (and in manifest.json)
            self._store(folder / f"{stem}{layout.RC}", f"{result.rc}\n")
        elif result.rc is None and not result.timed_out:  # ended without an exit status: never replayed as 0
            self._store(folder / f"{stem}{layout.RC}", f"{NO_EXIT_STATUS}\n")
        if result.timed_out:
            self._store(folder / f"{stem}{layout.TIMEOUT}", f"{result.duration:.3f}\n")
        if result.stdout_truncated_bytes:  # replayed as cut too: "no Xid" in a cut log says so again
            self._store(folder / f"{stem}{layout.TRUNCATED}", f"{result.stdout_truncated_bytes}\n")
        if result.late:  # replayed as late too: the recording says nothing about the host either
            self._store(folder / f"{stem}{layout.LATE}", f"{result.late}\n")
        return f"{layout.host_folder(host)}/{stem}{layout.OUT}"

    def _store(self, path: Path, text: str | bytes, known: tuple[int, str] | None = None) -> None:
        """Write a bundle file (owner-only) and remember its size and sha256 for the manifest (``known``:
        the caller hashed these very bytes already). In a repeating sweep, a file the last bundle holds with
        these very bytes is a link to it (engine/same_file.py)."""
        data = encoded(text)
        entry = known or (len(data), hashlib.sha256(data).hexdigest())
        name = path.relative_to(self.tmp_path).as_posix()
        links = same_file.active()
        if links is None or not (links.link(name, *entry, path) or self._link_twin(name, entry, path, links)):
            write_private(path, data)
        with self._lock:
            self._stored[name] = entry
            if links is not None and name.startswith(same_file.OUTPUTS):
                self._twins.setdefault(entry, path)

    def _link_twin(self, name: str, entry: tuple[int, str], path: Path, links: same_file.SameFile) -> bool:
        """Link ``path`` to a file of this bundle under hosts/ holding the same bytes (engine/same_file.py: a file
        costs the filesystem an inode, a link a twentieth of that); False: write it. No check of the file as
        ``SameFile.link`` makes: it is this writer's own, in its owner-only folder, written moments ago."""
        if not name.startswith(same_file.OUTPUTS):
            return False
        with self._lock:
            twin = self._twins.get(entry)
        if twin is None:
            return False
        try:  # a failed link (a filesystem's cap on links to one file, EMLINK) writes the file as before
            os.link(twin, path)
        except OSError:
            return False
        links.count_link()
        return True

    def _failed(self, exc: OSError) -> None:
        with self._lock:
            if self.write_error is None:
                where = f" ({exc.filename})" if exc.filename else ""
                self.write_error = f"cannot write the bundle: {exc.strerror or exc}{where}"

    def _next_stem(self, host: str, kind: str) -> str:
        """``kind`` the first time; on a second take rename to ``kind.1`` and use ``kind.2``."""
        count = self._taken.get((host, kind), 0) + 1
        self._taken[(host, kind)] = count
        if count == 1:
            return kind
        folder = self.host_dir(host)
        if count == 2:
            for ext in (layout.OUT, layout.ERR, layout.RC, layout.TIMEOUT):
                old = folder / f"{kind}{ext}"
                if old.exists():
                    new = folder / f"{kind}.1{ext}"
                    old.rename(new)
                    known = self._stored.pop(old.relative_to(self.tmp_path).as_posix(), None)
                    if known is not None:
                        self._stored[new.relative_to(self.tmp_path).as_posix()] = known
                        if self._twins.get(known) == old:  # its bytes are linked to from where it now is
                            self._twins[known] = new
            first = f"{layout.host_folder(host)}/{kind}{layout.OUT}"
            self.renamed[first] = layout.first_take(first)
            for command in self.commands:
                if command["file"] == first:
                    command["file"] = layout.first_take(first)
        return f"{kind}.{count}"

    def _fix_renamed(self, runs: list[HostRun]) -> None:
        """Point the runs at ``<kind>.1.out`` where a second take renamed the first output."""
        if not self.renamed:
            return
        for run in runs:
            for collection in run.collections.values():
                if collection.file:
                    collection.file = _renamed_in(collection.file, self.renamed)
            for item in (run.verdict or {}).get("evidence", []):
                if item.get("source"):
                    item["source"] = _renamed_in(item["source"], self.renamed)

    def scrub(self, text: str) -> str:
        """``text`` as this writer stores outputs: secrets scrubbed (``redact``)."""
        return self._redact(text)

    def add_file(self, name: str, text: str) -> None:
        """Add a file at the bundle's top level (``runbook.yaml``); hashed into the manifest by :meth:`finish`."""
        if self.write_error is None:
            try:
                self._store(self.tmp_path / name, text)
            except OSError as exc:
                self._failed(exc)

    def finish(
        self,
        runs: list[HostRun],
        partial: bool = False,
        render_postmortem: Callable[[Path], str] | None = None,
        extra: dict[str, Any] | None = None,
    ) -> Path:
        """Write verdicts.json, trace.json, the postmortem draft and the manifest; move the bundle into place.

        Returns the bundle's final folder. ``partial`` marks an interrupted run in the manifest;
        ``extra`` adds top-level manifest keys (the receiver's ``alert``). A template that fails
        costs only the draft: the bundle is still written. Call once. When the disk or the folder
        refused a write, raise BundleNotWritten (the runs kept, nothing half written left behind).
        """
        with self._lock:
            self._finished = True
        if self.write_error is None:
            try:
                return self._finish(runs, partial, render_postmortem, extra)
            except OSError as exc:
                self._failed(exc)
        shutil.rmtree(self.tmp_path, ignore_errors=True)
        raise BundleNotWritten(self.write_error or "cannot write the bundle", runs, self.run_id)

    def _finish(
        self,
        runs: list[HostRun],
        partial: bool,
        render_postmortem: Callable[[Path], str] | None,
        extra: dict[str, Any] | None,
    ) -> Path:
        self._fix_renamed(runs)
        self._hosts = len(runs)
        if self.write_error is not None:
            raise OSError(self.write_error)
        summary = triage_summary(self.runbook_id, self.run_id, self.final_path, runs)
        self._write_json(layout.VERDICTS, summary)
        self._write_json(layout.TRACE, trace_document(self.runbook_id, self.run_id, runs, self._redact))
        manifest = {
            "run_id": self.run_id,
            "runbook": self.runbook_id,
            "started": self.started,
            "finished": time.time(),
            "partial": partial,
            "commands": self.commands,
            **(extra or {}),
        }
        if replayed := [run.host for run in runs if run.replayed]:
            manifest["replayed_hosts"] = replayed  # evidence from recordings: capture time is the replay's
        self._write_parsed()
        if render_postmortem is not None:
            self._write_json(layout.MANIFEST, manifest)  # the renderer reads the bundle, its manifest too
            self._store(self.tmp_path / layout.POSTMORTEM, _safe_render(render_postmortem, self.tmp_path))
        manifest["files"] = self._file_hashes()
        self._write_json(layout.MANIFEST, manifest)
        digest = self._stored[layout.MANIFEST][1]  # of the bytes just written (_store)
        write_private(self.tmp_path / layout.MANIFEST_HASH, f"{digest}  {layout.MANIFEST}\n")
        os.replace(self.tmp_path, self.final_path)
        if (links := same_file.active()) is not None:
            links.remember(self.final_path, self._stored)
        return self.final_path

    def _write_parsed(self) -> None:
        """``parsed/<output>.json``: what the run parsed of each output it stored scrubbed, its strings
        scrubbed too (docs/contract-extensions.md), so a later reader sees the verdict's parse."""
        if self.parsed is None:
            return
        self.parsed.rename(self.renamed)
        for rel, (kind, result) in sorted(self.parsed.scrubbed_results().items()):  # JSON, scrubbed already
            document = {"kind": kind, "file": rel, "result": result}
            path = self.tmp_path / layout.parsed_copy(rel)
            for folder in reversed([path.parent, *path.parent.parents][: len(Path(rel).parts)]):
                private_dir(folder)  # parsed/, parsed/hosts/, parsed/hosts/<host>/: owner-only, as every folder
            self._store(path, json.dumps(_scrub(document, self._redact), ensure_ascii=False, default=str) + "\n")

    def _file_hashes(self) -> list[dict[str, Any]]:
        """Every file of the bundle with its size and sha256: the folder is listed, so a file written by
        someone else (the postmortem renderer's HTML) is read and hashed; one this writer stored is not,
        unless its size on disk says it changed."""
        files = []
        for path in sorted(self.tmp_path.rglob("*")):
            if path.is_file() and path.name not in (layout.MANIFEST, layout.MANIFEST_HASH):
                rel = path.relative_to(self.tmp_path).as_posix()
                size = path.stat().st_size
                known = self._stored.get(rel)
                digest = known[1] if known is not None and known[0] == size else sha256_file(path)
                files.append({"path": rel, "bytes": size, "sha256": digest})
        return files

    def _write_json(self, name: str, data: Any) -> None:
        # Facts were parsed from unscrubbed output, so every string is scrubbed on the way out (string by
        # string: scrubbing the JSON text could break its quoting). No prefilter first: encoding a document to
        # look for trigger words in it cost as much as the walk (more for a document without any: 1.3 and 6.6
        # ms against a sweep manifest's 214 KB), and a sweep's trace always holds one ("Pass-Through").
        if self._redacts:
            data = _scrub(data, self._redact)
        # Indented for people; a sweep's documents (many hosts) are written compact (nightowl/engine/jsondoc.py).
        self._store(self.tmp_path / name, jsondoc.dumps(data, self._hosts) + "\n")


def _scrub(value: Any, redact: Callable[[str], str]) -> Any:
    """``value`` with every string in it scrubbed. A list or dict met again (the same object: a verdict's evidence
    and the trace's condition reads cite the same facts, an 8-GPU list three times a host) is scrubbed once."""
    return _scrub_in(value, redact, {})


def _scrub_in(value: Any, redact: Callable[[str], str], done: dict[int, tuple[Any, Any]]) -> Any:
    # The leaves (plain strings, numbers, booleans, None) are answered inside the comprehensions: a sweep's
    # documents hold tens of thousands of them, and a call of this function per leaf was most of the walk.
    # ``done``: id -> (the container, its scrubbed copy); holding the container keeps its id from being reused.
    if isinstance(value, str):
        return redact(value)
    if not isinstance(value, (dict, list, tuple)):
        return value
    seen = done.get(id(value))
    if seen is not None and seen[0] is value:
        return seen[1]
    if isinstance(value, dict):
        scrubbed: Any = {
            key: redact(item) if type(item) is str else item if type(item) in _LEAVES else _scrub_in(item, redact, done)
            for key, item in value.items()
        }
    else:
        scrubbed = [
            redact(item) if type(item) is str else item if type(item) in _LEAVES else _scrub_in(item, redact, done)
            for item in value
        ]
    done[id(value)] = (value, scrubbed)
    return scrubbed


# Types ``_scrub`` returns as they are (exactly these: a subclass of str still goes through ``_scrub``).
_LEAVES = frozenset({int, float, bool, type(None)})


def _renamed_in(text: str, renamed: dict[str, str]) -> str:
    """Rename inside a possibly comma-joined list of files (job runs cite one file per member)."""
    return ", ".join(renamed.get(part, part) for part in text.split(", "))


def _safe_render(render: Callable[[Path], str], folder: Path) -> str:
    """A broken template must not cost the evidence: the bundle is still written."""
    try:
        return render(folder)
    except Exception as exc:  # noqa: BLE001
        return f"# Postmortem draft\n\nThe draft could not be rendered: {type(exc).__name__}: {exc}\n"
