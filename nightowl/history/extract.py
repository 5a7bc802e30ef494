"""From a finished bundle to the rows the store keeps: pure reading of the bundle's own files.

Each host's raw outputs are parsed again by the same parsers a run uses (``kernel-log``,
``kernel-log-boots``, ``nvidia-smi``), so a bundle written before the store existed imports the same
rows a live run writes. Files are read as the replay transport reads them (``bundle_files``: regular
files only, no link followed, a size cap); ``nightowl history import`` verifies a bundle first
(``nightowl.history.intake``) and hands its checked manifest and verdicts in.
"""

from __future__ import annotations

import functools
import hashlib
import os
import re
from collections.abc import Callable, Mapping
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from nightowl.collectors.gpu.history_rows import SKIPPED_KINDS, event_key, event_row
from nightowl.collectors.pci import normalize_pci
from nightowl.engine import layout
from nightowl.history.bundle_files import read_capped, read_json, read_output


def _outputs(host_dir: Path, kind: str, names: list[str]) -> list[Path]:
    """The outputs of ``kind`` in ``host_dir``: ``kind.out`` and a second take's ``kind.<n>.out``, the names the
    globs ``kind.out`` and ``kind.[0-9]*.out`` match (``names``: the folder's entries, ``_entries``, listed once
    for all kinds). A name that is a link is listed: its reader refuses it."""
    return sorted(host_dir / name for name in names if _output_name(kind).fullmatch(name))


def _entries(host_dir: Path) -> list[str]:
    """The folder's entries; none where it cannot be listed (as a glob finds nothing there)."""
    try:
        return os.listdir(host_dir)
    except OSError:
        return []


@functools.lru_cache(maxsize=32)
def _output_name(kind: str) -> re.Pattern[str]:
    return re.compile(re.escape(kind) + r"(?:\.[0-9].*)?" + re.escape(layout.OUT), re.DOTALL)


# The kinds read back here; a run keeps what it parsed of them (nightowl/engine/parse_memo.py) and hands it in.
KINDS_READ = frozenset({"kernel-log", "kernel-log-boots", "nvidia-smi", "fabric", "ib-ports"})


def _parsed(
    kind: str,
    parse: Callable[[str], Any],
    path: Path,
    digests: Mapping[str, str] | None = None,
    kept: Any = None,
    as_json: bool = False,
) -> Any:
    """``parse`` of the output at ``path``: the run's own result for that file when it kept one (``kept``:
    the run's ParsedOutputs; ``as_json``: the caller reads the result as plain JSON, so the bundle's
    ``parsed/`` copy of an output stored scrubbed serves too).

    ``digests`` (file name -> sha256, from the bundle's manifest) finds that result without reading the file:
    a sweep's history read every host's 2.5 MB back after the last host, adding straight to its wall time.
    A parse of its own has a deadline (engine/readback.py): ReadBackTimedOut past it."""
    from nightowl.engine.readback import read_back

    digest = (digests or {}).get(path.name)
    return read_back(kind, parse, path, digest, reader=read_output, kept=kept, as_json=as_json, bundle_copy=as_json)


# Fabric and NIC findings kept as events (docs/reference.md#history): a state, not a logged line.
NETWORK_KINDS = ("nic_port_down", "nic_link_flapping", "nic_symbol_errors", "fabric_degraded")


def _finding(
    host: str, kind: str, name: str, text: str, boot_id: str | None, when: str | None, count: int = 1
) -> dict[str, Any]:
    """One finding as an event row. Its key is the host, kind, port or bus id and boot (never the time or the
    counts), so the same state seen again in the same boot, or a bundle imported twice, is one event."""
    is_gpu = kind.startswith("fabric_")
    row = event_row(host, {"kind": kind, "pci": name if is_gpu else None, "time": when, "count": count}, boot_id)
    row["key"] = event_key(host, {"kind": kind, "pci": name if is_gpu else None, "text": name}, boot_id)
    row["text"] = text[:500]
    return row


