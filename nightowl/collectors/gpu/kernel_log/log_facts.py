"""The facts a runbook reads from a parsed kernel log (``facts``; declared in ``gpu/facts.yaml``)."""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Mapping
from typing import Any

from nightowl import knowledge
from nightowl.collectors.base import to_jsonable
from nightowl.collectors.gpu import xid_catalog
from nightowl.collectors.gpu.kernel_log.patterns import GSP_RPC_DUMP
from nightowl.collectors.gpu.kernel_log.results import KernelLogResult
from nightowl.collectors.gpu.kernel_log.timestamps import _seconds
from nightowl.collectors.pci import find_pci

# The open kernel module refusing a GPU (kernel-open/nvidia/nv.c, "is not supported by open nvidia.ko
# because it does not include the required GPU System Processor"), on one line or over continuation lines.
_OPEN_MODULE_REFUSED = re.compile(
    r"not supported by open\s+(?:NVRM: )?nvidia\.ko|Open nvidia\.ko is only ready for use on Data Center GPUs"
)


# --- facts ------------------------------------------------------------------------------------------------
def _sorted_pcis(values: Iterable[str | None]) -> list[str]:
    return sorted({v for v in values if v})


def _xids_by_gpu(xids: list[dict[str, Any]]) -> dict[str, list[int]]:
    by_gpu: dict[str, set[int]] = {}
    for event in xids:
        if event["pci"]:
            by_gpu.setdefault(event["pci"], set()).add(event["code"])
    return {pci: sorted(codes) for pci, codes in sorted(by_gpu.items())}


def _recovery_by_gpu(xids: list[dict[str, Any]]) -> tuple[str | None, dict[str, str]]:
    overall: list[str | None] = []
    per_gpu: dict[str, list[str | None]] = {}
    for event in xids:
        if event["code"] != 154:
            continue
        value = xid_catalog.normalize_recovery_action(event.get("recovery_action"))
        overall.append(value)
        if event["pci"]:
            per_gpu.setdefault(event["pci"], []).append(value)
    by_gpu = {pci: xid_catalog.strictest_recovery(values) for pci, values in sorted(per_gpu.items())}
    return xid_catalog.strictest_recovery(overall), {pci: v for pci, v in by_gpu.items() if v is not None}


def _app_xid_repeating_gpus(xids: list[dict[str, Any]]) -> list[str]:
    """GPUs where RESTART_APP Xids (13, 31, ...) hit at least two different programs.

    A program is its process name when the line gives one (``name=python3``), else its pid: two pids
    of one program (a restarted worker hitting its own bug again) do not point at the GPU; two
    different programs failing on the same GPU do."""
    owners: dict[str, set[Any]] = {}
    for event in xids:
        entry = xid_catalog.lookup(event["code"])
        if not event["pci"] or entry is None or entry.immediate_action != "RESTART_APP":
            continue
        owner = event["process"] if event["process"] else event["pid"]
        if owner is not None:
            owners.setdefault(event["pci"], set()).add(owner)
    return sorted(pci for pci, seen in owners.items() if len(seen) >= 2)


def _primary_xids(xids: list[dict[str, Any]]) -> list[int]:
    """Codes without the sympathetic ones (xid_rules.yaml) on GPUs that logged another Xid; a 45 that names its
    cause ("caused by previous Xid 149") counts that cause as present."""
    by_gpu: dict[str | None, set[int]] = {}
    for event in xids:
        codes = by_gpu.setdefault(event["pci"], set())
        codes.add(event["code"])
        if isinstance(event.get("caused_by_xid"), int):
            codes.add(event["caused_by_xid"])
    primary: set[int] = set()
    for codes in by_gpu.values():
        others = codes - xid_catalog.SYMPATHETIC_CODES
        primary |= others if others else codes
    return sorted(primary)


