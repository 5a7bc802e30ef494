"""Evidence bundles (docs/reference.md#recorded-hosts-and-bundles), written so a crash never leaves a half bundle.

Everything goes to a hidden temporary folder next to the destination; ``finish``
writes the JSON files and renames it into place. Raw outputs are written the
moment each command returns, so an interrupted run still keeps them (marked
partial). Evidence can hold what a host would not show everyone: every file is
0600 and every folder 0700, whatever the umask. ``manifest.sha256`` holds the
manifest's own hash, so ``postmortem --verify`` covers exit codes, argv and the
alert as well as the files.
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
from urllib.parse import quote, unquote

from nightowl.engine.runner import HostRun
from nightowl.transports.base import CommandResult


def new_run_id(runbook_id: str) -> str:
    """``<UTC time>-<runbook>-<6 hex>``: sorts by time, says what ran, unique without coordination."""
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    return f"{stamp}-{runbook_id}-{secrets.token_hex(3)}"


_MAX_DIRNAME = 200  # file systems allow 255 bytes per name


def host_dirname(host: str) -> str:
    """A host's folder name: percent-encoded, so it is unique and reversible (``gpu 1`` -> ``gpu%201``,
    ``gpu_1`` stays ``gpu_1``); ``.``/``..`` and hidden names are encoded; an over-long name is cut and
    suffixed with its hash (still unique; the manifest keeps the full name)."""
    encoded = quote(host, safe="-_") or "%"
    if encoded.startswith("."):
        encoded = "%2E" + encoded[1:]
    if len(encoded) > _MAX_DIRNAME:
        encoded = (
            encoded[: _MAX_DIRNAME - 17].rstrip("%0123456789ABCDEF")
            + "~"
            + hashlib.sha256(host.encode()).hexdigest()[:16]
        )
    return encoded


def host_from_dirname(name: str) -> str:
    """The host a folder was named after (the inverse of ``host_dirname`` for names it did not cut)."""
    return unquote(name)


def write_private(path: Path, text: str) -> bytes:
    """Write ``text`` to a file only its owner can read (0600 from creation, not chmod afterwards).

    Returns the bytes stored (UTF-8, undecodable input kept as it came), so the caller can hash them
    without reading the file back."""
    data = text.encode("utf-8", errors="surrogateescape")
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_NOFOLLOW", 0), 0o600)
    with os.fdopen(fd, "wb") as handle:
        os.fchmod(handle.fileno(), 0o600)
        handle.write(data)
    return data


def _private_dir(path: Path) -> Path:
    path.mkdir(mode=0o700, exist_ok=True)
    os.chmod(path, 0o700)
    return path


COMPACT_AFTER_HOSTS = 16  # a bundle of more hosts (a sweep) writes its JSON without indentation
MANIFEST_HASH = "manifest.sha256"  # sha256sum format: `<hex>  manifest.json`
NO_EXIT_STATUS = "none"  # a `.rc` for a command that ended without one (connection lost, killed by a signal)


def open_regular(path: Path) -> Any:
    """``path`` opened for reading only if it is a regular file, else OSError: a FIFO or a device in a
    received bundle would block a reader forever (opened non-blocking, checked, then read blocking)."""
    import stat

    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(f"{path} is not a regular file")
        os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return os.fdopen(fd, "rb")


def read_regular_text(path: Path) -> str:
    """The text of a regular file (undecodable bytes replaced); OSError for anything else."""
    with open_regular(path) as handle:
        return handle.read().decode("utf-8", errors="replace")


def sha256_file(path: Path) -> str:
    """Hex sha256 of a regular file, read in 1 MiB blocks (OSError for a FIFO, device, folder)."""
    digest = hashlib.sha256()
    with open_regular(path) as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


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
        redact_prefilter: Callable[[str], bool] | None = None,
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
        self._hosts_made: Path | None = None
        # A full disk or an unwritable --out must not cost the verdict: the run goes on without writing and
        # ``finish`` raises BundleNotWritten (with the runs) after removing what was half written.
        self.write_error: str | None = None
        self.started = time.time()
        self.commands: list[dict[str, Any]] = []
        self._taken: dict[tuple[str, str], int] = {}
        self._lock = threading.Lock()
        self._redact = redact or (lambda text: text)
        # False only when ``redact`` would change no string inside the given text: a JSON document that
        # cannot hold a secret is written without visiting its strings one by one.
        self._redact_prefilter = redact_prefilter if redact else (lambda text: False)
        self._compact = False  # set by finish: documents of many hosts are written without indentation
        self.renamed: dict[str, str] = {}
        self._finished = False  # after an interrupt, threads still running must not write into a closed bundle
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
            made = _private_dir(self._hosts_root() / host_dirname(host))
            self._host_dirs[host] = made
        return made

    def _hosts_root(self) -> Path:
        if self._hosts_made is None:
            self._hosts_made = _private_dir(self.tmp_path / "hosts")
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
            "bytes": len(raw := stored.encode("utf-8", errors="surrogateescape")),  # as write_private stores it
            "truncated_bytes": result.stdout_truncated_bytes,
            "late": result.late,
            "sha256": (digest := hashlib.sha256(raw).hexdigest()),
            "file": None,
        }
        rel: str | None = None
        if keep_output and self.write_error is None:
            try:
                rel = self._write_output(host, kind, result, stored, (len(raw), digest))
            except OSError as exc:
                self._failed(exc)
            entry["file"] = rel
        with self._lock:
            if self._finished:
                return None
            self.commands.append(entry)
        return rel

    def _write_output(
        self, host: str, kind: str, result: CommandResult, stored: str, known: tuple[int, str]
    ) -> str | None:
        with self._lock:
            if self._finished:
                return None
            stem = self._next_stem(host, kind)
        folder = self.host_dir(host)
        self._store(folder / f"{stem}.out", stored, known)
        if result.stderr:
            self._store(folder / f"{stem}.err", self._redact(result.stderr))
        if result.rc:  # exit 0 is the absence of the file, as in a recorded host (and in manifest.json)
            self._store(folder / f"{stem}.rc", f"{result.rc}\n")
        elif result.rc is None and not result.timed_out:  # ended without an exit status: never replayed as 0
            self._store(folder / f"{stem}.rc", f"{NO_EXIT_STATUS}\n")
        if result.timed_out:
            self._store(folder / f"{stem}.timeout", f"{result.duration:.3f}\n")
        if result.stdout_truncated_bytes:  # replayed as cut too: "no Xid" in a cut log says so again
            self._store(folder / f"{stem}.truncated", f"{result.stdout_truncated_bytes}\n")
        if result.late:  # replayed as late too: the recording says nothing about the host either
            self._store(folder / f"{stem}.late", f"{result.late}\n")
        return f"hosts/{host_dirname(host)}/{stem}.out"

    def _store(self, path: Path, text: str, known: tuple[int, str] | None = None) -> None:
        """Write a bundle file (owner-only) and remember its size and sha256 for the manifest (``known``:
        the caller hashed these very bytes already)."""
        data = write_private(path, text)
        entry = known or (len(data), hashlib.sha256(data).hexdigest())
        with self._lock:
            self._stored[path.relative_to(self.tmp_path).as_posix()] = entry

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
            for ext in ("out", "err", "rc", "timeout"):
                old = folder / f"{kind}.{ext}"
                if old.exists():
                    new = folder / f"{kind}.1.{ext}"
                    old.rename(new)
                    known = self._stored.pop(old.relative_to(self.tmp_path).as_posix(), None)
                    if known is not None:
                        self._stored[new.relative_to(self.tmp_path).as_posix()] = known
            base = f"hosts/{host_dirname(host)}/{kind}"
            self.renamed[f"{base}.out"] = f"{base}.1.out"
            for command in self.commands:
                if command["file"] == f"{base}.out":
                    command["file"] = f"{base}.1.out"
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
        self._compact = len(runs) > COMPACT_AFTER_HOSTS
        if self.write_error is not None:
            raise OSError(self.write_error)
        summary = triage_summary(self.runbook_id, self.run_id, self.final_path, runs)
        self._write_json("verdicts.json", summary)
        self._write_json("trace.json", trace_document(self.runbook_id, self.run_id, runs, self._redact))
        manifest = {
            "run_id": self.run_id,
            "runbook": self.runbook_id,
            "started": self.started,
            "finished": time.time(),
            "partial": partial,
            "commands": self.commands,
            **(extra or {}),
        }
        self._write_json("manifest.json", manifest)
        if render_postmortem is not None:
            self._store(self.tmp_path / "postmortem.md", _safe_render(render_postmortem, self.tmp_path))
        manifest["files"] = self._file_hashes()
        self._write_json("manifest.json", manifest)
        write_private(self.tmp_path / MANIFEST_HASH, f"{sha256_file(self.tmp_path / 'manifest.json')}  manifest.json\n")
        os.replace(self.tmp_path, self.final_path)
        return self.final_path

    def _file_hashes(self) -> list[dict[str, Any]]:
        """Every file of the bundle with its size and sha256: the folder is listed, so a file written by
        someone else (the postmortem renderer's HTML) is read and hashed; one this writer stored is not,
        unless its size on disk says it changed."""
        files = []
        for path in sorted(self.tmp_path.rglob("*")):
            if path.is_file() and path.name not in ("manifest.json", MANIFEST_HASH):
                rel = path.relative_to(self.tmp_path).as_posix()
                size = path.stat().st_size
                known = self._stored.get(rel)
                digest = known[1] if known is not None and known[0] == size else sha256_file(path)
                files.append({"path": rel, "bytes": size, "sha256": digest})
        return files

    def _write_json(self, name: str, data: Any) -> None:
        # Facts were parsed from unscrubbed output, so every string is scrubbed on the way out
        # (string by string: scrubbing the JSON text could break its quoting). A document the prefilter
        # clears (C-encoded once, non-ASCII as is, so each string appears in it as written) is not walked.
        if self._redact_prefilter is None or self._redact_prefilter(json.dumps(data, ensure_ascii=False, default=str)):
            data = _scrub(data, self._redact)
        # Indented for people; a sweep's documents (many hosts) are written compact, which lets json use
        # its C encoder (the indented one is pure Python: a second for a 1,000-host trace).
        indent = None if self._compact else 2
        self._store(self.tmp_path / name, json.dumps(data, indent=indent, default=str) + "\n")


def _scrub(value: Any, redact: Callable[[str], str]) -> Any:
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, dict):
        return {key: _scrub(item, redact) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_scrub(item, redact) for item in value]
    return value


def _renamed_in(text: str, renamed: dict[str, str]) -> str:
    """Rename inside a possibly comma-joined list of files (job runs cite one file per member)."""
    return ", ".join(renamed.get(part, part) for part in text.split(", "))


def _safe_render(render: Callable[[Path], str], folder: Path) -> str:
    """A broken template must not cost the evidence: the bundle is still written."""
    try:
        return render(folder)
    except Exception as exc:  # noqa: BLE001
        return f"# Postmortem draft\n\nThe draft could not be rendered: {type(exc).__name__}: {exc}\n"


def host_entry(run: HostRun) -> dict[str, Any]:
    """One host of ``verdicts.json``: host, status, verdict, path, error, duration."""
    return {
        "host": run.host,
        "status": run.status,
        "verdict": run.verdict,
        "path": run.path,
        "error": run.error,
        "duration": round(run.duration, 3),
    }


def triage_summary(runbook_id: str, run_id: str, bundle: Path | None, runs: list[HostRun]) -> dict[str, Any]:
    """The JSON of ``triage --format json`` and of ``verdicts.json`` (docs/reference.md#verdicts).

    Runbook, run id, bundle folder, and one entry per host in the order the hosts were given.
    """
    summary: dict[str, Any] = {
        "runbook": runbook_id,
        "run_id": run_id,
        "bundle": str(bundle) if bundle else None,
        "hosts": [host_entry(r) for r in runs],
    }
    job = next((r.job for r in runs if r.job is not None), None)
    if job is not None:  # scope: job: one verdict, the members' roles and what differs between them
        verdict = next((r.verdict for r in runs if r.verdict), None)
        summary["job"] = {**job, "verdict": verdict}
    return summary


def trace_document(
    runbook_id: str, run_id: str, runs: list[HostRun], redact: Callable[[str], str] = str
) -> dict[str, Any]:
    """``trace.json``: per host every node visited, every condition with the values it read, every collector."""
    hosts = []
    for run in runs:
        collectors = {
            entry: {
                "status": c.status,
                "reason": c.reason,
                "file": c.file,
                "parse_error": c.parse_error,
                "attempts": [[redact(arg) for arg in a.argv] for a in c.attempts],
            }
            for entry, c in run.collections.items()
        }
        hosts.append(
            {
                "host": run.host,
                "status": run.status,
                "error": run.error,
                "started": run.started,
                "duration": run.duration,
                "path": run.path,
                "nodes": [dict(vars(v)) for v in run.visits],
                "collectors": collectors,
            }
        )
    return {"runbook": runbook_id, "run_id": run_id, "hosts": hosts}


AFTER_MANIFEST = frozenset({"status-update.md", "postmortem.html"})


def verify_bundle(bundle: Path) -> list[str]:
    """Re-hash the manifest and every file it lists; report changed, missing and unlisted files.

    The manifest itself is checked against ``manifest.sha256``, and every command's output file must be
    in its file list, so neither an edited manifest nor a file deleted from both goes unnoticed.
    """
    root = Path(bundle)
    manifest_path = root / "manifest.json"
    if not manifest_path.is_file():
        return [f"missing: manifest.json in {bundle}"]
    problems = _verify_manifest_hash(root)
    try:
        manifest = json.loads(manifest_path.read_text(encoding="utf-8"))
        listed = {str(f["path"]): str(f["sha256"]) for f in manifest.get("files", [])}
        cited = {str(c["file"]) for c in manifest.get("commands", []) if c.get("file")}
    except (OSError, ValueError, TypeError, KeyError, AttributeError) as exc:
        return [*problems, f"corrupt: manifest.json is not a bundle manifest ({type(exc).__name__}: {exc})"]
    for rel, digest in listed.items():
        path = root / rel
        if not path.is_file() or path.is_symlink():
            problems.append(f"missing: {rel}")
        elif sha256_file(path) != digest:
            problems.append(f"changed: {rel}")
    for rel in sorted(cited - set(listed)):
        if rel not in listed and _first_take(rel) not in listed:
            problems.append(f"missing: {rel} (a command's output, not in the file list)")
    for path in sorted(root.rglob("*")):
        rel = path.relative_to(root).as_posix()
        # written after the manifest: the status update (re-rendered from verdicts.json) and the
        # runbooks `triage --follow` ran, each a bundle with its own manifest under next/
        if rel in AFTER_MANIFEST or rel.startswith("next/"):
            continue
        if path.is_file() and rel not in ("manifest.json", MANIFEST_HASH) and rel not in listed:
            problems.append(f"not in manifest: {rel}")
    return problems


def _first_take(rel: str) -> str:
    """``kind.out`` renamed ``kind.1.out`` when the collector ran twice (``_next_stem``)."""
    return rel[: -len(".out")] + ".1.out" if rel.endswith(".out") else rel


def _verify_manifest_hash(root: Path) -> list[str]:
    hash_path = root / MANIFEST_HASH
    if not hash_path.is_file():
        return [f"missing: {MANIFEST_HASH} (the manifest's own hash; bundles before it have none)"]
    recorded = hash_path.read_text(encoding="utf-8", errors="replace").split(maxsplit=1)[:1]
    if recorded != [sha256_file(root / "manifest.json")]:
        return ["changed: manifest.json (its sha256 differs from manifest.sha256)"]
    return []
