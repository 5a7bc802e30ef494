"""The kernel log: NVIDIA Xid/SXid events, GPUs off the bus, PCIe AER and OOM kills.

Reads every way the kernel log reaches a person: bare ``NVRM:`` lines, ``dmesg`` (monotonic
``[ 123.456]``), ``/dev/kmsg`` records (``6,1234,5678901,-;NVRM: ...``), ``dmesg -T``,
``dmesg --time-format iso`` (with or without ``-x`` facility columns),
syslog and journald (``short`` in any locale, ``short-iso``), Talos ``talosctl dmesg``, and the
k8s-device-plugin's ``XidCriticalError`` line. A line is recognised by its message (``NVRM:``,
``SXid (``, ``AER:`` ...), never by its timestamp, so month names in any language are fine.

The parser streams (``parse_lines``) and keeps one event per distinct message: a burst of identical
lines (same kind, code, GPU, pid, process and text) becomes one event with ``count``, ``first_time``
and ``last_time``, so memory grows with distinct events, not with lines.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from functools import cached_property
from typing import Any

from nightowl import knowledge
from nightowl.collectors.base import Collector, declare, to_jsonable
from nightowl.collectors.gpu import xid_catalog
from nightowl.collectors.gpu.driver_locks import DriverLockScan
from nightowl.collectors.host.nic_links import LinkScan
from nightowl.collectors.pci import find_pci, normalize_pci

KIND = "kernel-log"
MAX_DISTINCT_EVENTS = 20_000  # a safety cap; a real log has tens to hundreds
MAX_LINES_PER_EVENT = 32  # continuation lines kept per (collapsed) event
MAX_WARNINGS = 20
_CACHE_LIMIT = 8192  # classified messages remembered (bursts repeat the same message)
_SEEN_LIMIT = 4 * MAX_DISTINCT_EVENTS  # line texts remembered for the burst fast path

EVENT_KINDS = ("xid", "sxid", "fallen_off_bus", "gpu_reset_required", "oom_kill", "pcie_aer", "other_nvrm")


@dataclass
class KernelLogResult:
    """``kernel-log`` (docs/reference.md#parse-output). Events are dicts: the contract keys plus per-kind extras."""

    kind: str = KIND
    events: list[dict[str, Any]] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    driver_version: str | None = None
    pcie_bandwidth_limited: list[dict[str, Any]] = field(default_factory=list)
    lines_read: int = 0
    # Beside the GPU events (new keys): host memory/APEI errors, hung tasks, devices nouveau holds.
    host_errors: list[dict[str, Any]] = field(default_factory=list)
    hung_tasks: list[dict[str, Any]] = field(default_factory=list)
    nouveau_devices: list[str] = field(default_factory=list)
    # Tasks in D state whose stack waits on a lock inside the NVIDIA driver (driver_locks.py).
    driver_lock_waits: list[dict[str, Any]] = field(default_factory=list)
    driver_module_missing: bool = False  # modprobe / systemd-modules-load found no nvidia module
    nic_links: list[dict[str, Any]] = field(default_factory=list)  # link downs/ups per NIC port (nic_links.py)


# --- where a message starts -------------------------------------------------------------------
# Messages we read, found anywhere in a line; what precedes is the timestamp/host/tag prefix.
# (Plain literals: an optional group here makes every search several times slower.)
_ANCHOR = re.compile(
    r"NVRM: |SXid \(|Xid \(|XidCriticalError|Out of memory|out of memory|AER: |PCIe Bus Error"
    r"|available PCIe bandwidth|EDAC |Hardware Error\]: |INFO: task |nouveau "
)
# "pcieport 0000:00:02.0: " before an AER/bandwidth message: part of the message, not of the prefix.
# (The lookbehind only skips starts inside a word, which could never be the leftmost match: same
# matches as without it, found without re-scanning each word.)
_DEVICE_TAIL = re.compile(r"((?<!\S)\S+ [0-9a-fA-F]{4,8}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7]:\s)")
_OOM_CGROUP = re.compile(r"Memory cgroup $")
# The time stamp in front of a line (blanks, then dmesg "[ 1234.567890] ", dmesg -T "[Tue Mar  5 10:00:00
# 2024] ", ISO 8601 as journalctl -o short-iso writes it, or syslog "Mar  5 10:00:00 "; or blanks alone).
# The rest of the line, which repeats in a burst, keys the memo of line shapes; see _Shape for why the
# stamp cannot change how the rest reads.
_STAMP = re.compile(  # always matches, maybe empty; no backtracking into the blanks (a stamp starts non-blank)
    r"[ \t]*(?P<stamp>\[ *\+?[0-9]+\.[0-9]+\] "
    r"|\[[A-Z][a-z]{2} [A-Z][a-z]{2} [ 0-9][0-9] [0-9]{2}:[0-9]{2}:[0-9]{2} [0-9]{4}\] "
    r"|[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}(?:[.,][0-9]+)?(?:Z|[+-][0-9]{2}:?[0-9]{2})? "
    r"|[A-Z][a-z]{2} [ 0-9][0-9] [0-9]{2}:[0-9]{2}:[0-9]{2} )?"
)
_ADDRESS_FIRST = re.compile(r"[0-9a-fA-F]{4,8}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7]:\s")
_NVSWITCH_DEVICE = re.compile(r"(nvidia-nvswitch\d+):\s*$")

# --- timestamps (decision: a yearless or non-English time stays as written) -------------------
_SYSLOG_TIME = re.compile(r"^\s*(\S+\s+\d{1,2}\s+\d{1,2}:\d\d:\d\d(?:\.\d+)?)\s")  # Mar 29 15:38:59, lis 12 ...
_ISO_TIME = re.compile(r"(\d{4}-\d\d-\d\d)[T ](\d\d:\d\d:\d\d)(?:[.,](\d+))?(Z|[+-]\d\d:?\d\d)?")
_SLASH_TIME = re.compile(r"(\d{4})/(\d\d)/(\d\d)[ T](\d\d:\d\d:\d\d)")  # Go log package (device plugin)
_BRACKET = re.compile(r"\[\s*([^\]]*?)\s*\]")
_MONOTONIC = re.compile(r"\d+\.\d+")
_DMESG_T = re.compile(r"(?:\S+\s+)?(\S+)\s+(\d{1,2})\s+(\d\d):(\d\d):(\d\d)\s+(\d{4})")  # Tue Mar  5 10:00:00 2024
_MONTHS = {
    m: i
    for i, m in enumerate(("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"), start=1)
}

# --- NVRM messages (text after "NVRM: ") -------------------------------------------------------
_XID = re.compile(r"Xid \((?:PCI:)?(?P<pci>[^)]*)\):?\s*(?P<code>\d+)\b,?\s*(?P<rest>.*)$")
_SXID = re.compile(r"SXid \((?:PCI:)?(?P<pci>[^)]*)\):?\s*(?P<code>\d+)\b,?\s*(?P<text>.*)$")
_PID_NAME = re.compile(r"pid=(?P<pid>'?<unknown>'?|'?\d+'?),\s*name=(?P<name>[^,]*?)\s*(?:,\s*(?P<text>.*))?$")
_SXID_DETAIL = re.compile(r"(?:Severity \d+|Data \{)")  # continuation lines of an SXid report
_SXID_SEVERITY = re.compile(r"(non-?fatal|fatal)\b", re.I)
_CAUSED_BY = re.compile(r"caused by previous Xid (\d+)")
_GPU_PRELUDE = re.compile(r"GPU at (?:PCI:)?(?P<pci>[0-9a-fA-F:.]+?):?\s+(?P<uuid>GPU-[0-9a-fA-F-]+)")
_BOARD_SERIAL = re.compile(r"GPU Board Serial Number:\s*(?P<serial>\S+)")
_GPU_SERIAL = re.compile(r"GPU (?P<pci>[0-9a-fA-F:.]+): GPU serial number is (?P<serial>\w+)")
_FALLEN_OFF_BUS = re.compile(r"fallen off the bus", re.I)
_RESET_REQUIRED = re.compile(
    r"NV_ERR_RESET_REQUIRED|\breset required\b|\brequires? (?:a )?(?:GPU )?reset\b|\bneeds? to be reset\b",
    re.I,
)
_DRIVER_VERSION = re.compile(r"loading NVIDIA .*?Kernel Module.*?\s(?P<version>\d+\.\d+(?:\.\d+)?)(?:\s|$)")
# Multi-line NVRM messages printed as several lines: the opener, then lines that continue it
# (NVSentinel #155 fallen-off-the-bus block; the crash-dump banner).
# The API-mismatch and probe-routine reports (driver source kernel-open/nvidia/nv.c) come as an indented
# block, as one line per part each with its own (or the same repeated) time, or as bare "NVRM:" lines.
_BLOCK_OPENER = re.compile(
    r"The NVIDIA GPU \S+\s*$|crash dump has been created|API mismatch|probe routine was not called"
    r"|This can occur when a driver such as|Try unloading the conflicting|device is invalid:"
)
_BLOCK_CONTINUATION = re.compile(
    r"\(PCI ID: |installed in this system|fallen off the bus and is not|nvidia-bug-report\.sh as root"
    r"|the NVIDIA kernel module is unloaded"
    r"|has the version |this kernel module has|the version \d|make sure that this|kernel module and all NVIDIA"
    r"|components have the same|have the same version"
    r"|This can occur when a driver such as|nouveau, rivafb|nvidiafb,? or rivatv|was loaded and obtained"
    r"|the NVIDIA device\(s\)|Try unloading the conflicting|reconfigure your kernel without|driver\(s\)\), then"
    r"|again\.$|BAR\d is "
)
# A GPU named by address after "GPU " / "PCI:" with or without the domain and function ("GPU 18:00.0").
_GPU_ADDRESS = re.compile(
    r"(?:PCI:|GPU )(?P<addr>(?:[0-9a-fA-F]{4,8}:)?[0-9a-fA-F]{2}:[0-9a-fA-F]{2}(?:\.[0-7])?)"
    r"(?![0-9a-fA-F]|:[0-9a-fA-F])"
)
_BUS_DEVICE = re.compile(r"[0-9a-fA-F]{2}:[0-9a-fA-F]{2}")
_GPU_INDEX = re.compile(r"GPU(\d+)[ :]")  # "GPU6 _kgspIsHeartbeatTimedOut: ..." (the driver's GPU instance)
_RM_INIT_CODE = re.compile(r"RmInitAdapter failed! \((?P<code>0x[0-9a-fA-F]+:0x[0-9a-fA-F]+:\d+)\)")
_API_MISMATCH = re.compile(
    r"API mismatch: the client (?:'(?P<client>[^']*)' \(pid (?P<pid>\d+)\) )?"
    r"has the version (?P<client_version>[\d.]+),"
    r" but this kernel module has the version (?P<module_version>\d[\d.]*\d)"
)
_REMAP_PENDING = re.compile(r"reset (?:the )?gpu to activate|pending", re.I)
_REMAP_FAILED = re.compile(r"fail", re.I)
_ESCAPED_NEWLINE = re.compile(r"#012(?:NVRM: )?")  # rsyslog writes a message's newlines as "#012"
# Rows of the driver's diagnostic tables (GSP RPC history) and crash reports are printed indented after
# "NVRM: ", or under a "... history" header: details of the event before them, never events of their own.
_DETAIL_HEADER = re.compile(r"(?:GPU\d+ )?RPC (?:event )?history|entry function ")
# other_nvrm sub-kinds, first match wins (sources: corpus samples named in fixtures/corpus/gpu/INDEX.md).
# New sub-kinds (GPU failures that are not Xids) read from the samples in fixtures/corpus-extra/kernel-log/.
_OTHER_SUBKINDS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("driver_load", re.compile(r"^loading NVIDIA ")),
    ("driver_mismatch", re.compile(r"API mismatch")),
    ("driver_conflict", re.compile(r"probe routine was not called|obtained ownership of the NVIDIA device")),
    ("rm_init_adapter_failed", re.compile(r"RmInitAdapter failed|rm_init_adapter failed", re.I)),
    ("probe_failed", re.compile(r"probe routine failed")),
    ("pci_resource_invalid", re.compile(r"region assigned to your NVIDIA device is invalid|BAR\d is \d+M @ 0x0\b")),
    ("no_device_initialized", re.compile(r"No NVIDIA graphics adapter probed|None of the NVIDIA devices")),
    ("gpu_lost", re.compile(r"\bGPU (?:is|has been|was) lost\b|\blost from the bus\b|\bGPU lost\b", re.I)),
    ("gsp_heartbeat_timeout", re.compile(r"Heartbeat timed out|HeartbeatTimedOut", re.I)),
    ("gsp_boot_failed", re.compile(r"BootGspRm|Cannot initialize GSP firmware|GSP-RM image|No firmware image found")),
    ("gsp_timeout", re.compile(r"GSP Timeout|waiting for RPC response", re.I)),
    ("gsp_rpc_failed", re.compile(r"(?<!\w)\w+_GSP: .*failed")),  # (?<!\w): one try per word, not per letter
    ("gsp_rpc_failed", re.compile(r"rpcSendMessage failed|rpcRecvPoll failed")),
    ("memory_subsystem_error", re.compile(r"Memory Subsystem Error")),
    ("gsp_coredump", re.compile(r"CoreDump", re.I)),
    ("pmu_halted", re.compile(r"PMU has halted")),
    ("nvlink_training_failed", re.compile(r"knvlink\w*:.*failed", re.I)),
    ("crash_dump", re.compile(r"crash dump has been created")),
    ("assertion_failed", re.compile(r"Assertion failed")),
)