GSP_SUBKINDS = frozenset(
    (
        "gsp_heartbeat_timeout",
        "gsp_boot_failed",
        "gsp_timeout",
        "gsp_rpc_failed",
        "gsp_coredump",
        "pmu_halted",
        "memory_subsystem_error",
    )
)
INIT_FAILED_SUBKINDS = frozenset(("rm_init_adapter_failed", "probe_failed", "pci_resource_invalid"))
_UNRECOVERED = re.compile(r"can't recover|recovery failed")


def _of_subkind(events: list[dict[str, Any]], subkinds: frozenset[str] | set[str]) -> list[dict[str, Any]]:
    return [e for e in events if e["kind"] == "other_nvrm" and e.get("subkind") in subkinds]


def aer_severity(event: Mapping[str, Any]) -> str | None:
    """correctable / nonfatal / fatal from the words of an AER report ("Corrected", "Uncorrected (Non-Fatal)")."""
    words = str(event.get("severity") or "").lower()
    if not words:
        return None
    if "non-fatal" in words or "nonfatal" in words:
        return "nonfatal"
    if "fatal" in words:
        return "fatal"
    return "correctable" if "correct" in words else None


def _aer_facts(events: list[dict[str, Any]]) -> dict[str, Any]:
    aer = [e for e in events if e["kind"] == "pcie_aer"]
    by_severity = {"correctable": 0, "nonfatal": 0, "fatal": 0}
    devices: dict[str, set[str]] = {"correctable": set(), "nonfatal": set(), "fatal": set()}
    unrecovered: set[str] = set()
    for event in aer:
        severity = aer_severity(event)
        if severity is not None:
            by_severity[severity] += event.get("count", 1)
            # the reporting port ("pcieport 0000:00:03.1: AER: ...") and the source it names
            devices[severity].update(p for p in (event["pci"], find_pci(event["text"])) if p)
        for line in (event["text"], *event.get("lines", ())):
            if _UNRECOVERED.search(line):
                pci = find_pci(line)
                if pci:
                    unrecovered.add(pci)
    return {
        "pcie_aer_by_severity": by_severity,
        "pcie_aer_correctable_devices": sorted(devices["correctable"]),
        "pcie_aer_nonfatal_devices": sorted(devices["nonfatal"]),
        "pcie_aer_fatal_devices": sorted(devices["fatal"]),
        "pcie_aer_unrecovered_devices": sorted(unrecovered),
    }


def _host_facts(data: Mapping[str, Any]) -> dict[str, Any]:
    records: list[dict[str, Any]] = data.get("host_errors") or []
    edac = [r for r in records if r.get("source") == "edac"]
    ghes = [r for r in records if r.get("source") == "ghes"]
    memory = {"corrected": 0, "uncorrected": 0}
    for record in edac:
        memory[record["severity"]] += record.get("errors") or record.get("count", 1)

    def dimms(severity: str) -> list[str]:
        return sorted({r["dimm"] for r in edac if r["severity"] == severity and r["dimm"]})

    return {
        "host_memory_errors": memory,
        "host_memory_uncorrected_dimms": dimms("uncorrected"),
        "host_memory_corrected_dimms": dimms("corrected"),
        "ghes_error_count": len(ghes),
        "ghes_severities": sorted({r["severity"] for r in ghes if r.get("severity")}),
        "ghes_devices": _sorted_pcis(r.get("pci") for r in ghes),
        "mce_logged": sum(r.get("count", 1) for r in records if r.get("source") == "mce"),
    }


def _hung_facts(data: Mapping[str, Any]) -> dict[str, Any]:
    hung: list[dict[str, Any]] = data.get("hung_tasks") or []
    after = xid_catalog.wedged_after_codes()  # xid_rules.yaml hung_task_after (Xid 45)
    wedged = sorted({pci for task in hung for pci, codes in (task.get("after_xids") or {}).items() if after & {*codes}})
    return {
        "hung_task_count": len(hung),
        "hung_task_names": sorted({str(t["task"]) for t in hung if t.get("task")}),
        "hung_tasks_after_xid": sum(1 for t in hung if t.get("after_xids")),
        "wedged_driver": bool(wedged),
        "wedged_driver_gpus": wedged,
    }