def network_rows(
    host_dir: Path,
    host: str,
    boot_id: str | None,
    when: str | None = None,
    window: float | None = None,
    digests: Mapping[str, str] | None = None,
    kept: Any = None,
    names: list[str] | None = None,
) -> list[dict[str, Any]]:
    """NIC port and NVLink fabric findings of one recorded host folder; an unreadable output is no row
    (``names``: the folder's entries, when the caller listed them)."""
    from nightowl.collectors.gpu import fabric
    from nightowl.collectors.jsonable import from_jsonable  # the typed result from the kept JSON: parse once
    from nightowl.collectors.network import ib_ports, ib_ports_window

    rows: list[dict[str, Any]] = []
    reads: list[dict[str, Any]] = []
    names = _entries(host_dir) if names is None else names
    for path in _outputs(host_dir, "ib-ports", names):
        try:
            kept_json = _parsed("ib-ports", ib_ports.parse, path, digests, kept, as_json=True)
            reads.append(ib_ports.facts(from_jsonable(ib_ports.IbPortsResult, kept_json)))
        except Exception:  # noqa: BLE001 - an unreadable port list is no row, never a failed import
            continue
    down: dict[str, dict[str, Any]] = {}
    for read in reads:
        for port in read.get("ports_down") or []:
            down.setdefault(str(port["port"]), port)
    for name, port in sorted(down.items()):
        state = " ".join(str(v) for v in (port.get("state"), port.get("phys_state")) if v)
        rows.append(_finding(host, "nic_port_down", name, f"{name} down ({state or 'state unknown'})", boot_id, when))
    if len(reads) >= 2:
        delta: dict[str, Any]
        try:
            delta = ib_ports_window.derive(
                {"ib_ports": reads[0], "ib_ports_after": reads[-1]}, {"ib_window_seconds": window}
            )
        except Exception:  # noqa: BLE001 - no window, no row
            delta = {}
        for kind, entries, changes in (
            ("nic_link_flapping", delta.get("flapping") or [], delta.get("state_changed") or []),
            ("nic_symbol_errors", delta.get("degraded") or [], []),
        ):
            counts: dict[str, int] = {}
            for entry in entries:
                counts[str(entry["port"])] = counts.get(str(entry["port"]), 0) + int(entry.get("delta") or 0)
            for change in changes:
                counts.setdefault(str(change["port"]), 1)
            for name, count in sorted(counts.items()):
                what = "link went down" if kind == "nic_link_flapping" else "symbol errors above the IBTA limit"
                text = f"{name} {what} in the window (+{count})"
                rows.append(_finding(host, kind, name, text, boot_id, when, max(count, 1)))
    for path in _outputs(host_dir, "fabric", names):
        try:
            found = fabric.facts(
                from_jsonable(fabric.FabricResult, _parsed("fabric", fabric.parse, path, digests, kept, as_json=True))
            )
        except Exception:  # noqa: BLE001 - an unreadable Fabric section is no row
            continue
        for entry in found.get("degraded") or []:
            gpu = normalize_pci(entry["gpu"])  # None: a block pasted without its bus id, keyed by position
            text = f"{entry['gpu']} fabric degraded: {'; '.join(entry.get('reasons') or [])}"
            rows.append(_finding(host, "fabric_degraded", gpu or str(entry["gpu"]), text, boot_id, when))
            rows[-1]["pci"] = gpu
    return list({r["key"]: r for r in rows}.values())


def _gpus_read(text: str) -> Any:
    """nvidia-smi's parse of a recorded output, or for the cheap ``--query-gpu`` CSV (a steady round's, which
    cites the full read it stands for) ``{"gpus": [], "cheap_rows": [...]}``: the GPUs it shows, each with its
    identity and what the query shows of its counters (nvidia_smi/cheap.py ``history_rows``)."""
    from nightowl.collectors.gpu.nvidia_smi import cheap, nvidia_smi

    result = nvidia_smi.parse(text)
    if result.gpus:
        return result
    rows = cheap.history_rows(text)
    return {"gpus": [], "cheap_rows": rows} if rows else result


