"""Reading a bundle: manifest, verdicts, trace, runbook, and every file with its sha256."""

from __future__ import annotations

import json
import math
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from nightowl.engine.layout import (
    DRAFT_FILES,
    ERR,
    HOSTS,
    MANIFEST,
    MANIFEST_HASH,
    OUT,
    RC,
    RUNBOOK,
    TIMEOUT,
    TRACE,
    UNREACHABLE,
    VERDICTS,
    first_take,
    host_from_dirname,
)
from nightowl.outcome import read_bundle_outcome
from nightowl.postmortem.clocks import stamp


def _read_json(path: Path) -> Any:
    """A bundle's JSON object, or None when it is missing, unreadable, not a regular file (a FIFO
    would block) or not an object (a corrupt file)."""
    from nightowl.engine.private_files import read_regular_text

    try:
        data = json.loads(read_regular_text(path)) if path.exists() else None
    except (OSError, ValueError, RecursionError):
        return None
    return data if isinstance(data, dict) else None


# --- a received bundle is untrusted input: every field the readers use, in the shape they expect ------
_LATEST = 1e11  # seconds since the epoch: year 5138; anything later (or 1e400 = inf) is not a time


def _time(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if math.isfinite(value) and 0 <= value < _LATEST else None


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _dicts(value: Any) -> list[dict[str, Any]]:
    return [item for item in value if isinstance(item, dict)] if isinstance(value, list) else []


def _texts(value: Any) -> list[str]:
    return [item for item in value if isinstance(item, str)] if isinstance(value, list) else []


def _str_map(value: Any) -> dict[str, str]:
    return (
        {str(k): str(v) for k, v in value.items() if isinstance(v, (str, int, float))}
        if isinstance(value, dict)
        else {}
    )


def sane_manifest(manifest: dict[str, Any]) -> dict[str, Any]:
    """The manifest with every field the readers use of the type they expect; the rest dropped."""
    out = dict(manifest)
    for key in ("started", "finished"):
        out[key] = _time(manifest.get(key))
    for key in ("run_id", "runbook"):
        out[key] = _text(manifest.get(key))
    out["partial"] = manifest.get("partial") is True or isinstance(manifest.get("partial"), str)
    commands = []
    for command in _dicts(manifest.get("commands")):
        commands.append(
            {
                **command,
                "host": _text(command.get("host")),
                "kind": _text(command.get("kind")),
                "file": _text(command.get("file")),
                "argv": [str(a) for a in command["argv"]] if isinstance(command.get("argv"), list) else [],
                "start": _time(command.get("start")),
                "duration": _time(command.get("duration")),
                "exit_code": command["exit_code"]
                if isinstance(command.get("exit_code"), int) and not isinstance(command.get("exit_code"), bool)
                else None,
                "timed_out": command.get("timed_out") is True,
                "error": _text(command.get("error")),
            }
        )
    out["commands"] = commands
    replayed = manifest.get("replayed_hosts")
    out["replayed_hosts"] = [h for h in replayed if isinstance(h, str)] if isinstance(replayed, list) else []
    out["files"] = [
        f for f in _dicts(manifest.get("files")) if isinstance(f.get("path"), str) and isinstance(f.get("sha256"), str)
    ]
    alert = manifest.get("alert")
    if isinstance(alert, dict):
        clean: dict[str, Any] = {
            k: v if v is None or isinstance(v, (str, int, bool)) else None for k, v in alert.items()
        }
        clean.update(labels=_str_map(alert.get("labels")), annotations=_str_map(alert.get("annotations")))
        for key in ("name", "status", "source", "starts_at", "ends_at", "fingerprint", "generator_url"):
            clean[key] = _text(alert.get(key))
        for key in ("received_at", "queued_s"):
            clean[key] = _time(alert.get(key))
        out["alert"] = clean
    else:
        out.pop("alert", None)
    return out


def sane_verdicts(verdicts: dict[str, Any]) -> dict[str, Any]:
    hosts = []
    for host in _dicts(verdicts.get("hosts")):
        if not isinstance(host.get("host"), str):
            continue
        verdict = host.get("verdict") if isinstance(host.get("verdict"), dict) else None
        if verdict is not None:
            verdict = {
                **verdict,
                **{k: _text(verdict.get(k)) for k in ("id", "severity", "action", "summary")},
                "evidence": _dicts(verdict.get("evidence")),
            }
        hosts.append(
            {
                **host,
                "status": _text(host.get("status")),
                "verdict": verdict,
                "path": _texts(host.get("path")),
                "error": _text(host.get("error")),
            }
        )
    return {**verdicts, "runbook": _text(verdicts.get("runbook")), "hosts": hosts}


def sane_trace(trace: dict[str, Any]) -> dict[str, Any]:
    hosts = []
    for entry in _dicts(trace.get("hosts")):
        if not isinstance(entry.get("host"), str):
            continue
        nodes = [
            {
                **n,
                "collectors": n["collectors"] if isinstance(n.get("collectors"), dict) else {},
                "conditions": _dicts(n.get("conditions")),
            }
            for n in _dicts(entry.get("nodes"))
            if isinstance(n.get("node"), str)
        ]
        collectors = (
            {str(k): v for k, v in (entry.get("collectors") or {}).items() if isinstance(v, dict)}
            if isinstance(entry.get("collectors"), dict)
            else {}
        )
        hosts.append(
            {
                **entry,
                "status": _text(entry.get("status")),
                "error": _text(entry.get("error")),
                "path": _texts(entry.get("path")),
                "nodes": nodes,
                "collectors": collectors,
                "started": _time(entry.get("started")),
            }
        )
    return {**trace, "hosts": hosts}


def _sha256(path: Path) -> str:
    from nightowl.engine.private_files import sha256_file

    return sha256_file(path)


@dataclass
class EvidenceFile:
    id: str
    path: str
    sha256: str
    bytes: int
    what: str
    host: str | None = None
    state: str = "ok"  # ok | changed | missing | unlisted


# All of one draft's parsing of its bundle's outputs again: the drafts a run writes come before its verdict is
# printed, so they get little; ``nightowl postmortem`` later, with no one waiting on a verdict, gets more.
DRAFT_READ_SECONDS = 60.0
RUN_DRAFT_READ_SECONDS = 5.0


@dataclass
class Bundle:
    root: Path
    manifest: dict[str, Any]
    verdicts: dict[str, Any]
    trace: dict[str, Any]
    runbook: Any  # nightowl.engine.model.Runbook or None
    evidence: list[EvidenceFile] = field(default_factory=list)
    parsed: dict[tuple[str, str], Any] = field(default_factory=dict)  # (file, kind) -> parse result, read once
    unread: list[str] = field(default_factory=list)  # outputs (or parts) the draft could not read again, and why
    # The run's own parse results (engine/parse_memo.ParsedOutputs) while it renders its draft: the draft reads
    # what the verdict saw; None for a draft of a saved bundle (its ``parsed/`` copies serve).
    kept: Any = None
    # The history store the run recorded into (its RunContext's), for "before this incident"; None: none (a draft
    # rendered after the run reads no store).
    history: Path | None = None
    # The run's Outcome as the bundle keeps it (outcome.json, nightowl/outcome.py), or None: a bundle written
    # before it was kept, or the run's own draft (rendered before the run's Outcome is built).
    outcome: dict[str, Any] | None = None
    # Every output the draft parses again shares this deadline (engine/readback.py), however many hosts and files.
    read_by: float = field(default_factory=lambda: time.monotonic() + DRAFT_READ_SECONDS)

    @property
    def alert(self) -> dict[str, Any] | None:
        alert = self.manifest.get("alert")
        return alert if isinstance(alert, dict) else None

    @property
    def trigger(self) -> dict[str, Any] | None:
        """What started the run when no alert did: a watch burst (``origin``, ``first_line``, ``first_seen``)."""
        trigger = self.manifest.get("trigger")
        return trigger if isinstance(trigger, dict) and isinstance(trigger.get("origin"), str) else None

    @property
    def origin(self) -> str:
        """What started the run: the Outcome's ``origin`` (alert, watch, schedule, hand); for a bundle without
        outcome.json, told from the manifest as before it was kept: its alert, a watch's ``trigger``, else hand."""
        if self.outcome is not None:
            return str(self.outcome["origin"])
        return "alert" if self.alert else "watch" if self.trigger is not None else "hand"

    def cite(self, rel_path: str | None) -> EvidenceFile | None:
        if rel_path and rel_path.endswith(OUT) and not (self.root / rel_path).exists():
            first = first_take(rel_path)  # see _renumbered
            rel_path = first if (self.root / first).exists() else rel_path
        return next((e for e in self.evidence if e.path == rel_path), None)

    def host_files(self, host: str, kind: str) -> list[dict[str, Any]]:
        return [
            c
            for c in self.manifest.get("commands", [])
            if c.get("host") == host and c.get("kind") == kind and c.get("file")
        ]


def _renumbered(root: Path, manifest: dict[str, Any]) -> dict[str, Any]:
    """A collector taken twice has its first output renamed ``<kind>.1.out`` after the manifest named it
    ``<kind>.out`` (engine/bundle_writer.py ``_next_stem``): point such entries at the file that exists."""
    for command in manifest.get("commands", []):
        rel = command.get("file")
        if isinstance(rel, str) and rel.endswith(OUT) and not (root / rel).exists():
            first = first_take(rel)
            if (root / first).exists():
                command["file"] = first
    return manifest


def load(bundle: Path, read_seconds: float | None = None, with_runbook: bool = True) -> Bundle:
    """The bundle as the drafts read it; ``read_seconds`` (DRAFT_READ_SECONDS by default) bounds the parsing
    of its outputs again. ``with_runbook=False`` leaves the runbook unread (its validation imports pydantic,
    which `nightowl check` never loads): for a reader that needs no decision path."""
    root = Path(bundle)
    unusable: list[str] = []  # an outcome.json that cannot be used: told in the draft, not trusted
    data = Bundle(
        root=root,
        manifest=_renumbered(root, sane_manifest(_read_json(root / MANIFEST) or {"commands": []})),
        verdicts=sane_verdicts(_read_json(root / VERDICTS) or {"hosts": []}),
        trace=sane_trace(_read_json(root / TRACE) or {"hosts": []}),
        runbook=read_runbook(root / RUNBOOK) if with_runbook else None,
        outcome=read_bundle_outcome(root, unusable),
        unread=unusable,
    )
    data.evidence = _catalog(data)
    data.read_by = time.monotonic() + (DRAFT_READ_SECONDS if read_seconds is None else read_seconds)
    return data


def read_runbook(path: Path) -> Any:
    if not path.exists():
        return None
    from nightowl.engine.validate import RunbookInvalid, load_runbook

    try:
        return load_runbook(path).runbook
    except (RunbookInvalid, OSError, ValueError):
        return None


def _catalog(data: Bundle) -> list[EvidenceFile]:
    """Every file of the bundle, with the sha256 the manifest recorded (or, while the bundle is
    still being written, the one it will record)."""
    listed = {f["path"]: f for f in data.manifest.get("files", []) if isinstance(f, dict) and "path" in f}
    on_disk = sorted(p.relative_to(data.root).as_posix() for p in data.root.rglob("*") if p.is_file() or p.is_fifo())
    paths = [p for p in on_disk if p not in DRAFT_FILES and p not in (MANIFEST, MANIFEST_HASH)]
    paths += [p for p in listed if p not in paths and p not in DRAFT_FILES]
    described = _describe_commands(data.manifest)
    order = {p: i for i, p in enumerate(described)}
    paths.sort(key=lambda p: (0 if p.startswith(HOSTS + "/") else 1, order.get(p.rsplit(".", 1)[0] + OUT, 999), p))
    files = []
    for index, rel in enumerate(paths, start=1):
        path = data.root / rel
        entry = listed.get(rel)
        state = "ok"
        regular = path.is_file()
        if not regular:  # gone, or not a regular file (a FIFO, a device: never opened)
            state = "missing" if not path.exists() and not path.is_symlink() else "not a regular file"
            digest = entry["sha256"] if entry else ""
            size = entry.get("bytes", 0) if entry and isinstance(entry.get("bytes"), int) else 0
        else:
            try:
                digest, size = _sha256(path), path.stat().st_size
            except OSError:
                state, digest, size = "unreadable", entry["sha256"] if entry else "", 0
            if entry is None:
                state = "unlisted" if listed else "ok"
            elif entry["sha256"] != digest:
                state, digest = "changed", entry["sha256"]
        host = host_from_dirname(rel.split("/")[1]) if rel.startswith(HOSTS + "/") and rel.count("/") >= 2 else None
        files.append(EvidenceFile(f"E{index}", rel, digest, size, _what(rel, described), host, state))
    return files


def command_outcome(command: dict[str, Any]) -> str:
    """How a manifest command ended: ``timed out``, ``exit N`` or the transport's error."""
    if command.get("timed_out"):
        return "timed out"
    if command.get("exit_code") is not None:
        return f"exit {command['exit_code']}"
    return command.get("error") or "no exit status"


def _describe_commands(manifest: dict[str, Any]) -> dict[str, str]:
    out: dict[str, str] = {}
    for command in manifest.get("commands", []):
        if command.get("file"):
            argv = " ".join(command.get("argv") or [])
            result = command_outcome(command)
            out[command["file"]] = f"{command.get('kind')}: `{argv}` ({result}, {stamp(command.get('start'))})"
    return out


_BESIDE_OUTPUT = {ERR: "stderr", RC: "exit code", TIMEOUT: "timed-out marker"}


def _what(rel: str, described: dict[str, str]) -> str:
    if rel in described:
        return described[rel]
    stem, dot, ext = rel.rpartition(".")
    label = _BESIDE_OUTPUT.get(dot + ext)
    if label and stem + OUT in described:
        return f"{label} of {described[stem + OUT].split(' (', 1)[0]}"
    if rel.endswith("/" + UNREACHABLE):
        return "why the host could not be reached"
    return {
        VERDICTS: "verdict per host (docs/reference.md#verdicts)",
        TRACE: "path walked, each condition and the fact values it read",
        RUNBOOK: "the runbook as it was when the run started",
    }.get(rel, "file of the bundle")