def _nvrm_facts(events: list[dict[str, Any]], data: Mapping[str, Any]) -> dict[str, Any]:
    mismatches = _of_subkind(events, {"driver_mismatch"})
    versions = {
        (e.get("client_version"), e.get("module_version"), e.get("client")): None
        for e in mismatches
        if e.get("module_version")
    }
    gsp = _of_subkind(events, GSP_SUBKINDS)
    init_failed = _of_subkind(events, INIT_FAILED_SUBKINDS)
    nouveau = list(data.get("nouveau_devices") or [])
    conflict = _of_subkind(events, {"driver_conflict"})
    indexes = {e["gpu_index"] for e in events if isinstance(e.get("gpu_index"), int)}
    return {
        "driver_mismatch": bool(mismatches),
        "driver_mismatch_versions": [
            {"client_version": c, "module_version": m, **({"client": n} if n else {})} for c, m, n in versions
        ],
        "driver_conflict": bool(conflict) or bool(nouveau),
        "gpu_init_failed": bool(init_failed),
        "adapter_init_failed_gpus": _sorted_pcis(e["pci"] for e in init_failed),  # bus addresses: none if unnamed
        "adapter_init_errors": sorted({e["init_error"] for e in init_failed if e.get("init_error")}),
        "gsp_errors": sorted({e["subkind"] for e in gsp}),
        "gsp_error_count": sum(e.get("count", 1) for e in gsp),
        "gpu_lost_gpus": _sorted_pcis(e["pci"] for e in _of_subkind(events, {"gpu_lost"})),
        "gpu_indexes_with_errors": sorted(indexes),
    }


@functools.cache
def host_thresholds() -> dict[str, dict[str, Any]]:
    """nightowl/knowledge/host_thresholds.csv by id: threshold, window_seconds, meaning, source."""
    rows = knowledge.read_csv("host_thresholds.csv", required=("id", "threshold", "window_seconds", "source"))
    return {
        row["id"]: {**row, "threshold": int(row["threshold"]), "window_seconds": int(row["window_seconds"])}
        for row in rows
    }


def _storm_facts(data: Mapping[str, Any]) -> dict[str, Any]:
    limits = host_thresholds()
    daily, burst = limits["memory_ce_per_dimm"], limits["memory_ce_burst_per_dimm"]
    per_dimm: dict[str, dict[str, Any]] = {}
    for record in data.get("host_errors") or []:
        if record.get("source") != "edac" or record.get("severity") != "corrected":
            continue
        dimm = record.get("dimm") or "unnamed DIMM"
        entry = per_dimm.setdefault(dimm, {"dimm": dimm, "errors": 0, "reports": 0, "burst": False, "span": None})
        errors = record.get("errors") or record.get("count", 1)
        entry["errors"] += errors
        entry["reports"] += record.get("count", 1)
        first, last = _seconds(record.get("time")), _seconds(record.get("last_time"))
        span = last - first if first is not None and last is not None else None
        entry["span"] = span if entry["span"] is None or (span is not None and span > entry["span"]) else entry["span"]
        # one report of many errors, or several reports within the burst window
        one_report = errors // max(record.get("count", 1), 1)
        within = span is not None and span <= burst["window_seconds"]
        if one_report >= daily["threshold"] or (within and errors >= burst["threshold"]):
            entry["burst"] = True
    storms = [
        e
        for e in per_dimm.values()
        if e["burst"]
        or (e["errors"] >= daily["threshold"] and (e["span"] is None or e["span"] <= daily["window_seconds"]))
    ]
    return {
        "host_memory_ce_by_dimm": sorted(per_dimm.values(), key=lambda e: e["dimm"]),
        "host_memory_ce_storm_dimms": sorted(e["dimm"] for e in storms),
        "host_memory_ce_thresholds": {key: limits[key] for key in ("memory_ce_per_dimm", "memory_ce_burst_per_dimm")},
    }


