"""From a finished bundle to the rows the store keeps: pure reading of the bundle's own files.

Each host's raw outputs are parsed again by the same parsers a run uses (``kernel-log``,
``kernel-log-boots``, ``nvidia-smi``), so a bundle written before the store existed imports the same
rows a live run writes.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from nightowl.collectors.gpu.history_rows import SKIPPED_KINDS, event_row


def _outputs(host_dir: Path, kind: str) -> list[Path]:
    return sorted([*host_dir.glob(f"{kind}.out"), *host_dir.glob(f"{kind}.[0-9]*.out")])


def host_rows(host: str, host_dir: Path) -> dict[str, Any]:
    """Events, boots and GPUs of one recorded host folder."""
    from nightowl.collectors.base import to_jsonable
    from nightowl.collectors.gpu import kernel_log, kernel_log_boots
    from nightowl.collectors.gpu.nvidia_smi import nvidia_smi

    boots: list[dict[str, Any]] = []
    boot_id = None
    earlier: list[tuple[dict[str, Any], str | None]] = []
    for path in _outputs(host_dir, "kernel-log-boots"):
        parsed = kernel_log_boots.parse(path.read_text(errors="replace"))
        boots = [b for b in parsed["boots"] if b.get("boot_id")]
        boot_id = parsed["current_boot_id"] or boot_id
        earlier += [(e, b["boot_id"]) for b in parsed["previous"] for e in b["events"]]
    events: list[dict[str, Any]] = []
    for path in _outputs(host_dir, "kernel-log"):
        parsed = to_jsonable(kernel_log.parse(path.read_text(errors="replace")))
        events += [event_row(host, e, boot_id) for e in parsed.get("events") or [] if e["kind"] not in SKIPPED_KINDS]
    faulty = sorted({e["pci"] for e in events if e["pci"] and e["kind"] in ("xid", "sxid", "fallen_off_bus")})
    events += [event_row(host, e, b) for e, b in earlier if e.get("kind") not in SKIPPED_KINDS]
    gpus: dict[str, dict[str, Any]] = {}
    for path in _outputs(host_dir, "nvidia-smi"):
        try:
            parsed = to_jsonable(nvidia_smi.parse(path.read_text(errors="replace")))
        except Exception:  # noqa: BLE001 - an unreadable nvidia-smi is no GPU row, never a failed import
            continue
        for gpu in parsed.get("gpus") or []:
            if gpu.get("pci"):
                gpus[gpu["pci"]] = {
                    "pci": gpu["pci"],
                    "uuid": gpu.get("uuid"),
                    "serial": gpu.get("serial"),
                    "name": gpu.get("name"),
                    "counters": {
                        "ecc": gpu.get("ecc"),
                        "remapped_rows": gpu.get("remapped_rows"),
                        "retired_pages": gpu.get("retired_pages"),
                    },  # fmt: skip
                }
    uuids = {g["pci"]: g["uuid"] for g in gpus.values() if g.get("uuid")}
    for event in events:  # the kernel names the bus, nvidia-smi the GPU in it
        event["uuid"] = event["uuid"] or uuids.get(event["pci"] or "")
    return {"boot_id": boot_id, "boots": boots, "events": events, "gpu_list": list(gpus.values()), "faulty": faulty}


def bundle_sha256(bundle: Path) -> str:
    """The bundle's hash: the sha256 of its manifest (``manifest.sha256``), which hashes every file."""
    recorded = bundle / "manifest.sha256"
    if recorded.is_file():
        text = recorded.read_text().split()
        if text and len(text[0]) == 64:
            return text[0]
    return hashlib.sha256((bundle / "manifest.json").read_bytes()).hexdigest()


def bundle_record(bundle: Path) -> dict[str, Any]:
    """Every row one bundle gives. Raises OSError/ValueError when it is not a readable bundle."""
    from nightowl.engine.bundle import host_from_dirname

    manifest = json.loads((bundle / "manifest.json").read_text())
    verdicts_path = bundle / "verdicts.json"
    verdicts = json.loads(verdicts_path.read_text()) if verdicts_path.is_file() else {"hosts": []}
    runs = []
    host_dirs = {}
    hosts_root = bundle / "hosts"
    if hosts_root.is_dir():
        host_dirs = {host_from_dirname(d.name): d for d in hosts_root.iterdir() if d.is_dir()}
    listed = {entry["host"]: entry for entry in verdicts.get("hosts") or []}
    for host in [*listed, *(h for h in host_dirs if h not in listed)]:
        entry = listed.get(host, {})
        verdict = entry.get("verdict") or {}
        rows = host_rows(host, host_dirs[host]) if host in host_dirs else {"events": [], "boots": [], "gpu_list": []}
        runs.append(
            {
                "host": host,
                "status": entry.get("status"),
                "verdict_id": verdict.get("id"),
                "severity": verdict.get("severity"),
                "action": verdict.get("action"),
                # the GPUs the verdict names, else (when it needs action) those with a fault in this boot's log
                "gpus": verdict.get("gpus") or (rows.get("faulty", []) if verdict.get("action") != "none" else []),
                **rows,
            }
        )
    return {
        "bundle_id": manifest.get("run_id") or bundle.name,
        "bundle_sha256": bundle_sha256(bundle),
        "runbook": manifest.get("runbook"),
        "started": manifest.get("started"),
        "partial": bool(manifest.get("partial")),
        "runs": runs,
    }