def host_rows(
    host: str,
    host_dir: Path,
    when: str | None = None,
    window: float | None = None,
    digests: Mapping[str, str] | None = None,
    kept: Any = None,
) -> dict[str, Any]:
    """Events, boots and GPUs of one recorded host folder (``when``: the run's time, given to fabric and NIC
    findings; ``window``: the seconds between the two ib-ports reads; ``digests``: its files' sha256 by name,
    from the manifest; ``kept``: the run's parse results, engine/parse_memo.py)."""
    from nightowl.collectors.base import to_jsonable
    from nightowl.collectors.gpu import kernel_log, kernel_log_boots

    boots: list[dict[str, Any]] = []
    boot_id = None
    earlier: list[tuple[dict[str, Any], str | None]] = []
    names = _entries(host_dir)
    for path in _outputs(host_dir, "kernel-log-boots", names):
        parsed = _parsed("kernel-log-boots", kernel_log_boots.parse, path, digests, kept, as_json=True)
        boots = [b for b in parsed["boots"] if b.get("boot_id")]
        boot_id = parsed["current_boot_id"] or boot_id
        earlier += [(e, b["boot_id"]) for b in parsed["previous"] for e in b["events"]]
    events: list[dict[str, Any]] = []
    for path in _outputs(host_dir, "kernel-log", names):
        parsed = to_jsonable(_parsed("kernel-log", kernel_log.parse, path, digests, kept, as_json=True))
        events += [event_row(host, e, boot_id) for e in parsed.get("events") or [] if e["kind"] not in SKIPPED_KINDS]
    faulty = sorted({e["pci"] for e in events if e["pci"] and e["kind"] in ("xid", "sxid", "fallen_off_bus")})
    events += [event_row(host, e, b) for e, b in earlier if e.get("kind") not in SKIPPED_KINDS]
    gpus: dict[str, dict[str, Any]] = {}
    for path in _outputs(host_dir, "nvidia-smi", names):
        try:
            parsed = to_jsonable(_parsed("nvidia-smi", _gpus_read, path, digests, kept, as_json=True))
        except Exception:  # noqa: BLE001 - an unreadable nvidia-smi is no GPU row, never a failed import
            continue
        gpus.update((row["pci"], row) for row in parsed.get("cheap_rows") or [])
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
    events += network_rows(host_dir, host, boot_id, when, window, digests, kept, names)
    uuids = {g["pci"]: g["uuid"] for g in gpus.values() if g.get("uuid")}
    for event in events:  # the kernel names the bus, nvidia-smi the GPU in it
        event["uuid"] = event["uuid"] or uuids.get(event["pci"] or "")
    return {"boot_id": boot_id, "boots": boots, "events": events, "gpu_list": list(gpus.values()), "faulty": faulty}


def bundle_sha256(bundle: Path) -> str:
    """The bundle's hash: the sha256 of its manifest (``manifest.sha256``), which hashes every file."""
    recorded = bundle / layout.MANIFEST_HASH
    if recorded.is_file():
        text = read_capped(recorded, 4096).decode(errors="replace").split()
        if text and len(text[0]) == 64:
            return text[0]
    return hashlib.sha256(read_capped(bundle / layout.MANIFEST)).hexdigest()


def _window_seconds(bundle: Path) -> float | None:
    """The ib_window_seconds the bundle's runbook declares (None: not declared or unreadable)."""
    try:
        return _declared_window(read_capped(bundle / layout.RUNBOOK).decode(errors="replace"))
    except OSError:
        return None


