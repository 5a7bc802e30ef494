"""Reading a bundle: manifest, verdicts, trace, runbook, and every file with its sha256."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from nightowl.engine.bundle import MANIFEST_HASH, host_from_dirname
from nightowl.postmortem.clocks import stamp

DRAFT_FILES = frozenset({"postmortem.md", "postmortem.html", "status-update.md"})


def _read_json(path: Path) -> Any:
    """A bundle's JSON object, or None when it is missing, unreadable or not an object (a corrupt file)."""
    try:
        data = json.loads(path.read_text()) if path.exists() else None
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def _sha256(path: Path) -> str:
    from nightowl.engine.bundle import sha256_file

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


@dataclass
class Bundle:
    root: Path
    manifest: dict[str, Any]
    verdicts: dict[str, Any]
    trace: dict[str, Any]
    runbook: Any  # nightowl.engine.model.Runbook or None
    evidence: list[EvidenceFile] = field(default_factory=list)
    parsed: dict[tuple[str, str], Any] = field(default_factory=dict)  # (file, kind) -> parse result, read once

    @property
    def alert(self) -> dict[str, Any] | None:
        alert = self.manifest.get("alert")
        return alert if isinstance(alert, dict) else None

    def cite(self, rel_path: str | None) -> EvidenceFile | None:
        if rel_path and rel_path.endswith(".out") and not (self.root / rel_path).exists():
            first = rel_path[: -len(".out")] + ".1.out"  # see _renumbered
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
    ``<kind>.out`` (engine/bundle.py ``_next_stem``): point such entries at the file that exists."""
    for command in manifest.get("commands", []):
        rel = command.get("file")
        if isinstance(rel, str) and rel.endswith(".out") and not (root / rel).exists():
            first = rel[: -len(".out")] + ".1.out"
            if (root / first).exists():
                command["file"] = first
    return manifest


def load(bundle: Path) -> Bundle:
    root = Path(bundle)
    data = Bundle(
        root=root,
        manifest=_renumbered(root, _read_json(root / "manifest.json") or {"commands": []}),
        verdicts=_read_json(root / "verdicts.json") or {"hosts": []},
        trace=_read_json(root / "trace.json") or {"hosts": []},
        runbook=read_runbook(root / "runbook.yaml"),
    )
    data.evidence = _catalog(data)
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
    on_disk = sorted(p.relative_to(data.root).as_posix() for p in data.root.rglob("*") if p.is_file())
    paths = [p for p in on_disk if p not in DRAFT_FILES and p not in ("manifest.json", MANIFEST_HASH)]
    paths += [p for p in listed if p not in paths and p not in DRAFT_FILES]
    described = _describe_commands(data.manifest)
    order = {p: i for i, p in enumerate(described)}
    paths.sort(key=lambda p: (0 if p.startswith("hosts/") else 1, order.get(p.rsplit(".", 1)[0] + ".out", 999), p))
    files = []
    for index, rel in enumerate(paths, start=1):
        path = data.root / rel
        entry = listed.get(rel)
        state = "ok"
        if not path.exists():
            state, digest, size = "missing", entry["sha256"] if entry else "", entry.get("bytes", 0) if entry else 0
        else:
            digest, size = _sha256(path), path.stat().st_size
            if entry is None:
                state = "unlisted" if listed else "ok"
            elif entry["sha256"] != digest:
                state, digest = "changed", entry["sha256"]
        host = host_from_dirname(rel.split("/")[1]) if rel.startswith("hosts/") and rel.count("/") >= 2 else None
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


def _what(rel: str, described: dict[str, str]) -> str:
    if rel in described:
        return described[rel]
    stem, _, ext = rel.rpartition(".")
    if ext in ("err", "rc", "timeout") and f"{stem}.out" in described:
        label = {"err": "stderr", "rc": "exit code", "timeout": "timed-out marker"}[ext]
        return f"{label} of {described[f'{stem}.out'].split(' (', 1)[0]}"
    if rel.endswith("/unreachable"):
        return "why the host could not be reached"
    return {
        "verdicts.json": "verdict per host (docs/reference.md#verdicts)",
        "trace.json": "path walked, each condition and the fact values it read",
        "runbook.yaml": "the runbook as it was when the run started",
    }.get(rel, "file of the bundle")