# --- other kernel messages ----------------------------------------------------------------------
_OOM_KILL = re.compile(r"[Oo]ut of memory.*?: Kill(?:ed)? process (?P<pid>\d+) \((?P<name>[^)]*)\)")
_AER_RECEIVED = re.compile(
    r"AER: (?P<what>.*?)error(?: message)? received(?::? (?:from )?(?P<src>[0-9a-fA-F]{4,8}:[0-9a-fA-F]{2}:"
    r"[0-9a-fA-F]{2}\.[0-7]))?"
)
_AER_SEVERITY = re.compile(r"(Uncorrected \((?:Non-)?Fatal\)|Corrected)", re.I)
_PCIE_BUS_ERROR = re.compile(r"PCIe Bus Error: severity=(?P<severity>[^,]+)")
# Lines that continue an AER report (kernel drivers/pci/pcie/aer.c print one report over several lines).
_AER_DETAIL = re.compile(
    r"PCIe Bus Error|\bdevice \[[0-9a-fA-F]{4}:[0-9a-fA-F]{4}\] error status|:\s+\[\s*\d+\] \w"
    r"|error_detected|AER-aware|TLP Header|AER:\s+(?!.*error(?: message)? received)"
)
_BANDWIDTH = re.compile(
    r"(?P<pci>[0-9a-fA-F]{4,8}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7]): "
    r"(?P<available>[\d.]+ [GMT]b/s) available PCIe bandwidth, limited by (?P<limited_by>.+?) "
    r"link at (?P<at>\S+) \(capable of (?P<capable>[\d.]+ [GMT]b/s)"
)
_PLUGIN_XID = re.compile(r"XidCriticalError: Xid=(?P<code>\d+) on Device=(?P<uuid>[^,\s]+)")
# --- the host around the GPU (kernel Documentation/driver-api/edac.rst, drivers/acpi/apei/ghes.c,
# arch/x86/kernel/cpu/mce, kernel/hung_task.c) -----------------------------------------------------
# "EDAC MC3: 1 UE memory read error on CPU_SrcID#1_MC#1_Chan#2_DIMM#0 (channel:2 ...)"
_EDAC = re.compile(
    r"EDAC (?:\w+ )?MC(?P<mc>\d+): (?P<count>\d+) (?P<sev>CE|UE|Fatal) (?P<what>[^(]*?)on (?P<dimm>[^\s(]+)"
)
# The wording of kernels before 3.x (edac_mc.c: "CE page 0x%lx, offset 0x%lx, grain %d, syndrome 0x%lx, row %d,
# channel %d, label \"%s\": %s"), still printed by some vendor kernels: one error per line, the DIMM by label
# (or by row and channel when no label is registered).
_EDAC_LEGACY = re.compile(
    r"EDAC MC(?P<mc>\d+): (?P<sev>CE|UE) (?:page 0x[0-9a-fA-F]+, offset 0x[0-9a-fA-F]+, grain \d+, "
    r"(?:syndrome 0x[0-9a-fA-F]+, )?)?row (?P<row>\d+), channel (?P<channel>\d+), labels?:? ?\"(?P<label>[^\"]*)\""
)
_GHES_OPENER = re.compile(r"\[Hardware Error\]: Hardware error from APEI Generic Hardware Error Source")
_GHES_FIELD = re.compile(
    r"\[Hardware Error\]:\s+(?:event severity: (?P<severity>\w[\w ]*)|section_type: (?P<section>.+)"
    r"|device_id: (?P<pci>[0-9a-fA-F]{4,8}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7])"
    r"|port_type: \d+, (?P<port_type>.+?)\s*$|vendor_id: (?P<vendor_id>0x[0-9a-fA-F]{4}))"
)
_MCE_LOGGED = re.compile(r"\[Hardware Error\]: (?:Machine check events logged|CPU \d+: Machine Check)")
_HUNG_TASK = re.compile(r"INFO: task (?P<name>.+):(?P<pid>\d+) blocked for more than (?P<seconds>\d+) seconds")
_NOUVEAU_DEVICE = re.compile(r"nouveau (?P<pci>[0-9a-fA-F]{4,8}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7]): ")
MAX_HOST_RECORDS = 1000  # host errors and hung tasks kept (a storm repeats; counts go on)


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


