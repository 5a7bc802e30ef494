"""What one (possibly multi-line) kernel message is: event, prelude, detail or nothing we read."""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from functools import cached_property
from typing import Any

from nightowl.collectors.gpu import xid_catalog
from nightowl.collectors.gpu.kernel_log.patterns import (
    _AER_RECEIVED,
    _AER_SEVERITY,
    _API_MISMATCH,
    _BANDWIDTH,
    _BOARD_SERIAL,
    _BUS_DEVICE,
    _CAUSED_BY,
    _DETAIL_HEADER,
    _DRIVER_VERSION,
    _EDAC,
    _EDAC_LEGACY,
    _ESCAPED_NEWLINE,
    _FALLEN_OFF_BUS,
    _GHES_FIELD,
    _GHES_OPENER,
    _GPU_ADDRESS,
    _GPU_INDEX,
    _GPU_PRELUDE,
    _GPU_SERIAL,
    _HUNG_TASK,
    _MCE_LOGGED,
    _NOUVEAU_DEVICE,
    _OOM_KILL,
    _OTHER_SUBKINDS,
    _PCIE_BUS_ERROR,
    _PID_NAME,
    _PLUGIN_XID,
    _REMAP_FAILED,
    _REMAP_PENDING,
    _RESET_REQUIRED,
    _RM_INIT_CODE,
    _SXID,
    _SXID_DETAIL,
    _SXID_SEVERITY,
    _XID,
    _XID_MIG,
)
from nightowl.collectors.gpu.kernel_log.status_codes import with_status_named
from nightowl.collectors.pci import find_pci, normalize_pci


@dataclass(frozen=True)
class _Classified:
    """What one (possibly multi-line) message is. ``role`` says what the parser does with it."""

    role: str  # event | prelude | board_serial | gpu_serial | sxid_detail | bandwidth | ignore | unreadable
    kind: str | None = None
    code: int | None = None
    pci: str | None = None
    pid: int | None = None
    process: str | None = None
    text: str = ""
    extras: tuple[tuple[str, Any], ...] = ()

    @cached_property
    def key(self) -> tuple[Any, ...]:
        """Events with the same key are one (collapsed) event."""
        return (self.kind, self.code, self.pci, self.pid, self.process, self.text)


_IGNORE = _Classified("ignore")


# --- classification -------------------------------------------------------------------------------
def _pid(raw: str | None) -> int | None:
    digits = (raw or "").strip("'")
    return int(digits) if digits.isdigit() else None


def _process(raw: str | None) -> str | None:
    name = (raw or "").strip().strip("'")
    return None if name in ("", "<unknown>") else name


def _address(raw: str | None) -> str | None:
    """A GPU address as the driver wrote it, with or without domain/function, as ``dddd:bb:dd``."""
    if not raw:
        return None
    pci = normalize_pci(raw)
    if pci is None and _BUS_DEVICE.fullmatch(raw.strip()):
        pci = normalize_pci("0000:" + raw.strip())
    return pci


def _gpu_pci(body: str) -> str | None:
    """The GPU a driver message names: "GPU 0000:09:00.0", "GPU 18:00.0", "(PCI:0000:01:00.0)" ..."""
    match = _GPU_ADDRESS.search(body)
    return _address(match.group("addr")) if match is not None else find_pci(body)


def _nvrm_extras(subkind: str | None, body: str) -> list[tuple[str, Any]]:
    extras: list[tuple[str, Any]] = []
    index = _GPU_INDEX.match(body)
    if index is not None:
        extras.append(("gpu_index", int(index.group(1))))
    if subkind == "rm_init_adapter_failed":
        code = _RM_INIT_CODE.search(body)
        if code is not None:
            extras.append(("init_error", code.group("code")))
    elif subkind == "driver_mismatch":
        mismatch = _API_MISMATCH.search(" ".join(body.split()))
        if mismatch is not None:
            extras.append(("client_version", mismatch.group("client_version").rstrip(".")))
            extras.append(("module_version", mismatch.group("module_version")))
            if mismatch.group("client"):
                extras.append(("client", mismatch.group("client")))
    return extras