def _link_facts(data: Mapping[str, Any]) -> dict[str, Any]:
    from nightowl.collectors.network.nic_links import most_in_window

    limits = host_thresholds()
    fast, slow = limits["nic_link_flaps_per_port"], limits["nic_link_downs_per_port"]
    ports: list[dict[str, Any]] = data.get("nic_links") or []
    flapping = []
    for port in ports:
        changes = port["downs"] + port["ups"]
        downs_in_window = most_in_window(port["down_times"], slow["window_seconds"])
        # a down and its up are two changes: the fast window counts both, as flap guards do
        fast_changes = 2 * most_in_window(port["down_times"], fast["window_seconds"])
        if min(fast_changes, changes) >= fast["threshold"] or downs_in_window >= slow["threshold"]:
            flapping.append(port["port"])
    return {
        "nic_flapping_ports": sorted(flapping),
        "nic_flapping_devices": _sorted_pcis(p["pci"] for p in ports if p["port"] in flapping),
        "nic_link_down_ports": sorted(p["port"] for p in ports if p["last_state"] == "down"),
        "nic_link_thresholds": {key: limits[key] for key in ("nic_link_flaps_per_port", "nic_link_downs_per_port")},
    }


def _deadlock_seen(waits: list[dict[str, Any]]) -> str | None:
    """What the log shows of the tasks stuck in the driver, the strongest first: ``lock`` (a D-state task waiting
    on one of the driver's lock frames), ``blocked`` (a D-state task with driver frames, no lock frame named) or
    ``frames`` (driver frames with no report header: which report, hung task or crash, is not in the log)."""
    seen = {w.get("seen", "lock") for w in waits}
    return next((kind for kind in ("lock", "blocked", "frames") if kind in seen), None)


def _driver_state_facts(events: list[dict[str, Any]], data: Mapping[str, Any]) -> dict[str, Any]:
    waits: list[dict[str, Any]] = data.get("driver_lock_waits") or []
    refused = [e for e in events if _OPEN_MODULE_REFUSED.search(_event_text(e))]
    refused_gpus = _sorted_pcis(e.get("pci") for e in refused)
    probe_failed = bool(_of_subkind(events, {"probe_failed", "no_device_initialized"}))
    return {
        "driver_deadlock": bool(waits),
        "driver_deadlock_tasks": sorted({str(w["task"]) for w in waits if w.get("task")}),
        "driver_deadlock_frames": sorted({frame for w in waits for frame in w.get("frames", ())}),
        "driver_deadlock_seen": _deadlock_seen(waits),
        "open_module_refused": bool(refused),
        "open_module_refused_gpus": refused_gpus,
        "open_module_probe_failed": bool(refused) and probe_failed,
        "driver_module_missing": bool(data.get("driver_module_missing")),
        "driver_load_failed": bool(data.get("driver_load_failures")),
    }


# The line the GSP RPC debug dump opens with (kgspLogRpcDebugInfo), kept as an event of its own.
_GSP_RPC_BUFFER = re.compile(r"GPU(?P<gpu>\d+) GSP RPC buffer contains function")


def _gsp_dump_facts(events: list[dict[str, Any]], data: Mapping[str, Any]) -> dict[str, Any]:
    """The GSP RPC debug dump (patterns.GSP_RPC_DUMP): printed only with a GSP RPC timeout or a fatal GSP error."""
    titles = [str(t) for t in data.get("gsp_rpc_dumps") or []]
    matches = [GSP_RPC_DUMP.match(t) for t in titles]
    buffers = [_GSP_RPC_BUFFER.search(str(e.get("text") or "")) for e in events if e["kind"] == "other_nvrm"]
    gpus = {int(m.group("gpu")) for m in [*matches, *buffers] if m is not None and m.group("gpu")}
    return {"gsp_rpc_dump": bool(titles) or any(buffers), "gsp_rpc_dump_gpu_indexes": sorted(gpus)}


def _event_text(event: Mapping[str, Any]) -> str:
    return " ".join([str(event.get("text") or ""), *(str(line) for line in event.get("lines") or ())])


