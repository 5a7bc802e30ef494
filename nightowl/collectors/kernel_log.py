"""The kernel log: NVIDIA Xid/SXid events, GPUs off the bus, PCIe AER and OOM kills.

Reads every way the kernel log reaches a person: bare ``NVRM:`` lines, ``dmesg`` (monotonic
``[ 123.456]``), ``dmesg -T``, ``dmesg --time-format iso`` (with or without ``-x`` facility columns),
syslog and journald (``short`` in any locale, ``short-iso``), Talos ``talosctl dmesg``, and the
k8s-device-plugin's ``XidCriticalError`` line. A line is recognised by its message (``NVRM:``,
``SXid (``, ``AER:`` ...), never by its timestamp, so month names in any language are fine.

The parser streams (``parse_lines``) and keeps one event per distinct message: a burst of identical
lines (same kind, code, GPU, pid, process and text) becomes one event with ``count``, ``first_time``
and ``last_time``, so memory grows with distinct events, not with lines.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from nightowl.collectors import xid_catalog
from nightowl.collectors.base import Collector, to_jsonable
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
    """CONTRACT section 3 ``kernel-log``. Events are dicts: the contract keys plus per-kind extras."""

    kind: str = KIND
    events: list[dict[str, Any]] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    driver_version: str | None = None
    pcie_bandwidth_limited: list[dict[str, Any]] = field(default_factory=list)
    lines_read: int = 0

    def to_jsonable(self) -> dict[str, Any]:
        jsonable: dict[str, Any] = to_jsonable(self)
        return jsonable


# --- where a message starts -------------------------------------------------------------------
# Messages we read, found anywhere in a line; what precedes is the timestamp/host/tag prefix.
# (Plain literals: an optional group here makes every search several times slower.)
_ANCHOR = re.compile(
    r"NVRM: |SXid \(|Xid \(|XidCriticalError|Out of memory|out of memory|AER: |PCIe Bus Error"
    r"|available PCIe bandwidth"
)
# "pcieport 0000:00:02.0: " before an AER/bandwidth message: part of the message, not of the prefix.
_DEVICE_TAIL = re.compile(r"(\S+ [0-9a-fA-F]{4,8}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7]:\s)")
_OOM_CGROUP = re.compile(r"Memory cgroup $")
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
_BLOCK_OPENER = re.compile(r"The NVIDIA GPU \S+\s*$|crash dump has been created")
_BLOCK_CONTINUATION = re.compile(
    r"\(PCI ID: |installed in this system|fallen off the bus and is not|nvidia-bug-report\.sh as root"
    r"|the NVIDIA kernel module is unloaded"
)
# other_nvrm sub-kinds, first match wins (sources: corpus samples named in fixtures/corpus/gpu/INDEX.md).
_OTHER_SUBKINDS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("driver_load", re.compile(r"^loading NVIDIA ")),
    ("rm_init_adapter_failed", re.compile(r"RmInitAdapter failed|rm_init_adapter failed", re.I)),
    ("probe_failed", re.compile(r"probe routine failed")),
    ("gsp_timeout", re.compile(r"GSP Timeout|waiting for RPC response", re.I)),
    ("gsp_rpc_failed", re.compile(r"\w+_GSP: .*failed")),
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

    @property
    def key(self) -> tuple[Any, ...]:
        return (self.kind, self.code, self.pci, self.pid, self.process, self.text)


_IGNORE = _Classified("ignore")


@dataclass
class _Draft:
    """A message that more lines may continue (a block opener or an AER report)."""

    prefix: str
    message: str
    tail: str = ""  # the line from the message on, as read (the burst fast path's key)
    continuation: list[str] = field(default_factory=list)
    details: list[str] = field(default_factory=list)  # AER detail lines (kept as `lines`)
    is_aer: bool = False


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


def parse_time(prefix: str) -> tuple[str | None, str | None]:
    """(time, monotonic) from the text before a message.

    ``time`` is ISO 8601 when the prefix holds an absolute, parseable time, else the time as written
    (a yearless syslog time, a dmesg -T time in another language, monotonic seconds), else None.
    ``monotonic`` is the ``[ 123.456]`` seconds when a wall-clock time is also present (syslog).
    """
    wall: str | None = None
    monotonic: str | None = None
    bracket = _BRACKET.search(prefix)
    if bracket is not None and _MONOTONIC.fullmatch(bracket.group(1)):
        monotonic = bracket.group(1)
    syslog = _SYSLOG_TIME.match(prefix)
    iso = _ISO_TIME.search(prefix)
    if syslog is not None and (iso is None or iso.start() > syslog.end()):
        wall = syslog.group(1)
    elif iso is not None:
        wall = _iso(*iso.groups()) or iso.group(0)
    elif bracket is not None and monotonic is None and bracket.group(1):
        wall = _dmesg_t(bracket.group(1)) or bracket.group(1)
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
    caused_by = _CAUSED_BY.search(text)
    if caused_by is not None:
        extras.append(("caused_by_xid", int(caused_by.group(1))))
    return _Classified("event", "xid", code, normalize_pci(match.group("pci")), pid, process, text, tuple(extras))


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
        return _Classified("event", "fallen_off_bus", pci=find_pci(body), text=body)
    if _RESET_REQUIRED.search(body):
        return _Classified("event", "gpu_reset_required", pci=find_pci(body), text=body)
    extras: list[tuple[str, Any]] = []
    for subkind, pattern in _OTHER_SUBKINDS:
        if pattern.search(body):
            extras.append(("subkind", subkind))
            break
    version = _DRIVER_VERSION.match(body)
    if version is not None:
        extras.append(("driver_version", version.group("version")))
    return _Classified("event", "other_nvrm", pci=find_pci(body), text=body, extras=tuple(extras))


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


def classify(message: str) -> _Classified:
    """What a message (from its anchor to the end, continuation lines joined) is. Pure."""
    if message.startswith("NVRM: "):
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
    if "ut of memory" in message:
        oom = _OOM_KILL.search(message)
        if oom is None:
            return _IGNORE
        return _Classified(
            "event", "oom_kill", pid=int(oom.group("pid")), process=oom.group("name"), text=message.strip()
        )
    if "available PCIe bandwidth" in message:
        return _Classified("bandwidth", text=message.strip()) if _BANDWIDTH.search(message) else _IGNORE
    return _classify_aer(message.strip())


# --- the streaming parser -----------------------------------------------------------------------------
class _Parser:
    """Line-by-line state. Most messages are emitted at once; only a message that more lines may
    continue (a block opener, an AER report) waits in ``pending`` for the next line."""

    def __init__(self) -> None:
        self.events: dict[tuple[Any, ...], dict[str, Any]] = {}
        # A line's text from the message on -> its event, or what else it was (prelude, serial).
        # parse_lines looks repeats up here instead of parsing them again.
        self.seen: dict[str, dict[str, Any] | _Classified] = {}
        self.pending: _Draft | None = None
        self.cache: dict[str, _Classified] = {}
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

    def feed(self, line: str) -> None:
        """The general path for one line (``parse_lines`` short-cuts repeats of known messages)."""
        if not self.saw_text and line.strip():
            self.saw_text = True
        match = _ANCHOR.search(line)
        if match is None:
            self._feed_plain(line)
            return
        start = match.start()
        prefix, message = line[:start], line[start:].rstrip()
        if not message.startswith(("NVRM", "SXid", "Xid")):
            device = _DEVICE_TAIL.search(prefix) or _OOM_CGROUP.search(prefix)
            if device is not None:
                prefix, message = prefix[: device.start()], prefix[device.start() :] + message
        if self._continues(prefix, message):
            return
        self._flush()
        is_aer = ("AER: " in message or "PCIe Bus Error" in message) and not message.startswith("NVRM")
        draft = _Draft(prefix, message, line[start:], is_aer=is_aer)
        if is_aer or (message.startswith("NVRM: ") and _BLOCK_OPENER.search(message)):
            self.pending = draft
        else:
            self._handle(draft, cacheable=True)

    def _feed_plain(self, line: str) -> None:
        """A line without any message we read: an AER detail line, or the end of a pending message."""
        pending = self.pending
        if pending is None:
            return
        if pending.is_aer and _AER_DETAIL.search(line):
            device = _DEVICE_TAIL.search(line)
            detail = line[device.start() :] if device else line
            if len(pending.details) < MAX_LINES_PER_EVENT:
                pending.details.append(detail.strip())
            return
        self._flush()

    def _continues(self, prefix: str, message: str) -> bool:
        """Whether ``message`` continues the message before it; if so it is recorded there."""
        pending = self.pending
        if message.startswith("NVRM: ") and not message.startswith("NVRM: Xid"):
            body = message[6:].strip()
            indented = bool(prefix) and prefix.isspace()  # continuation lines carry no timestamp
            if pending is not None:
                opened = _BLOCK_CONTINUATION.match(body) is not None and _BLOCK_OPENER.search(pending.message)
                if indented or opened:
                    pending.continuation.append(body)
                    return True
            elif indented and self.last_event is not None:
                self._add_lines(self.last_event, [body])
                return True
        if pending is not None and pending.is_aer and _AER_DETAIL.search(message) and not _AER_RECEIVED.search(message):
            if len(pending.details) < MAX_LINES_PER_EVENT:
                pending.details.append(message.strip())
            return True
        return False

    def _flush(self) -> None:
        draft, self.pending = self.pending, None
        if draft is not None:
            self._handle(draft, cacheable=False)

    def _handle(self, draft: _Draft, cacheable: bool) -> None:
        message = draft.message
        if draft.continuation:
            message = " ".join([message, *draft.continuation])
        found = self.cache.get(message)
        if found is None:
            found = classify(message)
            if len(self.cache) >= _CACHE_LIMIT:
                self.cache.clear()
            self.cache[message] = found
        role = found.role
        remember = cacheable and draft.tail.startswith(("NVRM: ", "SXid (")) and len(self.seen) < _SEEN_LIMIT
        if role == "event":
            event = self._emit(found, draft)
            if remember and event is not None and not draft.details:
                self.seen[draft.tail] = event
        elif role in ("prelude", "board_serial", "gpu_serial", "sxid_detail"):
            self.note(found, draft.prefix)
            if remember:
                self.seen[draft.tail] = found
        elif role == "bandwidth":
            self._bandwidth(found.text)
        elif role == "unreadable":
            self._warn(f"unreadable Xid/SXid line: {message[:200]}")

    def note(self, found: _Classified, prefix: str) -> None:
        """A line that adds to an event rather than being one: keep what it says."""
        if found.role == "sxid_detail":
            self._sxid_detail(found, prefix)
        elif found.role == "prelude":
            self.prelude = {"pci": found.pci, "uuid": found.text}
        elif found.role == "board_serial":
            if self.prelude is not None:
                self.prelude["board_serial"] = found.text
        elif found.role == "gpu_serial":
            last = self.last_event
            if last is not None and last.get("pci") == found.pci:
                last.setdefault("board_serial", found.text)

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

    def _emit(self, found: _Classified, draft: _Draft) -> dict[str, Any] | None:
        key = found.key
        event = self.events.get(key)
        if event is not None:
            self.repeat(event, draft.prefix)
            return event
        if len(self.events) >= MAX_DISTINCT_EVENTS:
            self.dropped_events += 1
            return None
        time, monotonic = parse_time(draft.prefix)
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
        self._enrich(event, draft)
        self.events[key] = event
        self.last_event = event
        return event

    def _enrich(self, event: dict[str, Any], draft: _Draft) -> None:
        kind = event["kind"]
        prelude = self.prelude
        if prelude is not None and kind in ("xid", "fallen_off_bus") and prelude["pci"] == event["pci"]:
            event["uuid"] = prelude["uuid"]
            if "board_serial" in prelude:
                event["board_serial"] = prelude["board_serial"]
            self.prelude = None
        if kind == "sxid":
            device = _NVSWITCH_DEVICE.search(draft.prefix)
            if device is not None:
                event["device"] = device.group(1)
            self.sxid_last[(event["pci"], event["code"])] = event
        if kind == "pcie_aer" and draft.details and "severity" not in event:
            for detail in draft.details:
                bus_error = _PCIE_BUS_ERROR.search(detail)
                if bus_error is not None:
                    event["severity"] = bus_error.group("severity").strip().lower()
                    break
        self._add_lines(event, draft.details)
        if event.get("driver_version"):
            self.driver_version = event["driver_version"]

    @staticmethod
    def _add_lines(event: dict[str, Any], lines: list[str]) -> None:
        if not lines:
            return
        kept = event.setdefault("lines", [])
        kept.extend(lines[: max(0, MAX_LINES_PER_EVENT - len(kept))])

    def _sxid_detail(self, found: _Classified, prefix: str) -> None:
        owner = self.sxid_last.get((found.pci, found.code))
        if owner is not None:
            self._add_lines(owner, [found.text])
            return
        # A "Severity"/"Data" line whose report we did not see: keep it as its own event.
        self._emit(_Classified("event", "sxid", found.code, found.pci, text=found.text), _Draft(prefix, found.text))

    def _bandwidth(self, message: str) -> None:
        match = _BANDWIDTH.search(message)
        if match is None:
            return
        pci = normalize_pci(match.group("pci"))
        if pci is None or pci in self.bandwidth or len(self.bandwidth) >= MAX_DISTINCT_EVENTS:
            return
        self.bandwidth[pci] = {
            "pci": pci,
            "available": match.group("available"),
            "limited_by": match.group("limited_by"),
            "limiting_pci": normalize_pci(match.group("at")),
            "capable": match.group("capable"),
        }

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
        )


def parse_lines(lines: Iterable[str]) -> KernelLogResult:
    """Parse a kernel log line by line (an open file works); memory grows with distinct events only.

    The loop is the hot path of a 100 MB log: lines that cannot matter are skipped with substring
    tests, and a repeat of a message already seen (an Xid burst) only bumps its event's count.
    """
    parser = _Parser()
    seen = parser.seen
    lines_read = 0
    saw_text = False
    for line in lines:
        lines_read += 1
        if "NVRM" in line or "Xid" in line:
            pos = line.find("NVRM: ")
            if pos < 0:
                pos = line.find("SXid (")
            if pos >= 0 and parser.pending is None and (line[0] not in " \t" or not line[:pos].isspace()):
                known = seen.get(line[pos:])
                if known is not None:
                    if known.__class__ is dict:  # inlined parser.repeat(): this is the hottest line
                        known["count"] += 1  # type: ignore[index]
                        known["_last_prefix"] = line[:pos]  # type: ignore[index]
                        parser.last_event = known  # type: ignore[assignment]
                        if parser.prelude is not None:
                            parser.drop_prelude_of(known)  # type: ignore[arg-type]
                    else:
                        parser.note(known, line[:pos])  # type: ignore[arg-type]
                    continue
        elif parser.pending is None and "AER" not in line and "PCIe" not in line and "of memory" not in line:
            if not saw_text and not line.isspace() and line:
                saw_text = True
            continue
        parser.feed(line)
    parser.saw_text = parser.saw_text or saw_text
    parser.lines_read = lines_read
    return parser.finish()


def parse(text: str) -> KernelLogResult:
    """Parse a whole kernel log held in memory. Never raises on any text."""
    return parse_lines(text.splitlines())


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
    """GPUs where RESTART_APP Xids (13, 31, ...) hit at least two different processes."""
    owners: dict[str, set[Any]] = {}
    for event in xids:
        entry = xid_catalog.lookup(event["code"])
        if not event["pci"] or entry is None or entry.immediate_action != "RESTART_APP":
            continue
        owner = event["pid"] if event["pid"] is not None else event["process"]
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
    }


COLLECTOR = Collector(
    kind=KIND,
    commands=(
        # `since` (runbook parameter, e.g. "-2h" or "2024-06-01 10:00") limits evidence to recent events,
        # so a sweep does not re-report last month's Xid; the dmesg fallbacks cannot filter.
        ("journalctl", "-k", "-b", "--no-pager", "-o", "short-iso", "--since={since}"),
        ("journalctl", "-k", "-b", "--no-pager", "-o", "short-iso"),
        ("dmesg", "-T"),
        ("dmesg",),
    ),
    parse=parse,
    facts=facts,
    timeout=20.0,
    invasive=False,
    sudo=False,
    description="kernel log of the current boot: NVIDIA Xid/SXid events, GPUs off the bus, PCIe AER, OOM kills",
)
