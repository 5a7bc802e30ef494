"""Reading a bundle for a model: treated as untrusted input (a bundle may come from anywhere).

Only regular files inside the bundle folder are read (no symlink, no ``..``), each up to a size cap;
JSON that does not parse, or has the wrong shape, is reported as a problem, never trusted. The bundle's
sha256 is the sha256 of its ``manifest.json``, the file ``manifest.sha256`` records and
``nightowl postmortem --verify`` checks: the manifest lists the sha256 of every other file.
"""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path
from typing import Any

from nightowl.engine import layout
from nightowl.mcp.hooks import ToolError

MAX_JSON_BYTES = 16 * 1024 * 1024
MAX_TEXT_CHARS = 200_000  # of the postmortem handed to a model
_HEX64 = re.compile(r"^[0-9a-f]{64}$")


def read_bundle(path: str) -> dict[str, Any]:
    """Verdicts, evidence with the sha256 of the file each fact came from, the run's outcome, the postmortem
    and the hashes."""
    from nightowl.engine.bundle_verify import verify_bundle
    from nightowl.engine.layout import MANIFEST_HASH
    from nightowl.outcome import read_bundle_outcome

    root = Path(path).expanduser()
    if root.is_symlink() or not root.is_dir():
        raise ToolError(f"{path}: not a bundle folder")
    raw_manifest = _read_bytes(root, layout.MANIFEST)
    if raw_manifest is None:
        raise ToolError(f"{path}: not a bundle (no readable manifest.json)")
    problems: list[str] = []
    manifest = _json(raw_manifest, layout.MANIFEST, problems)
    if not isinstance(manifest, dict):
        raise ToolError(f"{path}: manifest.json is not a JSON object")
    sha256 = hashlib.sha256(raw_manifest).hexdigest()
    recorded = (_read_bytes(root, MANIFEST_HASH) or b"").decode("ascii", "replace").split()
    recorded_sha = recorded[0] if recorded and _HEX64.match(recorded[0]) else None
    files = _file_hashes(manifest.get("files"))
    verdicts = _json(_read_bytes(root, layout.VERDICTS), layout.VERDICTS, problems)
    hosts = [_host(h, files) for h in _list(verdicts.get("hosts") if isinstance(verdicts, dict) else None)]
    postmortem = _read_bytes(root, layout.POSTMORTEM)
    text = postmortem.decode("utf-8", "replace") if postmortem is not None else None
    try:
        verify = verify_bundle(root)
    except Exception as exc:  # noqa: BLE001 - a hostile bundle must not take the server down
        verify = [f"cannot verify: {type(exc).__name__}: {exc}"]
    run_id = manifest.get("run_id")
    return {
        "bundle_id": run_id if isinstance(run_id, str) else None,
        "bundle_sha256": sha256,
        "bundle": str(root),
        "runbook": _str(manifest.get("runbook")),
        "partial": manifest.get("partial") is True,
        "manifest_sha256_recorded": recorded_sha,
        "verified": not verify and recorded_sha == sha256,
        "verify_problems": verify,
        "hosts": hosts,
        "commands": [_command(c) for c in _list(manifest.get("commands"))],
        "files": [{"path": p, "sha256": d} for p, d in files.items()],
        # what the run concluded (outcome.json: origin, verdict, host status), None for a bundle without one
        "outcome": read_bundle_outcome(root, problems),  # one that cannot be used is one of the problems
        "postmortem": text[:MAX_TEXT_CHARS] if text is not None else None,
        "postmortem_truncated": text is not None and len(text) > MAX_TEXT_CHARS,
        "problems": problems,
    }


def _read_bytes(root: Path, name: str, cap: int = MAX_JSON_BYTES) -> bytes | None:
    """A regular file directly named inside ``root`` (no symlink anywhere on the way), or None."""
    path = root / name
    try:
        if path.is_symlink() or not path.is_file() or path.resolve().parent != root.resolve():
            return None
        with path.open("rb") as handle:
            return handle.read(cap + 1)[:cap]
    except OSError:
        return None


def _json(data: bytes | None, name: str, problems: list[str]) -> Any:
    if data is None:
        problems.append(f"{name}: missing or unreadable")
        return None
    try:
        return json.loads(data)
    except ValueError as exc:
        problems.append(f"{name}: not JSON ({exc})")
        return None


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _file_hashes(value: Any) -> dict[str, str]:
    return {
        f["path"]: f["sha256"]
        for f in _list(value)
        if isinstance(f, dict) and isinstance(f.get("path"), str) and isinstance(f.get("sha256"), str)
    }


def _host(entry: Any, files: dict[str, str]) -> dict[str, Any]:
    """One host's verdict, each evidence item citing the file it came from and that file's sha256."""
    if not isinstance(entry, dict):
        return {"host": None, "status": None, "verdict": None, "path": []}
    verdict = entry.get("verdict") if isinstance(entry.get("verdict"), dict) else None
    if verdict is not None:
        evidence = []
        for item in _list(verdict.get("evidence")):
            if isinstance(item, dict):
                source = _str(item.get("source"))
                evidence.append({**item, "source_sha256": files.get(source) if source else None})
        verdict = {**verdict, "evidence": evidence}
    return {
        "host": _str(entry.get("host")),
        "status": _str(entry.get("status")),
        "verdict": verdict,
        "path": [p for p in _list(entry.get("path")) if isinstance(p, str)],
        "error": _str(entry.get("error")),
    }


def _command(entry: Any) -> dict[str, Any]:
    if not isinstance(entry, dict):
        return {}
    keep = ("host", "kind", "argv", "exit_code", "timed_out", "bytes", "sha256", "file")
    return {key: entry.get(key) for key in keep}