# --- timestamps -----------------------------------------------------------------------------------
def _iso(date: str, clock: str, fraction: str | None, zone: str | None) -> str | None:
    text = f"{date}T{clock}"
    if fraction:
        text += "." + fraction[:6].ljust(6, "0")
    if zone:
        text += "+00:00" if zone == "Z" else f"{zone[:3]}:{zone[-2:]}"
    try:
        datetime.fromisoformat(text)
    except ValueError:
        return None
    return text


def _dmesg_t(inside: str) -> str | None:
    match = _DMESG_T.fullmatch(inside)
    if match is None:
        return None
    month = _MONTHS.get(match.group(1)[:3].lower())
    if month is None:
        return None
    try:
        stamp = datetime(
            int(match.group(6)),
            month,
            int(match.group(2)),
            int(match.group(3)),
            int(match.group(4)),
            int(match.group(5)),
        )
    except ValueError:
        return None
    return stamp.isoformat()


# A /dev/kmsg record (Documentation/ABI/testing/dev-kmsg): "priority,sequence,microseconds,flags;message".
_KMSG_RECORD = re.compile(r"^\s*\d+,\d+,(\d+),[^;]*;")


def parse_time(prefix: str) -> tuple[str | None, str | None]:
    """(time, monotonic) from the text before a message.

    ``time`` is ISO 8601 when the prefix holds an absolute, parseable time, else the time as written
    (a yearless syslog time, a dmesg -T time in another language, monotonic seconds), else None.
    ``monotonic`` is the ``[ 123.456]`` seconds when a wall-clock time is also present (syslog).
    """
    wall: str | None = None
    monotonic: str | None = None
    kmsg = _KMSG_RECORD.match(prefix)
    if kmsg is not None:  # microseconds since boot, written as dmesg writes them: "5.678901"
        micros = int(kmsg.group(1))
        return f"{micros // 1_000_000}.{micros % 1_000_000:06d}", None
    bracket = _BRACKET.search(prefix)
    if bracket is not None and _MONOTONIC.fullmatch(bracket.group(1)):
        monotonic = bracket.group(1)
    syslog = _SYSLOG_TIME.match(prefix)
    iso = _ISO_TIME.search(prefix)
    if syslog is not None and (iso is None or iso.start() > syslog.end()):
        wall = syslog.group(1)
    elif iso is not None:
        wall = _iso(*iso.groups()) or iso.group(0)
    elif bracket is not None and monotonic is None and any(c.isdigit() for c in bracket.group(1)):
        wall = _dmesg_t(bracket.group(1)) or bracket.group(1)  # also dmesg -H "[  +0.000844]" as written
    else:
        slash = _SLASH_TIME.search(prefix)
        if slash is not None:
            wall = _iso("-".join(slash.groups()[:3]), slash.group(4), None, None) or slash.group(0)
    if wall is None:
        return monotonic, None
    return wall, monotonic


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
    return _Classified("event", "xid", code, _address(match.group("pci")), pid, process, text, tuple(extras))


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


def classify(message: str) -> _Classified:
    """What a message (from its anchor to the end, continuation lines joined) is. Pure."""
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


