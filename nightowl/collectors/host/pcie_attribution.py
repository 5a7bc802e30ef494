"""`pcie-attribution`: which device an uncorrectable PCIe error hit, the GPU or not.

A derived collector: it runs no command. PCIe AER reports (kernel Documentation/PCI/pcieaer-howto.rst)
and firmware-first APEI/GHES PCIe records name a bus address; this matches it against the GPUs'
addresses (nvidia-smi's, when it was read, and the ones the kernel log itself ties to the NVIDIA
driver: Xid lines, RmInitAdapter, ``nvidia 0000:03:00.0: AER: ...``). An address is normalised to
domain:bus:device, so a GPU's audio function (``.1``) counts as the GPU.

Three outcomes per uncorrectable device: ``gpu`` (a GPU address), ``other`` (an endpoint that is
known not to be a GPU: a driver other than nvidia/pcieport named it, or a GHES record gives a PCIe end
point with a vendor other than NVIDIA's 0x10de, https://pcisig.com vendor list), and ``port`` (a root or
switch port, or an address nothing else identifies: the GPU may sit below it, so it is not cleared).
Correctable errors are counted, not attributed: the hardware recovered them.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

from nightowl.collectors.base import DerivedCollector, registered
from nightowl.collectors.pci import find_pci, normalize_pci

KIND = "pcie-attribution"
NVIDIA_VENDOR = "0x10de"
# "nvme 0000:5e:00.0: AER: ..." / "pcieport 0000:00:03.0: ..." : the driver that printed the line
_DRIVER_LINE = re.compile(
    r"(?:^|\s)(?P<driver>[A-Za-z][\w-]*) (?P<pci>[0-9a-fA-F]{4,8}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2})\.[0-7]: "
)
_PORT_DRIVERS = frozenset({"pcieport"})
_GPU_DRIVERS = frozenset({"nvidia", "nvidia-gpu", "nouveau"})
_SEVERITY_RANK = {"nonfatal": 1, "fatal": 2}


def _pci(address: Any) -> str | None:
    """A bus address in any written form -> ``dddd:bb:dd`` (the project's one normaliser, pci.py)."""
    return (normalize_pci(address) or find_pci(address)) if isinstance(address, str) else None


def _drivers(kernel_log: Mapping[str, Any]) -> dict[str, str]:
    """Bus address -> the driver named on its lines (the AER events and their detail lines)."""
    named: dict[str, str] = {}
    for event in kernel_log.get("events") or []:
        if event.get("kind") != "pcie_aer":
            continue
        for line in (event.get("text") or "", *(event.get("lines") or ())):
            for match in _DRIVER_LINE.finditer(line):
                pci = _pci(match.group("pci"))
                if pci is not None:
                    named.setdefault(pci, match.group("driver"))
    return named


def gpu_addresses(kernel_log: Mapping[str, Any], nvidia_smi: Mapping[str, Any]) -> tuple[list[str], list[str]]:
    """The GPUs' bus addresses and where they came from (``nvidia-smi``, ``kernel-log``)."""
    from_smi = {p for p in (_pci(g.get("pci")) for g in nvidia_smi.get("gpus") or [] if isinstance(g, Mapping)) if p}
    from_log: set[str] = set()
    for event in kernel_log.get("events") or []:
        if event.get("kind") in ("xid", "fallen_off_bus", "gpu_reset_required", "other_nvrm") and event.get("pci"):
            from_log.update(p for p in (_pci(event["pci"]),) if p)
    for name in ("adapter_init_failed_gpus", "gpu_lost_gpus", "nouveau_devices"):
        from_log.update(p for p in map(_pci, kernel_log.get(name) or []) if p)
    from_log.update(pci for pci, driver in _drivers(kernel_log).items() if driver in _GPU_DRIVERS)
    sources = [name for name, found in (("nvidia-smi", from_smi), ("kernel-log", from_log)) if found]
    return sorted(from_smi | from_log), sources


def _uncorrectable(kernel_log: Mapping[str, Any]) -> dict[str, str]:
    """Bus address -> worst uncorrectable severity (``fatal`` / ``nonfatal``), AER and GHES together."""
    worst: dict[str, str] = {}

    def note(addresses: Iterable[Any], severity: str) -> None:
        for pci in filter(None, map(_pci, addresses)):
            if _SEVERITY_RANK[severity] > _SEVERITY_RANK.get(worst.get(pci, ""), 0):
                worst[pci] = severity

    note(kernel_log.get("pcie_aer_nonfatal_devices") or [], "nonfatal")
    note(kernel_log.get("pcie_aer_fatal_devices") or [], "fatal")
    note(kernel_log.get("pcie_aer_unrecovered_devices") or [], "fatal")  # the kernel gave the device up
    for record in kernel_log.get("host_errors") or []:
        if record.get("source") == "ghes" and record.get("pci") and "pcie" in str(record.get("section", "")).lower():
            severity = str(record.get("severity") or "")
            if severity in ("recoverable", "fatal"):
                note([record["pci"]], "fatal" if severity == "fatal" else "nonfatal")
    return worst


def _ghes_identity(kernel_log: Mapping[str, Any]) -> dict[str, tuple[str, str]]:
    """Bus address -> (port type, vendor id) from GHES PCIe records."""
    found: dict[str, tuple[str, str]] = {}
    for record in kernel_log.get("host_errors") or []:
        pci = _pci(record.get("pci"))
        if record.get("source") == "ghes" and pci:
            found[pci] = (str(record.get("port_type") or ""), str(record.get("vendor_id") or "").lower())
    return found


def _classify(
    pci: str, gpus: set[str], drivers: Mapping[str, str], ghes: Mapping[str, tuple[str, str]]
) -> tuple[str, str]:
    """(``gpu`` / ``other`` / ``port``, what identified it)."""
    if pci in gpus:
        return "gpu", "a GPU address"
    driver = drivers.get(pci)
    if driver in _GPU_DRIVERS:
        return "gpu", f"driver {driver}"
    if driver and driver not in _PORT_DRIVERS:
        return "other", f"driver {driver}"
    port_type, vendor = ghes.get(pci, ("", ""))
    if "end point" in port_type.lower() and vendor and vendor != NVIDIA_VENDOR:
        return "other", f"PCIe end point, vendor {vendor}"
    return "port", f"driver {driver}" if driver else "nothing names the device"


def derive(inputs: Mapping[str, Mapping[str, Any]], params: Mapping[str, Any] | None = None) -> dict[str, Any]:
    kernel_log = inputs["kernel_log"]
    nvidia_smi = inputs.get("nvidia_smi") or {}
    gpus, sources = gpu_addresses(kernel_log, nvidia_smi)
    drivers = _drivers(kernel_log)
    ghes = _ghes_identity(kernel_log)
    devices = []
    for pci, severity in sorted(_uncorrectable(kernel_log).items()):
        where, why = _classify(pci, set(gpus), drivers, ghes)
        devices.append({"pci": pci, "severity": severity, "attributed_to": where, "identified_by": why})
    by = {kind: [d for d in devices if d["attributed_to"] == kind] for kind in ("gpu", "other", "port")}
    return {
        "kind": KIND,
        "warnings": [],
        "gpu_addresses": gpus,
        "gpu_addresses_from": sources,
        "uncorrectable_devices": devices,
        "gpu_devices": [d["pci"] for d in by["gpu"]],
        "gpu_fatal": any(d["severity"] == "fatal" for d in by["gpu"]),
        "other_devices": [d["pci"] for d in by["other"]],
        "other_described": [f"{d['pci']} ({d['identified_by']}, {d['severity']})" for d in by["other"]],
        "port_devices": [d["pci"] for d in by["port"]],
        "correctable_count": int((kernel_log.get("pcie_aer_by_severity") or {}).get("correctable") or 0),
    }


COLLECTOR = DerivedCollector(**registered(KIND), inputs=("kernel_log",), optional_inputs=("nvidia_smi",), derive=derive)
