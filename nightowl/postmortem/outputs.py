"""Raw outputs of the bundle parsed again by their collectors: kernel events, metric scrapes."""

from __future__ import annotations

from typing import Any

from nightowl.postmortem.bundle import Bundle

# Kernel-log event kinds that mark a fault; what they are called in the draft.
FAULT_KINDS = {
    "xid": "Xid",
    "sxid": "SXid",
    "fallen_off_bus": "GPU fell off the bus",
    "gpu_reset_required": "GPU reset required",
    "oom_kill": "kernel OOM killer",
    "pcie_aer": "PCIe AER error",
}


METRIC_FIELDS = ("requests_running", "requests_waiting", "kv_cache_usage", "preemptions_total")


def parsed_output(data: Bundle, rel: str, kind: str) -> dict[str, Any] | None:
    """A raw output parsed again by its collector, once per draft (timeline, candidates and impact all ask)."""
    if (rel, kind) not in data.parsed:
        data.parsed[(rel, kind)] = _parse(data, rel, kind)
    result: dict[str, Any] | None = data.parsed[(rel, kind)]
    return result


def _parse(data: Bundle, rel: str, kind: str) -> dict[str, Any] | None:
    path = data.root / rel
    if not path.exists():
        return None
    from nightowl.collectors import get_collector
    from nightowl.collectors.base import to_jsonable

    try:
        return to_jsonable(get_collector(kind).parse(path.read_text(errors="replace")))
    except Exception:  # noqa: BLE001 - a parser bug must not cost the draft
        return None


def kernel_events(data: Bundle, host: str) -> list[tuple[dict[str, Any], str]]:
    """Kernel-log events of a host, parsed again from the raw file, with the file they came from."""
    events = []
    for command in data.host_files(host, "kernel-log"):
        parsed = parsed_output(data, command["file"], "kernel-log") or {}
        events += [(event, command["file"]) for event in parsed.get("events", [])]
    return events


def metric_scrapes(data: Bundle, host: str) -> list[dict[str, Any]]:
    scrapes = []
    for command in data.host_files(host, "metrics"):
        parsed = parsed_output(data, command["file"], "metrics")
        if parsed is not None:
            values = {k: parsed.get(k) for k in METRIC_FIELDS if parsed.get(k) is not None}
            scrapes.append({"start": command.get("start"), "file": command["file"], "values": values})
    return scrapes