# --- the streaming parser -----------------------------------------------------------------------------
# Most lines of a long log repeat a message seen before (a burst, an AER storm) behind a new timestamp.
# Whatever the parser derives from a line's text alone is therefore computed once per distinct text and
# looked up afterwards; only what depends on the order of lines (drafts, preludes, counts) runs per line:
#   _Parser.seen_*   the text after "NVRM: " / "SXid (" -> its event or note (parse_lines' fast path)
#   _Parser.shapes   the rest of a line behind its time stamp (_STAMP) -> how it splits (_Shape)
#   _Parser.messages a message -> what joining lines needs to know about it (_Message)
#   _Parser.cache    a message and its continuation lines -> their classification
# Each memo holds at most _CACHE_LIMIT entries (it is emptied when full), so memory stays bounded.
@dataclass(frozen=True, slots=True)
class _Message:
    """What the line-joining logic needs to know about one message (computed once per distinct text)."""

    text: str  # the message as kept: device name in front for AER/OOM lines, trailing blanks off
    nvrm_body: str | None  # text after "NVRM: " of a non-Xid NVRM message: what it adds as a continuation
    continues_block: bool  # carries on a multi-line NVRM block ("(PCI ID: ...", "nvidia-bug-report.sh ...")
    opens_block: bool  # a pending message holding this may be continued by `continues_block` lines
    waits: bool  # starts a draft that later lines may continue (an AER report, an NVRM block opener)
    is_aer: bool
    aer_detail: bool  # a line of an AER report other than its "error received" line
    found: _Classified  # what the message is on its own (no continuation lines)


def _message(text: str) -> _Message:
    nvrm = text.startswith("NVRM: ")
    body = text[6:].strip() if nvrm and not text.startswith("NVRM: Xid") else None
    opens_block = _BLOCK_OPENER.search(text) is not None
    is_aer = ("AER: " in text or "PCIe Bus Error" in text) and not text.startswith("NVRM")
    return _Message(
        text=text,
        nvrm_body=body,
        continues_block=body is not None and _BLOCK_CONTINUATION.match(body) is not None,
        opens_block=opens_block,
        waits=is_aer or (nvrm and opens_block),
        is_aer=is_aer,
        aer_detail=_AER_DETAIL.search(text) is not None and _AER_RECEIVED.search(text) is None,
        found=classify(text),
    )


def _split(line: str) -> tuple[str, str, str] | None:
    """(prefix, message, tail) of a line holding a message we read, else None.

    ``tail`` is the line from the anchor on, as read; ``message`` is it without trailing blanks and,
    for AER/bandwidth/OOM messages, with the device ("pcieport 0000:00:02.0: ") taken from the prefix.
    """
    match = _ANCHOR.search(line)
    if match is None:
        return None
    start = match.start()
    prefix, tail = line[:start], line[start:]
    message = tail.rstrip()
    if message.endswith('"') and prefix.endswith('"'):  # a tool quoting the line: [XID found] (...) "NVRM: ..."
        message = message[:-1]
    if not message.startswith(("NVRM", "SXid", "Xid")):
        device = _DEVICE_TAIL.search(prefix) or _OOM_CGROUP.search(prefix)
        if device is not None:
            prefix, message = prefix[: device.start()], prefix[device.start() :] + message
    return prefix, message, tail


def _aer_detail(line: str) -> str | None:
    """The detail a line without a message adds to a pending AER report, None if it is not one."""
    if _AER_DETAIL.search(line) is None:
        return None
    device = _DEVICE_TAIL.search(line)
    return (line[device.start() :] if device else line).strip()


@dataclass(frozen=True, slots=True)
class _Shape:
    """How a line splits, read from the rest of the line behind its ``_STAMP`` (the stamp adds only time).

    Exact, not a heuristic: a stamp holds blanks, digits, brackets, ``.,:+-TZ`` (a ``:`` only before a
    digit) and 3-letter words followed by a blank, and no pattern ``_split`` or ``_aer_detail`` uses can
    start on such text; every stamp ends in a blank, so a word boundary or the lookbehind of
    ``_DEVICE_TAIL`` judges the rest's first character as it would in the whole line; and
    ``_DEVICE_TAIL`` could only reach into the stamp through a rest that opens with a PCI address:
    such a rest gets ``_NO_SHAPE`` and its line the general path. The property test
    ``test_memoized_paths_read_like_the_general_path`` checks the equivalence.
    """

    message: _Message | None  # None: no message we read (a possible AER detail line)
    prefix: str = ""  # the prefix after the stamp
    tail: str = ""  # the line from the message on, as read (what the fast path of parse_lines keys)
    blank_prefix: bool = False  # the prefix after the stamp is empty or blank
    is_aer_detail: bool = False  # (no message) an AER detail line
    detail: str | None = None  # its detail text, None when it is the whole line stripped (stamp included)


_NO_SHAPE = _Shape(None)  # memo value of a rest that opens with a PCI address


@dataclass(slots=True)
class _Draft:
    """A message that more lines may continue (a block opener or an AER report)."""

    prefix: str
    message: str
    continuation: list[str] = field(default_factory=list)
    details: list[str] = field(default_factory=list)  # AER detail lines (kept as `lines`)
    is_aer: bool = False
    opens_block: bool = False


_NOTE_ROLES = frozenset(
    ("prelude", "board_serial", "gpu_serial", "sxid_detail", "detail")
    + ("host_error", "ghes_detail", "hung_task", "nouveau")
)


def _remember(memo: dict[Any, Any], key: Any, value: Any) -> None:
    if len(memo) >= _CACHE_LIMIT:
        memo.clear()
    memo[key] = value