def _classify_xid(body: str) -> _Classified:
    match = _XID.match(body)
    if match is None:
        return _Classified("unreadable", text=body)
    code = int(match.group("code"))
    rest = match.group("rest").strip()
    pid = process = None
    text = rest
    owner = _PID_NAME.match(rest)
    if owner is not None:
        pid, process, text = (
            _pid(owner.group("pid")),
            _process(owner.group("name")),
            owner.group("text") or "",
        )
    extras: list[tuple[str, Any]] = []
    if code == 154:
        extras.append(("recovery_action", xid_catalog.recovery_name(text)))
    if code in xid_catalog.NVLINK5_CODES:
        extras.append(("severity", xid_catalog.nvlink_severity(text)))
    if code in (63, 64):  # the line says what to do: "... reset gpu to activate" or a remap failure
        if _REMAP_PENDING.search(text):
            extras.append(("remap_status", "reset-pending"))
        elif _REMAP_FAILED.search(text):
            extras.append(("remap_status", "failed"))
    caused_by = _CAUSED_BY.search(text)
    if caused_by is not None:
        extras.append(("caused_by_xid", int(caused_by.group(1))))
    address = match.group("pci")
    mig = _XID_MIG.match(address.strip())
    if mig is not None:
        address = mig.group("pci")
        extras.append(("gpu_instance", int(mig.group("gi"))))
        if mig.group("ci") is not None:
            extras.append(("compute_instance", int(mig.group("ci"))))
    return _Classified("event", "xid", code, _address(address), pid, process, text, tuple(extras))


def _classify_sxid(body: str) -> _Classified:
    match = _SXID.match(body)
    if match is None:
        return _Classified("unreadable", text=body)
    code, text = int(match.group("code")), match.group("text").strip()
    pci = normalize_pci(match.group("pci"))
    if _SXID_DETAIL.match(text):
        return _Classified("sxid_detail", "sxid", code, pci, text=text)
    severity = _SXID_SEVERITY.match(text)
    extras = (("severity", "fatal" if severity.group(1).lower() == "fatal" else "nonfatal"),) if severity else ()
    return _Classified("event", "sxid", code, pci, text=text, extras=extras)


def _classify_nvrm(body: str) -> _Classified:
    if body.startswith("Xid"):
        return _classify_xid(body)
    body = with_status_named(body)
    if "#012" in body:
        body = " ".join(_ESCAPED_NEWLINE.sub(" ", body).split())
    if _DETAIL_HEADER.match(body):
        return _Classified("detail", text=body)
    prelude = _GPU_PRELUDE.match(body)
    if prelude is not None:
        return _Classified("prelude", pci=normalize_pci(prelude.group("pci")), text=prelude.group("uuid"))
    serial = _BOARD_SERIAL.match(body)
    if serial is not None:
        return _Classified("board_serial", text=serial.group("serial"))
    gpu_serial = _GPU_SERIAL.match(body)
    if gpu_serial is not None:
        return _Classified("gpu_serial", pci=normalize_pci(gpu_serial.group("pci")), text=gpu_serial.group("serial"))
    if _FALLEN_OFF_BUS.search(body):
        return _Classified("event", "fallen_off_bus", pci=_gpu_pci(body), text=body)
    if _RESET_REQUIRED.search(body):
        index = _GPU_INDEX.match(body)
        extras_reset = (("gpu_index", int(index.group(1))),) if index else ()
        return _Classified("event", "gpu_reset_required", pci=_gpu_pci(body), text=body, extras=extras_reset)
    extras: list[tuple[str, Any]] = []
    found_subkind: str | None = None
    for subkind, pattern in _OTHER_SUBKINDS:
        if pattern.search(body):
            found_subkind = subkind
            extras.append(("subkind", subkind))
            break
    extras.extend(_nvrm_extras(found_subkind, body))
    version = _DRIVER_VERSION.match(body)
    if version is not None:
        extras.append(("driver_version", version.group("version")))
    return _Classified("event", "other_nvrm", pci=_gpu_pci(body), text=body, extras=tuple(extras))


def _classify_aer(message: str) -> _Classified:
    received = _AER_RECEIVED.search(message)
    if received is not None:
        severity = _AER_SEVERITY.search(received.group("what") or "")
        pci = normalize_pci(received.group("src")) or find_pci(message)
        extras = (("severity", severity.group(1).lower()),) if severity else ()
        return _Classified("event", "pcie_aer", pci=pci, text=message, extras=extras)
    bus_error = _PCIE_BUS_ERROR.search(message)
    if bus_error is not None:  # a report whose "error received" line we did not see
        extras = (("severity", bus_error.group("severity").strip().lower()),)
        return _Classified("event", "pcie_aer", pci=find_pci(message), text=message, extras=extras)
    return _IGNORE


def _classify_bandwidth(message: str) -> _Classified:
    match = _BANDWIDTH.search(message)
    if match is None:
        return _IGNORE
    extras = (
        ("available", match.group("available")),
        ("limited_by", match.group("limited_by")),
        ("limiting_pci", normalize_pci(match.group("at"))),
        ("capable", match.group("capable")),
    )
    return _Classified("bandwidth", pci=normalize_pci(match.group("pci")), text=message.strip(), extras=extras)