def _remap_facts(xids: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "remap_reset_pending_gpus": _sorted_pcis(e["pci"] for e in xids if e.get("remap_status") == "reset-pending"),
        "remap_failed_gpus": _sorted_pcis(e["pci"] for e in xids if e.get("remap_status") == "failed"),
    }


def _xid_mig_instances(xids: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The MIG instances Xid lines name (GPU-I / GPU-CI), once per GPU, code and instance, in log order."""
    seen: dict[tuple[Any, ...], dict[str, Any]] = {}
    for e in xids:
        if e.get("gpu_instance") is None:
            continue
        key = (e.get("pci"), e["code"], e["gpu_instance"], e.get("compute_instance"))
        seen.setdefault(key, {"pci": key[0], "code": key[1], "gpu_instance": key[2], "compute_instance": key[3]})
    return list(seen.values())


def facts(result: KernelLogResult | Mapping[str, Any]) -> dict[str, Any]:
    """The contract JSON plus the conveniences runbook conditions read (see module docstring)."""
    data: dict[str, Any] = dict(result) if isinstance(result, Mapping) else to_jsonable(result)
    events: list[dict[str, Any]] = data.get("events") or []
    xids = [e for e in events if e["kind"] == "xid" and isinstance(e.get("code"), int)]
    codes = sorted({e["code"] for e in xids})
    recovery, recovery_by_gpu = _recovery_by_gpu(xids)
    fallen = [e["pci"] for e in events if e["kind"] == "fallen_off_bus" or (e["kind"] == "xid" and e["code"] == 79)]
    reset_gpus = [e["pci"] for e in events if e["kind"] == "gpu_reset_required"]
    reset_gpus += [pci for pci, value in recovery_by_gpu.items() if value in ("gpu-reset", "drain-and-reset")]
    return {
        **data,
        "xid_codes": codes,
        "sxid_codes": sorted({e["code"] for e in events if e["kind"] == "sxid" and e["code"] is not None}),
        "xid_event_count": sum(e.get("count", 1) for e in xids),
        "xids_by_gpu": _xids_by_gpu(xids),
        "xid_mig_instances": _xid_mig_instances(xids),
        "fallen_off_bus": bool(fallen),
        "fallen_off_bus_gpus": _sorted_pcis(fallen),
        "reset_required": bool(reset_gpus) or recovery in ("gpu-reset", "drain-and-reset"),
        "reset_required_gpus": _sorted_pcis(reset_gpus),
        "recovery_action": recovery,
        "recovery_actions_by_gpu": recovery_by_gpu,
        "recovery_action_gpus": sorted(pci for pci, value in recovery_by_gpu.items() if value != "none"),
        "catalog_action": xid_catalog.strictest(xid_catalog.action_for(e["code"], e.get("text")) for e in xids),
        "unknown_xid_codes": [code for code in codes if xid_catalog.lookup(code) is None],
        "app_xid_repeating_gpus": _app_xid_repeating_gpus(xids),
        "nvlink_xid_codes": [code for code in codes if code in xid_catalog.NVLINK_CODES],
        "memory_xid_codes": [code for code in codes if code in xid_catalog.MEMORY_CODES],
        "oom_kills": sum(e.get("count", 1) for e in events if e["kind"] == "oom_kill"),
        "pcie_aer_count": sum(e.get("count", 1) for e in events if e["kind"] == "pcie_aer"),
        "pcie_bandwidth_limited_devices": _sorted_pcis(d.get("pci") for d in data.get("pcie_bandwidth_limited") or []),
        "primary_xids": _primary_xids(xids),
        "xid_judgement": xid_catalog.judge(events),
        **_aer_facts(events),
        **_host_facts(data),
        **_hung_facts(data),
        **_nvrm_facts(events, data),
        **_remap_facts(xids),
        **_driver_state_facts(events, data),
        **_gsp_dump_facts(events, data),
        **_storm_facts(data),
        **_link_facts(data),
    }