class _Parser:
    """Line-by-line state. Most messages are emitted at once; only a message that more lines may
    continue (a block opener, an AER report) waits in ``pending`` for the next line."""

    def __init__(self) -> None:
        self.events: dict[tuple[Any, ...], dict[str, Any]] = {}
        # The text after "NVRM: " / "SXid (" -> its event, or what else it was (prelude, serial).
        # parse_lines looks repeats up here instead of parsing them again.
        self.seen_nvrm: dict[str, dict[str, Any] | _Classified] = {}
        self.seen_sxid: dict[str, dict[str, Any] | _Classified] = {}
        self.shapes: dict[str, _Shape] = {}
        self.messages: dict[str, _Message] = {}
        self.pending: _Draft | None = None
        self.cache: dict[tuple[str, ...], _Classified] = {}
        self.prelude: dict[str, Any] | None = None
        self.last_event: dict[str, Any] | None = None
        self.sxid_last: dict[tuple[str | None, int | None], dict[str, Any]] = {}
        self.bandwidth: dict[str, dict[str, Any]] = {}
        self.driver_version: str | None = None
        self.warnings: list[str] = []
        self.extra_warnings = 0
        self.dropped_events = 0
        self.lines_read = 0
        self.saw_text = False
        self.host_errors: list[dict[str, Any]] = []
        self.host_keys: dict[tuple[Any, ...], dict[str, Any]] = {}
        self.last_ghes: dict[str, Any] | None = None
        self.hung_tasks: list[dict[str, Any]] = []
        self.nouveau: dict[str, None] = {}
        self.xid_codes_seen: dict[str | None, set[int]] = {}
        self.xid79: list[dict[str, Any]] = []  # Xid 79 events (fallen-off-the-bus lines join them)

    def feed(self, line: str) -> None:
        """The general path for one line (``parse_lines`` short-cuts repeats of known messages)."""
        if not self.saw_text:
            self.saw_text = bool(line) and not line.isspace()
        cut = _STAMP.match(line)  # (always matches, maybe empty)
        if cut is not None and cut.end():
            end = cut.end()
            shape = self.shapes.get(line[end:])
            if shape is None:
                shape = self._new_shape(line[end:])
            message = shape.message
            if message is not None:
                # Blanks alone in front (no time): a continuation line if the whole prefix is blank.
                indented = cut.lastgroup is None and shape.blank_prefix
                self._feed_message(line[:end] + shape.prefix, message, shape.tail, indented)
                return
            if shape is not _NO_SHAPE:  # no message: _feed_plain, inlined (AER storms repeat these lines)
                pending = self.pending
                if pending is not None:
                    if not (pending.is_aer and shape.is_aer_detail):
                        self._flush()
                    elif len(pending.details) < MAX_LINES_PER_EVENT:
                        pending.details.append(shape.detail if shape.detail is not None else line.strip())
                return
        split = _split(line)
        if split is None:
            pending = self.pending
            self._feed_plain(_aer_detail(line) if pending is not None and pending.is_aer else None)
            return
        prefix, text, tail = split
        self._feed_message(prefix, self._message(text), tail, indented=bool(prefix) and prefix.isspace())

    def _new_shape(self, rest: str) -> _Shape:
        if _ADDRESS_FIRST.match(rest):
            shape = _NO_SHAPE
        else:
            split = _split(rest)
            if split is not None:
                prefix, text, tail = split
                shape = _Shape(self._message(text), prefix, tail, blank_prefix=not prefix or prefix.isspace())
            elif _AER_DETAIL.search(rest) is None:
                shape = _Shape(None)
            else:
                device = _DEVICE_TAIL.search(rest)
                shape = _Shape(None, is_aer_detail=True, detail=rest[device.start() :].strip() if device else None)
        _remember(self.shapes, rest, shape)
        return shape

    def _message(self, text: str) -> _Message:
        message = self.messages.get(text)
        if message is None:
            message = _message(text)
            _remember(self.messages, text, message)
        return message

    def _feed_plain(self, aer_detail: str | None) -> None:
        """A line without any message we read: an AER detail line, or the end of a pending message."""
        pending = self.pending
        if pending is None:
            return
        if pending.is_aer and aer_detail is not None:
            if len(pending.details) < MAX_LINES_PER_EVENT:
                pending.details.append(aer_detail)
            return
        self._flush()

    def _feed_message(self, prefix: str, message: _Message, tail: str, indented: bool) -> None:
        """A line with a message. ``indented``: its prefix is blank, as on the continuation lines of a
        multi-line NVRM message (they carry no timestamp)."""
        pending = self.pending
        body = message.nvrm_body
        if pending is None:
            if indented and body is not None and self.last_event is not None:
                self._add_line(self.last_event, body)
                return
        else:
            if body is not None and (indented or (message.continues_block and pending.opens_block)):
                if len(pending.continuation) < MAX_LINES_PER_EVENT:  # memory stays bounded on any input
                    pending.continuation.append(body)
                return
            if pending.is_aer and message.aer_detail:
                if len(pending.details) < MAX_LINES_PER_EVENT:
                    pending.details.append(message.text)
                return
            self._flush()
        if message.waits:
            self.pending = _Draft(prefix, message.text, is_aer=message.is_aer, opens_block=message.opens_block)
        else:
            self._handle(message.found, (message.text,), prefix, tail, ())

    def _flush(self) -> None:
        draft, self.pending = self.pending, None
        if draft is None:
            return
        # Keyed by the parts, not their join: the parts are memoized strings whose hashes are known.
        parts = (draft.message, *draft.continuation)
        found = self.cache.get(parts)
        if found is None:
            found = classify(" ".join(parts))
            _remember(self.cache, parts, found)
        self._handle(found, parts, draft.prefix, None, draft.details)

    def _handle(
        self, found: _Classified, parts: tuple[str, ...], prefix: str, tail: str | None, details: Sequence[str]
    ) -> None:
        """Act on a classified message (``parts``: its lines' messages). ``tail``: the line from the message
        on when parse_lines may short-cut its repeats (a single line, no AER details), else None."""
        role = found.role
        if role == "event":
            event = self._emit(found, prefix, details)
            if tail is not None and event is not None:
                self._remember_seen(tail, event)
        elif role in _NOTE_ROLES:
            self.note(found, prefix)
            if tail is not None:
                self._remember_seen(tail, found)
        elif role == "bandwidth":
            self._bandwidth(found)
        elif role == "unreadable":
            self._warn(f"unreadable Xid/SXid line: {' '.join(parts)[:200]}")

    def _remember_seen(self, tail: str, known: dict[str, Any] | _Classified) -> None:
        """Let parse_lines short-cut the next line with this tail (it looks up the text after the
        6-character "NVRM: " / "SXid (" it finds)."""
        if len(self.seen_nvrm) + len(self.seen_sxid) >= _SEEN_LIMIT:
            return
        if tail.startswith("NVRM: "):
            self.seen_nvrm[tail[6:]] = known
        elif tail.startswith("SXid ("):
            self.seen_sxid[tail[6:]] = known

    def note(self, found: _Classified, prefix: str) -> None:
        """A line that adds to an event rather than being one: keep what it says."""
        role = found.role
        if role == "sxid_detail":
            self._sxid_detail(found, prefix)
        elif role == "prelude":
            self.prelude = {"pci": found.pci, "uuid": found.text}
        elif role == "board_serial":
            if self.prelude is not None:
                self.prelude["board_serial"] = found.text
        elif role == "gpu_serial":
            last = self.last_event
            if last is not None and last.get("pci") == found.pci:
                last.setdefault("board_serial", found.text)
        elif role == "detail":
            if self.last_event is not None:
                self._add_line(self.last_event, found.text)
        else:
            self._note_host(found, prefix)

    def _note_host(self, found: _Classified, prefix: str) -> None:
        role = found.role
        if role == "nouveau":
            if found.pci and len(self.nouveau) < MAX_HOST_RECORDS:
                self.nouveau[found.pci] = None
        elif role == "ghes_detail":
            if self.last_ghes is not None:
                for name, value in found.extras:  # the first value of each field is the record's
                    if self.last_ghes.get(name) is None:
                        self.last_ghes[name] = value
        elif role == "hung_task":
            self._hung_task(found, prefix)
        elif role == "host_error":
            self._host_error(found, prefix)

    def _hung_task(self, found: _Classified, prefix: str) -> None:
        if len(self.hung_tasks) >= MAX_HOST_RECORDS:
            return
        after = {pci: sorted(codes) for pci, codes in self.xid_codes_seen.items() if pci}
        self.hung_tasks.append(
            {
                "task": found.process,
                "pid": found.pid,
                "state": "D",  # the hung-task detector reports only uninterruptible (D) tasks
                "time": parse_time(prefix)[0],
                **dict(found.extras),
                "after_xids": after,
            }
        )

    def _host_error(self, found: _Classified, prefix: str) -> None:
        extras = dict(found.extras)
        key = (extras.get("source"), extras.get("severity"), extras.get("dimm"))
        known = self.host_keys.get(key) if extras.get("source") != "ghes" else None
        if known is not None:
            known["count"] += 1
            known["errors"] = known.get("errors", 0) + extras.get("errors", 0)
            known["last_time"] = parse_time(prefix)[0]
            return
        if len(self.host_errors) >= MAX_HOST_RECORDS:
            return
        time = parse_time(prefix)[0]
        record = {**extras, "text": found.text, "time": time, "count": 1, "last_time": time}
        self.host_errors.append(record)
        if extras.get("source") == "ghes":
            self.last_ghes = record
        else:
            self.host_keys[key] = record

    def repeat(self, event: dict[str, Any], prefix: str) -> None:
        """Another occurrence of a known event (its prelude and lines were kept at the first one)."""
        event["count"] += 1
        event["_last_prefix"] = prefix
        self.last_event = event
        if self.prelude is not None:
            self.drop_prelude_of(event)

    def drop_prelude_of(self, event: dict[str, Any]) -> None:
        if self.prelude is not None and self.prelude["pci"] == event["pci"]:
            self.prelude = None

    def _emit(self, found: _Classified, prefix: str, details: Sequence[str]) -> dict[str, Any] | None:
        key = found.key
        event = self.events.get(key)
        if event is not None:
            self.repeat(event, prefix)
            return event
        if found.kind == "fallen_off_bus" and found.pci is not None:
            xid79 = self.events.get(("xid", 79, found.pci, None, None, "GPU has fallen off the bus."))
            xid79 = xid79 or next((e for e in self.xid79 if e["pci"] == found.pci), None)
            if xid79 is not None:  # the driver's own words for the same event: one event
                self._merge_fallen(xid79, found.text)
                return None
        if len(self.events) >= MAX_DISTINCT_EVENTS:
            self.dropped_events += 1
            return None
        time, monotonic = parse_time(prefix)
        event = {
            "kind": found.kind,
            "code": found.code,
            "pci": found.pci,
            "time": time,
            "pid": found.pid,
            "process": found.process,
            "text": found.text,
        }
        event.update(found.extras)
        event.update(count=1, first_time=time, last_time=time, _last_prefix=None)
        if monotonic is not None and monotonic != time:
            event["monotonic"] = monotonic
        self._enrich(event, prefix, details)
        self.events[key] = event
        self.last_event = event
        if found.kind == "xid" and found.code is not None:
            self.xid_codes_seen.setdefault(found.pci, set()).add(found.code)
            if found.code == 79:
                self._absorb_fallen(event)
        return event

    def _merge_fallen(self, xid79: dict[str, Any], text: str) -> None:
        xid79["fallen_off_bus"] = True
        if text not in xid79.get("lines", ()):
            self._add_line(xid79, text)

    def _absorb_fallen(self, xid79: dict[str, Any]) -> None:
        """An Xid 79 after its GPU's fallen-off-the-bus block: the block joins the Xid event."""
        self.xid79.append(xid79)
        if xid79["pci"] is None:
            return
        for key, other in list(self.events.items()):
            if other["kind"] == "fallen_off_bus" and other["pci"] == xid79["pci"]:
                del self.events[key]
                self._merge_fallen(xid79, other["text"])

    def _enrich(self, event: dict[str, Any], prefix: str, details: Sequence[str]) -> None:
        kind = event["kind"]
        prelude = self.prelude
        if prelude is not None and kind in ("xid", "fallen_off_bus") and prelude["pci"] == event["pci"]:
            event["uuid"] = prelude["uuid"]
            if "board_serial" in prelude:
                event["board_serial"] = prelude["board_serial"]
            self.prelude = None
        if kind == "sxid":
            device = _NVSWITCH_DEVICE.search(prefix)
            if device is not None:
                event["device"] = device.group(1)
            self.sxid_last[(event["pci"], event["code"])] = event
        if kind == "pcie_aer" and details and "severity" not in event:
            for detail in details:
                bus_error = _PCIE_BUS_ERROR.search(detail)
                if bus_error is not None:
                    event["severity"] = bus_error.group("severity").strip().lower()
                    break
        if details:
            kept = event.setdefault("lines", [])
            kept.extend(details[: max(0, MAX_LINES_PER_EVENT - len(kept))])
        if event.get("driver_version"):
            self.driver_version = event["driver_version"]

    @staticmethod
    def _add_line(event: dict[str, Any], line: str) -> None:
        kept = event.setdefault("lines", [])
        if len(kept) < MAX_LINES_PER_EVENT:
            kept.append(line)

    def _sxid_detail(self, found: _Classified, prefix: str) -> None:
        owner = self.sxid_last.get((found.pci, found.code))
        if owner is not None:
            self._add_line(owner, found.text)
            return
        # A "Severity"/"Data" line whose report we did not see: keep it as its own event.
        self._emit(_Classified("event", "sxid", found.code, found.pci, text=found.text), prefix, ())

    def _bandwidth(self, found: _Classified) -> None:
        pci = found.pci
        if pci is None or pci in self.bandwidth or len(self.bandwidth) >= MAX_DISTINCT_EVENTS:
            return
        self.bandwidth[pci] = {"pci": pci, **dict(found.extras)}

    def _warn(self, text: str) -> None:
        if len(self.warnings) < MAX_WARNINGS:
            self.warnings.append(text)
        else:
            self.extra_warnings += 1

    def finish(self) -> KernelLogResult:
        self._flush()
        events = list(self.events.values())
        for event in events:
            last_prefix = event.pop("_last_prefix")
            if last_prefix is not None:
                event["last_time"] = parse_time(last_prefix)[0]
        warnings = list(self.warnings)
        if self.extra_warnings:
            warnings.append(f"{self.extra_warnings} more unreadable lines not listed")
        if self.dropped_events:
            warnings.append(f"{self.dropped_events} events beyond {MAX_DISTINCT_EVENTS} distinct ones not kept")
        if not self.saw_text:
            warnings.append("empty input: no kernel log lines")
        return KernelLogResult(
            events=events,
            warnings=warnings,
            driver_version=self.driver_version,
            pcie_bandwidth_limited=list(self.bandwidth.values()),
            lines_read=self.lines_read,
            host_errors=self.host_errors,
            hung_tasks=self.hung_tasks,
            nouveau_devices=sorted(self.nouveau),
        )


