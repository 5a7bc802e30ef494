"""``postmortem --verify``: re-hash a bundle's manifest and every file it lists."""

from __future__ import annotations

import json
from pathlib import Path

from nightowl.engine.layout import AFTER_MANIFEST, MANIFEST, MANIFEST_HASH, NEXT, OUTCOME, first_take
from nightowl.engine.private_files import open_regular, sha256_file

OUTCOME_MAX_BYTES = 16 * 1024 * 1024  # as history/bundle_files.py and the MCP tools cap a bundle's JSON


def verify_bundle(bundle: Path) -> list[str]:
    """Re-hash the manifest and every file it lists; report changed, missing and unlisted files.

    The manifest itself is checked against ``manifest.sha256``, and every command's output file must be
    in its file list, so neither an edited manifest nor a file deleted from both goes unnoticed.
    """
    root = Path(bundle)
    manifest_path = root / MANIFEST
    if not manifest_path.is_file():
        return [f"missing: {MANIFEST} in {bundle}"]
    problems = _verify_manifest_hash(root)
    problems += [] if problems else _verify_outcome(root)  # a changed manifest is the one problem to tell
    try:
        manifest = json.loads(manifest_path.read_text(encoding="utf-8"))
        listed = {str(f["path"]): str(f["sha256"]) for f in manifest.get("files", [])}
        cited = {str(c["file"]) for c in manifest.get("commands", []) if c.get("file")}
    except (OSError, ValueError, TypeError, KeyError, AttributeError) as exc:
        return [*problems, f"corrupt: {MANIFEST} is not a bundle manifest ({type(exc).__name__}: {exc})"]
    for rel, digest in listed.items():
        path = root / rel
        if not path.is_file() or path.is_symlink():
            problems.append(f"missing: {rel}")
        elif sha256_file(path) != digest:
            problems.append(f"changed: {rel}")
    for rel in sorted(cited - set(listed)):
        if rel not in listed and first_take(rel) not in listed:
            problems.append(f"missing: {rel} (a command's output, not in the file list)")
    for path in sorted(root.rglob("*")):
        rel = path.relative_to(root).as_posix()
        # written after the manifest: the status update (re-rendered from verdicts.json) and the
        # runbooks `triage --follow` ran, each a bundle with its own manifest under next/
        if rel in AFTER_MANIFEST or rel.startswith(NEXT + "/"):
            continue
        if path.is_file() and rel not in (MANIFEST, MANIFEST_HASH) and rel not in listed:
            problems.append(f"not in manifest: {rel}")
    return problems


def _verify_outcome(root: Path) -> list[str]:
    """``outcome.json`` is written after the manifest, so the manifest cannot hash it; it names the manifest's
    sha256 instead, which must be this manifest's (absent in bundles written before it was kept)."""
    path = root / OUTCOME
    if not path.is_file() or path.is_symlink():
        return []
    try:
        with open_regular(path) as handle:
            data = handle.read(OUTCOME_MAX_BYTES + 1)
        if len(data) > OUTCOME_MAX_BYTES:  # a received bundle's may be anything: never read whole
            return [f"corrupt: {OUTCOME} is larger than {OUTCOME_MAX_BYTES} bytes, not the run's outcome record"]
        cited = json.loads(data.decode("utf-8", errors="replace")).get("sha256")
    except (OSError, ValueError, AttributeError, RecursionError):
        return [f"corrupt: {OUTCOME} is not the run's outcome record"]
    if cited is not None and cited != sha256_file(root / MANIFEST):
        return [f"changed: {OUTCOME} (names another manifest's sha256)"]
    return []


def _verify_manifest_hash(root: Path) -> list[str]:
    hash_path = root / MANIFEST_HASH
    if not hash_path.is_file():
        return [f"missing: {MANIFEST_HASH} (the manifest's own hash; bundles before it have none)"]
    recorded = hash_path.read_text(encoding="utf-8", errors="replace").split(maxsplit=1)[:1]
    if recorded != [sha256_file(root / MANIFEST)]:
        return [f"changed: {MANIFEST} (its sha256 differs from {MANIFEST_HASH})"]
    return []
