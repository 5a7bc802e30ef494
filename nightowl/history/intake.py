"""`nightowl history import`: a saved bundle is verified before anything in it is believed.

A bundle may come from anywhere (issue "trust, round four", item 6: a copy of a real bundle with
``verdicts.json`` edited to healthy was imported over the real run's row, citing the real hash). So, in
this order, and each refusal names the bundle and the field (``RefusedBundle``, exit 2), the next bundle
still imported:

1. ``manifest.json`` is a regular file within a size cap (``bundle_files``) holding a JSON object with the
   fields the store keeps, each of its type: ``run_id`` and ``runbook`` strings, ``started`` a finite time,
   ``partial`` a boolean, ``files`` a list of ``{path, sha256}``; its sha256 is computed here from the bytes
   read, never taken from the bundle's own ``manifest.sha256``;
2. a partial bundle (an interrupted run) is not recorded, as a run's own partial bundle is not;
3. every file the manifest lists is a regular file inside the bundle (no ``..``, no link on the way), and
   ``postmortem --verify``'s check (``engine.bundle_verify``) finds nothing changed, missing or unlisted
   (a bundle written before ``manifest.sha256`` existed is checked against its manifest alone);
4. ``verdicts.json`` has the shape a run writes;
5. the store refuses a bundle id it already holds with another sha256 (``store.ConflictingBundle``).
"""

from __future__ import annotations

import hashlib
import math
import os
import re
import stat
from datetime import datetime, timezone
from pathlib import Path, PurePosixPath
from typing import Any

from nightowl.engine import layout
from nightowl.history.bundle_files import parse_json, read_capped, read_json, refuse_link

MAX_FILE_BYTES = 1024 * 1024 * 1024  # a listed file hashed (streamed) for the check; outputs are capped far below
_HEX64 = re.compile(r"[0-9a-f]{64}")


class RefusedBundle(ValueError):
    """A bundle ``nightowl history import`` does not record: the message names the bundle and the field."""

    def __init__(self, bundle: Path, field: str, why: str) -> None:
        super().__init__(f"{bundle}: {field}: {why}")
        self.bundle = bundle
        self.field = field


def _kind_of(value: Any) -> str:
    return "null" if value is None else type(value).__name__


def _require(bundle: Path, field: str, value: Any, wanted: type | tuple[type, ...], what: str) -> Any:
    if not isinstance(value, wanted) or isinstance(value, bool) and wanted is not bool:
        raise RefusedBundle(bundle, field, f"expected {what}, found {_kind_of(value)}")
    return value


def checked_manifest(bundle: Path) -> tuple[dict[str, Any], str]:
    """The manifest, its fields checked, and the sha256 of its bytes as read."""
    path = bundle / layout.MANIFEST
    try:
        data = read_capped(path)
    except OSError as exc:
        raise RefusedBundle(bundle, layout.MANIFEST, f"unreadable ({exc})") from None
    try:
        manifest = parse_json(data)
    except ValueError as exc:
        raise RefusedBundle(bundle, layout.MANIFEST, f"not JSON ({exc})") from None
    _require(bundle, layout.MANIFEST, manifest, dict, "a JSON object")
    _require(bundle, "run_id", manifest.get("run_id"), str, "the bundle id (a string)")
    if not manifest["run_id"].strip() or len(manifest["run_id"]) > 200:
        raise RefusedBundle(bundle, "run_id", "empty or longer than 200 characters")
    _require(bundle, "runbook", manifest.get("runbook"), str, "the runbook's name (a string)")
    started = _require(bundle, "started", manifest.get("started"), (int, float), "a time (seconds since 1970)")
    try:
        if not math.isfinite(started):
            raise ValueError
        datetime.fromtimestamp(started, timezone.utc)
    except (OverflowError, ValueError, OSError):
        raise RefusedBundle(bundle, "started", f"{started!r} is no time") from None
    if "partial" in manifest:
        _require(bundle, "partial", manifest["partial"], bool, "true or false")
    files = _require(bundle, "files", manifest.get("files"), list, "the list of files and their sha256")
    for i, entry in enumerate(files):
        _require(bundle, f"files[{i}]", entry, dict, "an object {path, sha256}")
        _require(bundle, f"files[{i}].path", entry.get("path"), str, "a path in the bundle")
        digest = _require(bundle, f"files[{i}].sha256", entry.get("sha256"), str, "a sha256 (64 hex digits)")
        if not _HEX64.fullmatch(digest):
            raise RefusedBundle(bundle, f"files[{i}].sha256", "not 64 lower-case hex digits")
    commands = manifest.get("commands", [])
    _require(bundle, "commands", commands, list, "the list of commands")
    for i, entry in enumerate(commands):
        _require(bundle, f"commands[{i}]", entry, dict, "an object")
        if entry.get("file") is not None:
            _require(bundle, f"commands[{i}].file", entry["file"], str, "a path in the bundle")
    return manifest, hashlib.sha256(data).hexdigest()