def parse_lines(lines: Iterable[str]) -> KernelLogResult:
    """Parse a kernel log line by line (an open file works); memory grows with distinct events only.

    The loop is the hot path of a 100 MB log: a line whose text after ``NVRM: `` / ``SXid (`` was seen
    before (an Xid burst) only bumps its event's count, and lines that cannot matter are skipped with
    substring tests; everything else goes to ``_Parser.feed``, which looks what it can up by text too.
    """
    parser = _Parser()
    stacks = DriverLockScan()
    links = LinkScan()
    in_stack = False
    nvrm_seen = parser.seen_nvrm.get
    sxid_seen = parser.seen_sxid.get
    pending: _Draft | None = None
    lines_read = 0
    saw_text = False
    for line in lines:
        lines_read += 1
        # A D-state task's header opens its stack; the frames after it are read only while it is open.
        if in_stack:
            in_stack = stacks.feed(line)
        if "state:D" in line or "blocked for more than" in line:
            in_stack = stacks.start(line)
        elif "Link " in line or "link status definitely" in line:
            links.feed(line, seconds_of(line))
        head, found, tail = line.partition("NVRM: ")
        if found:
            known = nvrm_seen(tail) if pending is None else None
        elif "Xid" in line:
            head, found, tail = line.partition("SXid (")
            known = sxid_seen(tail) if found and pending is None else None
        elif (
            pending is None
            and "AER: " not in line
            and "PCIe " not in line
            and "of memory" not in line
            and "EDAC " not in line
            and "Hardware Error]" not in line
            and "INFO: task " not in line
            and "nouveau " not in line
        ):
            # No message we read (every _ANCHOR alternative holds one of these substrings).
            if not saw_text and line and not line.isspace():
                saw_text = True
            continue
        else:
            known = None
        # A blank prefix makes the line a continuation of the one before: feed() decides.
        if known is not None and not head.isspace():
            if known.__class__ is dict:  # inlined parser.repeat(): this is the hottest line
                known["count"] += 1  # type: ignore[index]
                known["_last_prefix"] = head  # type: ignore[index]
                parser.last_event = known  # type: ignore[assignment]
                if parser.prelude is not None:
                    parser.drop_prelude_of(known)  # type: ignore[arg-type]
            else:
                parser.note(known, head)  # type: ignore[arg-type]
            continue
        parser.feed(line)
        pending = parser.pending
    parser.saw_text = parser.saw_text or saw_text
    parser.lines_read = lines_read
    result = parser.finish()
    result.driver_lock_waits = stacks.finish()
    result.nic_links = links.finish()
    return result