@functools.lru_cache(maxsize=8)
def _declared_window(text: str) -> float | None:
    """The window a runbook's text declares: parsed once per text (a repeating sweep's every bundle holds the
    same runbook)."""
    try:
        import yaml

        # libyaml's loader when there: the pure-Python one took a second of a sweep's CPU on a 50 KB runbook
        loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
        declared = yaml.load(text, Loader=loader) or {}  # a safe loader
        value = declared["parameters"]["ib_window_seconds"]
        return float(value["default"] if isinstance(value, dict) else value)
    except Exception:  # noqa: BLE001 - no window: rates are not judged, no row
        return None


def _file_digests(manifest: dict[str, Any]) -> dict[str, dict[str, str]]:
    """The manifest's sha256 of each host file, by host folder and file name (nothing for a manifest
    without ``files``: the outputs are then read back, as before)."""
    prefix = layout.HOSTS + "/"
    digests: dict[str, dict[str, str]] = {}
    for entry in manifest.get("files") or []:
        if not isinstance(entry, dict):
            continue
        path, digest = entry.get("path"), entry.get("sha256")
        if isinstance(path, str) and isinstance(digest, str) and path.startswith(prefix):
            folder, _, name = path[len(prefix) :].partition("/")
            if name and "/" not in name:
                digests.setdefault(folder, {})[name] = digest
    return digests


def bundle_record(
    bundle: Path,
    manifest: dict[str, Any] | None = None,
    verdicts: dict[str, Any] | None = None,
    sha256: str | None = None,
    parsed: Any = None,
) -> dict[str, Any]:
    """Every row one bundle gives. Raises OSError/ValueError when it is not a readable bundle.

    ``manifest``, ``verdicts`` and ``sha256`` (of manifest.json): what ``intake`` checked, read once; else
    read here (a run's own bundle, just written). ``parsed``: the run's parse results (its RunResult's), so
    the rows are of what the verdict saw; a bundle read later uses its ``parsed/`` copies."""
    if manifest is None:
        manifest = read_json(bundle / layout.MANIFEST)
        if not isinstance(manifest, dict):
            raise ValueError(f"{layout.MANIFEST}: not a JSON object")
    if verdicts is None:
        verdicts_path = bundle / layout.VERDICTS
        verdicts = read_json(verdicts_path) if os.path.lexists(verdicts_path) else {"hosts": []}
    runs = []
    host_dirs = {}
    hosts_root = bundle / layout.HOSTS
    if hosts_root.is_dir() and not hosts_root.is_symlink():  # a folder that is a link leaves the bundle
        host_dirs = {
            layout.host_from_dirname(d.name): d for d in hosts_root.iterdir() if d.is_dir() and not d.is_symlink()
        }
    when = None
    if isinstance(manifest.get("started"), (int, float)):
        started = datetime.fromtimestamp(manifest["started"], timezone.utc)
        when = started.isoformat(timespec="seconds").replace("+00:00", "Z")
    window = _window_seconds(bundle)
    digests = _file_digests(manifest)
    listed = {entry["host"]: entry for entry in verdicts.get("hosts") or []}
    for host in [*listed, *(h for h in host_dirs if h not in listed)]:
        entry = listed.get(host, {})
        verdict = entry.get("verdict") or {}
        try:
            rows = (
                host_rows(host, host_dirs[host], when, window, digests.get(host_dirs[host].name), parsed)
                if host in host_dirs
                else {"events": [], "boots": [], "gpu_list": []}
            )
        except (AttributeError, KeyError, TypeError) as exc:  # a kept parse (parsed/) of an unexpected shape
            raise ValueError(f"{host}: a recorded parse result is not of its kind's shape ({exc!r})") from None
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
        "bundle_sha256": sha256 or bundle_sha256(bundle),
        "runbook": manifest.get("runbook"),
        "started": manifest.get("started"),
        "partial": bool(manifest.get("partial")),
        "runs": runs,
    }