def _check_listed(bundle: Path, manifest: dict[str, Any]) -> None:
    """Every listed file (and ``manifest.sha256``) a regular file inside the bundle, reached through no link,
    before anything hashes it: a listed ``../../dev/zero`` or a host folder that is a link is refused."""
    names = [str(entry["path"]) for entry in manifest["files"]]
    if os.path.lexists(bundle / layout.MANIFEST_HASH):
        names.append(layout.MANIFEST_HASH)
    for name in names:
        parts = PurePosixPath(name).parts
        if not parts or name.startswith("/") or any(p in ("..", ".", "") for p in parts) or "\\" in name:
            raise RefusedBundle(bundle, f"files: {name}", "not a path inside the bundle")
        path = bundle
        try:
            for part in parts[:-1]:
                path = path / part
                mode = os.lstat(path).st_mode
                if not stat.S_ISDIR(mode):
                    why = "a symbolic link, not followed" if stat.S_ISLNK(mode) else "not a folder"
                    raise OSError(f"{part}: {why}")
            info = refuse_link(path / parts[-1])
        except FileNotFoundError:
            continue  # verify_bundle names it missing
        except OSError as exc:
            raise RefusedBundle(bundle, f"files: {name}", str(exc)) from None
        limit = 4096 if name == layout.MANIFEST_HASH else MAX_FILE_BYTES
        if info.st_size > limit:
            raise RefusedBundle(bundle, f"files: {name}", f"larger than {limit} bytes")


def _verify(bundle: Path, manifest: dict[str, Any]) -> None:
    from nightowl.engine.bundle_verify import verify_bundle

    _check_listed(bundle, manifest)
    problems = [p for p in verify_bundle(bundle) if not p.startswith(f"missing: {layout.MANIFEST_HASH} ")]
    if problems:
        field = problems[0].split(": ", 1)[-1].split(" ", 1)[0]
        shown = "; ".join(problems[:3]) + (f"; {len(problems) - 3} more" if len(problems) > 3 else "")
        raise RefusedBundle(bundle, field, f"does not match its manifest ({shown})")


def checked_verdicts(bundle: Path) -> dict[str, Any]:
    """``verdicts.json`` in the shape a run writes: ``{hosts: [{host, status, verdict: {id, severity, action,
    gpus?} or null}]}``."""
    name = layout.VERDICTS
    try:
        verdicts = read_json(bundle / name)
    except (OSError, ValueError) as exc:
        raise RefusedBundle(bundle, name, f"unreadable ({exc})") from None
    _require(bundle, name, verdicts, dict, "a JSON object")
    hosts = _require(bundle, f"{name} hosts", verdicts.get("hosts"), list, "a list of hosts")
    for i, entry in enumerate(hosts):
        where = f"{name} hosts[{i}]"
        _require(bundle, where, entry, dict, "an object")
        _require(bundle, f"{where}.host", entry.get("host"), str, "a host name")
        _require(bundle, f"{where}.status", entry.get("status"), (str, type(None)), "a status")
        verdict = _require(bundle, f"{where}.verdict", entry.get("verdict"), (dict, type(None)), "a verdict object")
        for key in ("id", "severity", "action"):
            _require(bundle, f"{where}.verdict.{key}", (verdict or {}).get(key), (str, type(None)), "a string")
        gpus = (verdict or {}).get("gpus") or []
        gpus = [gpus] if isinstance(gpus, str) else gpus  # a runbook's gpus expression may give one bus id
        for gpu in _require(bundle, f"{where}.verdict.gpus", gpus, list, "a list of GPUs"):
            _require(bundle, f"{where}.verdict.gpus", gpu, str, "a GPU bus id")
        if verdict is not None:
            verdict["gpus"] = gpus
    return verdicts


def import_bundle(bundle: Path, store_path: Path) -> int:
    """Verify ``bundle`` and write its rows; returns the new events. Raises RefusedBundle (the bundle is
    not recorded), store.ConflictingBundle (its id is recorded with another sha256) or StoreError."""
    from nightowl.history import extract, store

    manifest, sha256 = checked_manifest(bundle)
    if manifest.get("partial") is True:
        raise RefusedBundle(bundle, "partial", "an interrupted run's partial bundle is not recorded")
    _verify(bundle, manifest)
    verdicts = checked_verdicts(bundle)
    try:
        record = extract.bundle_record(bundle, manifest=manifest, verdicts=verdicts, sha256=sha256)
    except (OSError, ValueError) as exc:
        raise RefusedBundle(bundle, "hosts", f"unreadable ({exc})") from None
    return store.write(store_path, record)