def seconds_of(prefix: str) -> float | None:
    """Seconds of a line's time, monotonic or wall clock, to measure spans within one log; None if unknown."""
    wall, monotonic = parse_time(prefix)
    return _seconds(monotonic) if monotonic else _seconds(wall)


def _seconds(text: str | None) -> float | None:
    if not text:
        return None
    try:
        return float(text)
    except ValueError:
        pass
    try:
        return datetime.fromisoformat(text).timestamp()
    except ValueError:
        return None


# The nvidia module is not installed for the running kernel: modprobe's own message (kmod, "Module %s not
# found in directory %s") and systemd-modules-load's ("Failed to find module '%s'"), in a syslog or a paste.
_MODULE_MISSING = re.compile(r"modprobe: FATAL: Module nvidia\S* not found|Failed to find module 'nvidia")
# The open kernel module refusing a GPU (kernel-open/nvidia/nv.c, "is not supported by open nvidia.ko
# because it does not include the required GPU System Processor"), on one line or over continuation lines.
_OPEN_MODULE_REFUSED = re.compile(r"not supported by open\s+(?:NVRM: )?nvidia\.ko")


def parse(text: str) -> KernelLogResult:
    """Parse a whole kernel log held in memory. Never raises on any text."""
    result = parse_lines(text.splitlines())
    result.driver_module_missing = "nvidia" in text and _MODULE_MISSING.search(text) is not None
    return result