_MODESET_GPU = re.compile(r"\bGPU:(\d+):")  # nvidia-modeset's "ERROR: GPU:0: ..." (the driver's GPU instance)


def _classify_modeset(message: str) -> _Classified:
    """An nvidia-modeset ERROR line: an event only where it names a state the NVRM patterns judge (the GPU needs
    a reset, is lost, is in a full-chip reset), by name or as a status number; a display error alone is no GPU
    fault a runbook acts on."""
    found = _classify_nvrm(message[len("nvidia-modeset: ") :].strip())
    subkind = dict(found.extras).get("subkind")
    if found.role != "event" or (found.kind == "other_nvrm" and subkind is None):
        return _IGNORE
    found = replace(found, text=f"nvidia-modeset: {found.text}")
    index = _MODESET_GPU.search(message)
    if found.kind == "gpu_reset_required" and index is not None and not found.extras:
        return replace(found, extras=(("gpu_index", int(index.group(1))),))
    return found


def classify(message: str) -> _Classified:
    """What a message (from its anchor to the end, continuation lines joined) is. Pure."""
    if message.startswith("nvidia-modeset: "):
        return _classify_modeset(message)
    if message.startswith("NVRM: "):
        if message[6:7] == " " and message[6:].strip():  # indented inside the message: a table row, a dump
            return _Classified("detail", text=message[6:].strip())
        return _classify_nvrm(message[6:].strip())
    if message.startswith("SXid"):
        return _classify_sxid(message)
    if message.startswith("Xid ("):
        return _classify_xid(message)
    if message.startswith("XidCriticalError"):
        plugin = _PLUGIN_XID.search(message)
        if plugin is None:
            return _Classified("unreadable", text=message)
        extras = (("uuid", plugin.group("uuid")), ("source", "k8s-device-plugin"))
        return _Classified("event", "xid", int(plugin.group("code")), text=message.strip(), extras=extras)
    if message.startswith(("EDAC ", "Hardware Error]: ", "INFO: task ", "nouveau ")):
        return _classify_host(message.strip())
    if "ut of memory" in message:
        oom = _OOM_KILL.search(message)
        if oom is None:
            return _IGNORE
        return _Classified(
            "event", "oom_kill", pid=int(oom.group("pid")), process=oom.group("name"), text=message.strip()
        )
    if "available PCIe bandwidth" in message:
        return _classify_bandwidth(message)
    return _classify_aer(message.strip())


def _classify_host(message: str) -> _Classified:
    """EDAC/MCE/GHES hardware errors, hung tasks, devices nouveau holds: kept beside the events."""
    if message.startswith("Hardware Error]"):
        message = "[" + message
    edac = _EDAC.match(message)
    if edac is not None:
        severity = "corrected" if edac.group("sev") == "CE" else "uncorrected"
        dimm = edac.group("dimm")
        extras = (
            ("source", "edac"),
            ("severity", severity),
            ("dimm", None if dimm == "unknown" else dimm),
            ("errors", int(edac.group("count"))),
        )
        return _Classified("host_error", text=message, extras=extras)
    legacy = _EDAC_LEGACY.search(message)
    if legacy is not None:
        label = legacy.group("label").strip(" :")
        dimm = label or f"MC{legacy.group('mc')}_row{legacy.group('row')}_channel{legacy.group('channel')}"
        severity = "corrected" if legacy.group("sev") == "CE" else "uncorrected"
        extras = (("source", "edac"), ("severity", severity), ("dimm", dimm), ("errors", 1))
        return _Classified("host_error", text=message, extras=extras)
    if _GHES_OPENER.match(message):
        return _Classified("host_error", text=message, extras=(("source", "ghes"), ("severity", None)))
    field_match = _GHES_FIELD.match(message)
    if field_match is not None:
        fields = {k: v for k, v in field_match.groupdict().items() if v}
        if "pci" in fields:
            fields["pci"] = normalize_pci(fields["pci"])
        if "severity" in fields:
            fields["severity"] = fields["severity"].strip().lower()
        return _Classified("ghes_detail", text=message, extras=tuple(fields.items()))
    if _MCE_LOGGED.match(message):
        return _Classified("host_error", text=message, extras=(("source", "mce"), ("severity", None)))
    hung = _HUNG_TASK.match(message)
    if hung is not None:
        pid = int(hung.group("pid"))
        seconds = (("seconds", int(hung.group("seconds"))),)
        return _Classified("hung_task", pid=pid, process=hung.group("name"), text=message, extras=seconds)
    nouveau = _NOUVEAU_DEVICE.match(message)
    if nouveau is not None:
        return _Classified("nouveau", pci=normalize_pci(nouveau.group("pci")), text=message)
    return _IGNORE