def may_continue_report(line: str) -> bool:
    """Whether ``line`` may carry on a pending AER report (a detail line): only then does a line without
    a message leave the message before it pending; any other such line ends it."""
    return _AER_DETAIL.search(line) is not None


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
    """Codes without the sympathetic 43/45 on GPUs that logged another Xid; a 45 that names its
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
    wedged = sorted({pci for task in hung for pci, codes in (task.get("after_xids") or {}).items() if 45 in codes})
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
        "adapter_init_failed_gpus": _sorted_pcis(e["pci"] for e in init_failed),
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
    from nightowl.collectors.host.nic_links import most_in_window

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


def _driver_state_facts(events: list[dict[str, Any]], data: Mapping[str, Any]) -> dict[str, Any]:
    waits: list[dict[str, Any]] = data.get("driver_lock_waits") or []
    refused = [e for e in events if _OPEN_MODULE_REFUSED.search(_event_text(e))]
    refused_gpus = _sorted_pcis(e.get("pci") for e in refused)
    probe_failed = bool(_of_subkind(events, {"probe_failed", "no_device_initialized"}))
    return {
        "driver_deadlock": bool(waits),
        "driver_deadlock_tasks": sorted({str(w["task"]) for w in waits if w.get("task")}),
        "driver_deadlock_frames": sorted({frame for w in waits for frame in w.get("frames", ())}),
        "open_module_refused": bool(refused),
        "open_module_refused_gpus": refused_gpus,
        "open_module_probe_failed": bool(refused) and probe_failed,
        "driver_module_missing": bool(data.get("driver_module_missing")),
    }


def _event_text(event: Mapping[str, Any]) -> str:
    return " ".join([str(event.get("text") or ""), *(str(line) for line in event.get("lines") or ())])


def _remap_facts(xids: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "remap_reset_pending_gpus": _sorted_pcis(e["pci"] for e in xids if e.get("remap_status") == "reset-pending"),
        "remap_failed_gpus": _sorted_pcis(e["pci"] for e in xids if e.get("remap_status") == "failed"),
    }


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
        **_storm_facts(data),
        **_link_facts(data),
    }


_JOURNAL_BANNERS = ("-- No entries --", "-- Logs begin at", "-- Journal begins at", "-- Boot ")


def shows_nothing(text: str) -> bool:
    """A journal with nothing for this boot (``-- No entries --``, e.g. a container without the host's
    machine-id) or blank output: no kernel log was read, so fall back to dmesg and never call it clean."""
    return all(not line.strip() or line.strip().startswith(_JOURNAL_BANNERS) for line in text.splitlines())


# The facts `facts` returns (docs/reference.md#kinds); tests/collectors/test_declared_facts.py checks them.
PRODUCES = declare(
    ("events", "list", "every recognised event (Xid, SXid, OOM kill, PCIe AER, ...) with its line"),
    ("driver_version", "str | None", "NVIDIA driver version from the load line"),
    ("pcie_bandwidth_limited", "list", 'the kernel\'s "PCIe bandwidth limited" lines'),
    ("lines_read", "int", "lines of log read"),
    ("xid_codes", "list[int]", "distinct Xid codes seen"),
    ("sxid_codes", "list[int]", "distinct NVSwitch SXid codes seen"),
    ("xid_event_count", "int", "Xid lines seen"),
    ("xids_by_gpu", "dict", "Xid codes per GPU PCI address"),
    ("fallen_off_bus", "bool", "a GPU has fallen off the bus (Xid 79 or the driver's message)"),
    ("fallen_off_bus_gpus", "list[str]", "GPUs that fell off the bus"),
    ("reset_required", "bool", "the driver asked for a GPU reset (Xid 154 or similar)"),
    ("reset_required_gpus", "list[str]", "GPUs the driver asked to reset"),
    ("recovery_action", "str | None", "strictest recovery action the driver printed"),
    ("recovery_actions_by_gpu", "dict", "recovery action per GPU"),
    ("recovery_action_gpus", "list[str]", "GPUs with a recovery action"),
    ("catalog_action", "str", "strictest action NVIDIA's Xid catalog gives for the codes seen"),
    ("unknown_xid_codes", "list[int]", "Xid codes not in the catalog"),
    ("app_xid_repeating_gpus", "list[str]", "GPUs where an application Xid repeats"),
    ("nvlink_xid_codes", "list[int]", "NVLink-related Xid codes seen"),
    ("oom_kills", "int", "kernel OOM-killer kills"),
    ("pcie_aer_count", "int", "PCIe AER error lines"),
    ("pcie_bandwidth_limited_devices", "list[str]", "devices the kernel says are bandwidth limited"),
    ("primary_xids", "list[int]", "Xid codes that are causes, not sympathetic follow-ups"),
    ("xid_judgement", "dict", "NVIDIA's pairing rules applied to the Xids: action, reasons, GPUs"),
    ("host_errors", "list", "host-side errors (MCE, GHES, hung tasks) with their lines"),
    ("hung_tasks", "list", "hung-task reports with the task name"),
    ("nouveau_devices", "list", "devices bound to the nouveau driver"),
    ("pcie_aer_by_severity", "dict", "PCIe AER errors counted by severity"),
    ("pcie_aer_correctable_devices", "list", "devices with correctable AER errors"),
    ("pcie_aer_nonfatal_devices", "list", "devices with non-fatal AER errors"),
    ("pcie_aer_fatal_devices", "list", "devices with fatal AER errors"),
    ("pcie_aer_unrecovered_devices", "list", "devices whose AER error was not recovered"),
    ("host_memory_errors", "dict", "host memory (EDAC) errors by DIMM"),
    ("host_memory_uncorrected_dimms", "list", "DIMMs with uncorrected errors"),
    ("host_memory_corrected_dimms", "list", "DIMMs with corrected errors"),
    ("ghes_error_count", "int", "firmware (GHES) hardware error reports"),
    ("ghes_severities", "list", "severities of the GHES reports"),
    ("ghes_devices", "list", "devices the GHES reports name"),
    ("mce_logged", "int", "machine-check events logged"),
    ("hung_task_count", "int", "hung-task reports"),
    ("hung_task_names", "list", "names of the hung tasks"),
    ("hung_tasks_after_xid", "int", "hung-task reports after the first Xid"),
    ("wedged_driver", "bool", "the NVIDIA driver is wedged (stuck in a call)"),
    ("wedged_driver_gpus", "list", "GPUs of the wedged driver"),
    ("driver_lock_waits", "list", "tasks in D state waiting on a lock inside the NVIDIA driver, with the frames"),
    ("driver_module_missing", "bool", "modprobe or systemd-modules-load found no nvidia module for this kernel"),
    ("driver_deadlock", "bool", "a task is stuck in D state on a lock inside the NVIDIA driver"),
    ("driver_deadlock_tasks", "list[str]", "names of the tasks stuck on a driver lock"),
    ("driver_deadlock_frames", "list[str]", "the driver lock frames their stacks wait in"),
    ("open_module_refused", "bool", "the open kernel module refused a GPU (needs GSP, or unsupported)"),
    ("open_module_refused_gpus", "list[str]", "GPUs the open kernel module refused"),
    ("open_module_probe_failed", "bool", "the open module refused a GPU and the probe then failed"),
    ("nic_links", "list", "NIC ports whose link went down or up: downs, ups, down times, last state"),
    ("host_memory_ce_by_dimm", "list", "corrected host memory errors per DIMM: errors, reports, span, burst"),
    ("host_memory_ce_storm_dimms", "list[str]", "DIMMs past a corrected-error threshold (host_thresholds.csv)"),
    ("host_memory_ce_thresholds", "dict", "the corrected-error thresholds applied, with their sources"),
    ("nic_flapping_ports", "list[str]", "NIC ports past a link-flap threshold (host_thresholds.csv)"),
    ("nic_flapping_devices", "list[str]", "PCI addresses of the flapping ports, where the line names them"),
    ("nic_link_down_ports", "list[str]", "NIC ports whose last link change was down"),
    ("nic_link_thresholds", "dict", "the link-flap thresholds applied, with their sources"),
    ("driver_mismatch", "bool", "the kernel module and user-space driver versions differ"),
    ("driver_mismatch_versions", "list", "the two versions that differ"),
    ("driver_conflict", "bool", "another driver (nouveau) holds the GPU"),
    ("gpu_init_failed", "bool", "a GPU failed to initialise"),
    ("adapter_init_failed_gpus", "list", "GPUs whose adapter failed to initialise"),
    ("adapter_init_errors", "list", "the adapter initialisation error lines"),
    ("gsp_errors", "list", "GSP firmware errors"),
    ("gsp_error_count", "int", "GSP firmware error lines"),
    ("gpu_lost_gpus", "list", "GPUs the driver reports lost"),
    ("gpu_indexes_with_errors", "list", "GPU indexes named in error lines"),
    ("remap_reset_pending_gpus", "list", "GPUs whose row remap waits for a reset"),
    ("remap_failed_gpus", "list", "GPUs whose row remap failed"),
)


COLLECTOR = Collector(
    produces=PRODUCES,
    kind=KIND,
    commands=(
        # `since` (runbook parameter, e.g. "-2h" or "2024-06-01 10:00") limits evidence to recent events,
        # so a sweep does not re-report last month's Xid; the dmesg fallbacks cannot filter.
        ("journalctl", "-k", "-b", "--no-pager", "-o", "short-iso", "--since={since}"),
        ("journalctl", "-k", "-b", "--no-pager", "-o", "short-iso"),
        ("dmesg", "-T"),
        ("dmesg",),
        # Under kernel.dmesg_restrict=1 an unprivileged dmesg is refused: the one place nightowl asks
        # for sudo, non-interactive (-n) so it fails at once instead of waiting for a password.
        ("sudo", "-n", "--", "dmesg", "-T"),
        # No `cat /dev/kmsg` after these: util-linux dmesg already reads /dev/kmsg itself, without blocking
        # (O_NONBLOCK until EAGAIN), under the same permission (kernel.dmesg_restrict, CAP_SYSLOG), so it
        # would add nothing, and a plain read of /dev/kmsg waits for new records forever. A saved
        # /dev/kmsg dump still parses (`nightowl parse kernel-log`). See docs/reference.md#parse-output.
    ),
    parse=parse,
    facts=facts,
    timeout=20.0,
    invasive=False,
    shows_nothing=shows_nothing,
    description="kernel log of the current boot: NVIDIA Xid/SXid events, GPUs off the bus, PCIe AER, OOM kills",
)


# Every message ``_ANCHOR`` finds holds one of these (the substring tests of parse_lines' hot loop), and
# ``in`` finds them at memory speed: text with none of them holds no event.
MESSAGE_HINTS = ("NVRM: ", "Xid", "AER: ", "PCIe ", "of memory", "EDAC ", "Hardware Error]", "INFO: task ", "nouveau ")


def may_hold_message(text: str) -> bool:
    """False when ``text`` (a line, or many) holds no message this parser reads; cheap (``in`` tests)."""
    return any(hint in text for hint in MESSAGE_HINTS)


def message_start(text: str) -> int:
    """Where the first message this parser reads (``NVRM: ``, ``SXid (``, ``AER: ``, ``EDAC `` ...) starts in
    ``text`` (a line, or many), or -1: text without one holds no event. Followers (``nightowl watch``) skip
    quiet text with it, and key what they learnt of a line by what follows its time stamp."""
    match = _ANCHOR.search(text)
    return -1 if match is None else match.start()
