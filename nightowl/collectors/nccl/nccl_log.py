"""NCCL_DEBUG logs and PyTorch ProcessGroupNCCL lines (docs/reference.md#parse-output, ``nccl-log``).

One parser for everything a distributed job prints about its communicators: NCCL's own
``host:pid:tid [dev] NCCL INFO|WARN`` lines (NCCL 2.2 to 2.30 formats), PyTorch watchdog and
DistBackendError lines, of one or many ranks, of one or many files concatenated, with launcher
prefixes (``[1,0]<stdout>:``, ``[rank3]:``, ``trainer/0 [0]:``, Ray's ``(Worker pid=N)``) removed.

Line formats are from NVIDIA/nccl @v2.30.7 (init.cc, transport/*.cc, net_ib) and from real logs
(fixtures/corpus/nccl/INDEX.md); see docs/sources.md#nccl-logs and #pytorch-nccl.
This module reads the NCCL lines and builds the result; the PyTorch ProcessGroupNCCL lines are
read by ``torch_pg``.
"""

from __future__ import annotations

import bisect
import functools
import re
from dataclasses import dataclass, field
from typing import Any

from nightowl import knowledge
from nightowl.collectors.base import Collector, registered, to_jsonable
from nightowl.collectors.nccl.nccl_log_patterns import (
    ASYNC_EVENT,
    BOOTSTRAP_USING,
    CAUSE_PATTERNS,
    CHANNEL_VIA,
    COMM_FIELDS,
    COMM_LINE,
    CONNECTED_GDR,
    ENV_SETTING,
    ERA_CAUSE_PATTERNS,
    ERA_WRAPPER_PATTERNS,
    HCA_GDR,
    IB_COMPLETION,
    IB_DEVICE,
    IB_NO_DEVICE,
    IB_SIDEBAND,
    IB_USING,
    IBV_SETUP_CALL,
    IBV_WC_STATUS,
    INIT_CHAIN,
    INIT_COMPLETE,
    INTERFACE,
    LEGACY_NET_USING,
    LINE_PREFIXES,
    MAX_ITEMS,
    NCCL_BARE_LINE,
    NCCL_LINE,
    NET_FILE,
    NET_PLUGIN_LOADED,
    NET_TAG,
    OFI_PLUGIN,
    P2P_PLUGIN,
    RETURN_CHAIN,
    SOCKET_USING,
    TRANSPORTS,
    USING_NETWORK,
    VERSION,
    WRAPPER_PATTERNS,
)

# WatchdogTimeout, WorkProgress, DistBackendError and collective_mismatch are also imported from here.
from nightowl.collectors.nccl.torch_pg import (
    DistBackendError,
    WatchdogTimeout,
    WorkProgress,
    clip_text,
    collective_mismatch,
    int_or_none,
    read_dist_backend_errors,
    read_fr_dump_ranks,
    read_progress,
    read_watchdogs,
)
from nightowl.collectors.pci import normalize_pci

KIND = "nccl-log"


# --------------------------------------------------------------------------------------------
# Result types
# --------------------------------------------------------------------------------------------


@dataclass
class RankInfo:
    rank: int
    nranks: int
    host: str | None
    pid: int | None
    cuda_dev: int | None
    nvml_dev: int | None
    bus_id: str | None
    comm_id: str | None
    init_complete: bool = False


@dataclass
class Interface:
    name: str
    address: str | None
    source: str  # bootstrap | socket | ib_oob | legacy


@dataclass
class IbDevice:
    name: str
    port: int
    link_layer: str  # IB | RoCE


@dataclass
class IbCompletionError:
    status: int | None
    status_name: str | None
    vendor_err: int | None
    opcode: int | None
    peer: str | None
    hca: str | None
    host: str | None


@dataclass
class NcclError:
    kind: str
    text: str
    host: str | None = None
    rank: int | None = None


@dataclass
class NcclLogResult:
    kind: str = KIND
    nranks: int | None = None
    init_complete_ranks: list[int] = field(default_factory=list)
    network: str | None = None
    transports: list[str] = field(default_factory=list)
    interfaces: list[str] = field(default_factory=list)
    warnings_nccl: list[str] = field(default_factory=list)
    watchdog_timeouts: list[WatchdogTimeout] = field(default_factory=list)
    version: str | None = None
    networks: list[str] = field(default_factory=list)
    net_plugin: str | None = None
    ranks: list[RankInfo] = field(default_factory=list)
    interface_details: list[Interface] = field(default_factory=list)
    ib_devices: list[IbDevice] = field(default_factory=list)
    ib_completion_errors: list[IbCompletionError] = field(default_factory=list)
    errors: list[NcclError] = field(default_factory=list)
    collective_mismatch: bool | None = None
    progress: list[WorkProgress] = field(default_factory=list)
    last_enqueued: dict[int, int] = field(default_factory=dict)
    last_completed: dict[int, int] = field(default_factory=dict)
    dist_backend_errors: list[DistBackendError] = field(default_factory=list)
    fr_dump_ranks: list[int] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    # new keys (issue 13)
    network_source: str | None = None  # using-network | transports | ib-devices | socket | plugin | net-lines
    gdr: bool | None = None  # "Connected all rings, use ring PXN 0 GDR 0": GPUDirect RDMA off
    ib_async_events: list[str] = field(default_factory=list)  # "port error", "local catastrophic error" ...
    failed_in: list[str] = field(default_factory=list)  # bootstrap / init / socket: where an error chain passed


# --------------------------------------------------------------------------------------------
# Lines
# --------------------------------------------------------------------------------------------


@dataclass
class Line:
    text: str
    rank_hint: int | None


@dataclass
class NcclLine:
    host: str | None  # None: no "host:pid:tid" in front (or an empty host name)
    pid: int | None
    dev: int | None
    level: str
    msg: str


def _strip_prefixes(raw: str) -> Line:
    text, rank_hint = raw, None
    changed = True
    while changed and text:
        changed = False
        for _name, pattern in LINE_PREFIXES:
            match = pattern.match(text)
            if match and match.end() > 0:
                if "rank" in pattern.groupindex and match.group("rank") is not None:
                    rank_hint = int(match.group("rank"))
                text = text[match.end() :]
                changed = True
    return Line(text.rstrip(), rank_hint)


def _lines(text: str) -> list[Line]:
    cleaned = text.replace("\x00", "").replace("\r\n", "\n").replace("\r", "\n")
    lines = [_strip_prefixes(raw) for raw in cleaned.split("\n")]
    for line in lines:
        if " | " in line.text:
            line.text = _undouble(line.text)
    return lines


def _nccl_line(text: str) -> NcclLine | None:
    match = NCCL_LINE.search(text)
    if match is None:
        return _bare_nccl_line(text)
    return NcclLine(
        host=match.group("host") or None,
        pid=int(match.group("pid")),
        dev=int(match.group("dev")),
        level=match.group("level"),
        msg=_undouble((match.group("msg") or "").strip()),
    )


def _bare_nccl_line(text: str) -> NcclLine | None:
    """A line without "host:pid:tid": it needs the NCCL tag, or (NCCL <= 2.4) a source file:line before WARN."""
    if "INFO" not in text and "WARN" not in text and "ABORT" not in text:
        return None
    match = NCCL_BARE_LINE.match(text)
    if match is None or not (match.group("tag") or (match.group("src") and match.group("level") == "WARN")):
        return None
    dev = match.group("dev")
    return NcclLine(None, None, int(dev) if dev else None, match.group("level"), (match.group("msg") or "").strip())


def _undouble(msg: str) -> str:
    """CloudWatch pastes repeat a message after " | " with the line's own prefix: keep it once."""
    head, bar, tail = msg.partition(" | ")
    if bar and tail.endswith(head):
        return head
    return msg


# --------------------------------------------------------------------------------------------
# NCCL lines
# --------------------------------------------------------------------------------------------


def normalize_transport(via: str) -> str:
    """``P2P/CUMEM/read`` -> ``P2P/CUMEM``, ``NET/IB/3/GDRDMA`` -> ``NET/IB/GDRDMA``, ..."""
    for pattern, template in TRANSPORTS:
        match = pattern.match(via)
        if match:
            values = {k: (v or "") for k, v in match.groupdict().items()}
            return template.format(**values)
    return via.split()[0] if via.split() else via


def nccl_bus_id(value: str) -> str | None:
    """NCCL prints busId as the hex of the address digits (``1b000`` = ``0000:1b:00.0``)."""
    digits = value.lower().zfill(9)
    if len(digits) > 13:
        return None
    domain, bus, device, function = digits[:-5], digits[-5:-3], digits[-3:-1], digits[-1]
    return normalize_pci(f"{domain[-8:]}:{bus}:{device}.{int(function, 16) & 7}")


class _Builder:
    """Accumulates facts while the lines go by; ``finish`` derives the rest."""

    def __init__(self) -> None:
        self.result = NcclLogResult()
        self.rank_index: dict[tuple[str | None, int | None, str, int], RankInfo] = {}
        self.transports: set[str] = set()
        self.ib_unavailable: str | None = None
        self.socket_line: int | None = None
        self.errors: list[tuple[int, NcclError]] = []
        self.error_keys: set[tuple[str, str, str | None]] = set()
        self.warn_texts: set[str] = set()
        self.dropped_errors = 0
        self.plugin_network: str | None = None
        self.net_tags: set[str] = set()  # "NET/IB : ..." warnings and infos: the net that printed them

    # -- NCCL INFO/WARN ---------------------------------------------------------------------
    def nccl(self, index: int, line: NcclLine) -> None:
        msg = line.msg
        tag = NET_TAG.match(msg)
        if tag:
            self.net_tags.add(tag.group("net"))
        through = NET_FILE.match(msg)
        if through:
            self.net_tags.add({"socket": "Socket", "ib": "IB"}[through.group("net")])
        if line.level == "WARN":
            if msg and msg not in self.warn_texts and len(self.warn_texts) < MAX_ITEMS:
                self.warn_texts.add(msg)
                self.result.warnings_nccl.append(msg)
            return
        if RETURN_CHAIN.match(msg):
            chain = INIT_CHAIN.match(msg)
            if chain and chain.group("code") != "0" and chain.group("file") not in self.result.failed_in:
                self.result.failed_in.append(chain.group("file"))
            return
        gdr = CONNECTED_GDR.search(msg)
        if gdr:
            self.result.gdr = gdr.group("gdr") == "1" or bool(self.result.gdr)
            return
        hca_gdr = HCA_GDR.search(msg)
        if hca_gdr:
            self.result.gdr = hca_gdr.group("state") == "Enabled" or bool(self.result.gdr)
            return
        plugin = P2P_PLUGIN.match(msg)
        if plugin:
            self.plugin_network = self.plugin_network or plugin.group("name")
            return
        if OFI_PLUGIN.match(msg):
            self.plugin_network = self.plugin_network or "AWS Libfabric"
        env = ENV_SETTING.match(msg)
        if env:
            self.result.env[env.group("name")] = env.group("value")
            if env.group("name") == "NCCL_IB_DISABLE" and env.group("value") == "1":
                self.ib_unavailable = self.ib_unavailable or "NCCL_IB_DISABLE=1"
            return
        for handler in (self._network, self._ib, self._interfaces, self._channel, self._comm):
            if handler(index, line):
                return

    def _network(self, index: int, line: NcclLine) -> bool:
        match = USING_NETWORK.match(line.msg)
        if match:
            network = match.group("network")
            if network not in self.result.networks:
                self.result.networks.append(network)
            if network == "Socket" and self.socket_line is None:
                self.socket_line = index
            return True
        plugin = NET_PLUGIN_LOADED.search(line.msg)
        if plugin:
            self.result.net_plugin = plugin.group("name")
            return True
        if IB_NO_DEVICE.search(line.msg):
            self.ib_unavailable = self.ib_unavailable or "NET/IB : No device found"
            return True
        return False

    def _ib(self, index: int, line: NcclLine) -> bool:
        match = IB_USING.match(line.msg)
        if match:
            for dev in IB_DEVICE.finditer(match.group("devices")):
                device = IbDevice(dev.group("name"), int(dev.group("port")), dev.group("link"))
                if device not in self.result.ib_devices:
                    self.result.ib_devices.append(device)
            if match.group("oob"):
                self._add_interfaces(match.group("oob"), "ib_oob")
            return True
        sideband = IB_SIDEBAND.match(line.msg)
        if sideband:
            self._add_interface(Interface(sideband.group("name"), None, "ib_oob"))
            return True
        return False

    def _interfaces(self, index: int, line: NcclLine) -> bool:
        for pattern, source in (
            (BOOTSTRAP_USING, "bootstrap"),
            (SOCKET_USING, "socket"),
            (LEGACY_NET_USING, "legacy"),
        ):
            match = pattern.match(line.msg)
            if match:
                self._add_interfaces(match.group("list"), source)
                return True
        return False

    def _add_interfaces(self, listing: str, source: str) -> None:
        for match in INTERFACE.finditer(listing):
            self._add_interface(Interface(match.group("name"), match.group("address"), source))

    def _add_interface(self, interface: Interface) -> None:
        if interface not in self.result.interface_details:
            self.result.interface_details.append(interface)
        if interface.name not in self.result.interfaces:
            self.result.interfaces.append(interface.name)

    def _channel(self, index: int, line: NcclLine) -> bool:
        match = CHANNEL_VIA.match(line.msg)
        if match is None:
            return False
        transport = normalize_transport(match.group("via"))
        self.transports.add(transport)
        if transport == "NET/Socket" and self.socket_line is None:
            self.socket_line = index
        return True

    def _comm(self, index: int, line: NcclLine) -> bool:
        match = COMM_LINE.search(line.msg)
        if match is None:
            return False
        rest = match.group("rest")
        found = {name: pattern.search(rest) for name, pattern in COMM_FIELDS.items()}
        rank, nranks = int(match.group("rank")), int(match.group("nranks"))
        key = (line.host, line.pid, match.group("ptr"), rank)
        info = self.rank_index.get(key)
        if info is None:
            info = RankInfo(rank, nranks, line.host, line.pid, None, None, None, None)
            self.rank_index[key] = info
            self.result.ranks.append(info)
        if found["cuda_dev"]:
            info.cuda_dev = int(found["cuda_dev"].group(1))
        if found["nvml_dev"]:
            info.nvml_dev = int(found["nvml_dev"].group(1))
        if found["bus_id"]:
            info.bus_id = nccl_bus_id(found["bus_id"].group(1))
        if found["comm_id"]:
            info.comm_id = found["comm_id"].group(1)
        if INIT_COMPLETE.search(rest):
            info.init_complete = True
        return True

    # -- any line -----------------------------------------------------------------------------
    def any_line(self, index: int, line: Line, nccl: NcclLine | None) -> None:
        text = nccl.msg if nccl else line.text
        if self.result.version is None:
            version = VERSION.search(line.text)
            if version:
                self.result.version = version.group("version")
        if "Got completion" in text:
            self._ib_completion(text, nccl.host if nccl else None)
        if nccl is not None and nccl.level != "WARN" and RETURN_CHAIN.match(nccl.msg):
            return
        if nccl is not None and nccl.level == "WARN" and _benign(text):
            return  # a warning that reports no failure (an IB subnet event: knowledge/nccl_benign_warnings.csv)
        self._classify(index, text, nccl.host if nccl else None, line.rank_hint)

    def _ib_completion(self, text: str, host: str | None) -> None:
        match = IB_COMPLETION.search(text)
        if match is None:
            self.result.warnings.append(f"unreadable IB completion error: {clip_text(text)}")
            return
        status = int_or_none(match.group("error") or match.group("status"))
        name = IBV_WC_STATUS[status] if status is not None and 0 <= status < len(IBV_WC_STATUS) else None
        self.result.ib_completion_errors.append(
            IbCompletionError(
                status=status,
                status_name=f"IBV_WC_{name}" if name else None,
                vendor_err=int_or_none(match.group("vendor")),
                opcode=int_or_none(match.group("opcode")),
                peer=re.sub(r"<\d+>$", "", match.group("peer")) if match.group("peer") else None,
                hca=match.group("hca"),
                host=host,
            )
        )

    def _classify(self, index: int, text: str, host: str | None, rank: int | None) -> None:
        for table, era_table in ((CAUSE_PATTERNS, ERA_CAUSE_PATTERNS), (WRAPPER_PATTERNS, ERA_WRAPPER_PATTERNS)):
            for kind, pattern in (*table, *era_table):
                if pattern.search(text):
                    self.add_error(index, NcclError(kind, clip_text(text), host, rank))
                    if kind == "ibverbs_missing":
                        self.ib_unavailable = self.ib_unavailable or "libibverbs missing"
                    if kind == "ib_async_event":
                        self._async_event(text)
                    break

    def _async_event(self, text: str) -> None:
        match = ASYNC_EVENT.search(text)
        events = self.result.ib_async_events
        if match and match.group("event") not in events and len(events) < MAX_ITEMS:
            events.append(match.group("event"))

    def add_error(self, index: int, error: NcclError, collapse: bool = True) -> None:
        if collapse and error.host is None and self.errors:
            last_index, last = self.errors[-1]
            # An exception and its explanation on the next line (PyTorch, not NCCL) are one error.
            if (last.kind, last.host, last.rank) == (
                error.kind,
                None,
                error.rank,
            ) and index - last_index <= 1:
                return
        key = (error.kind, error.text, error.host)
        if key in self.error_keys:
            return
        self.error_keys.add(key)
        if len(self.errors) >= MAX_ITEMS:
            self.dropped_errors += 1
            return
        self.errors.append((index, error))

    def _inferred_network(self) -> tuple[str | None, str | None]:
        """The network when no "Using network" line survived: channel transports ("via NET/IB/4"),
        then the net plugin or transport that initialised (IB devices listed, NET/Socket interfaces)."""
        nets = sorted({t.split("/")[1] for t in self.transports if t.startswith("NET/") and t.count("/") >= 1})
        if len(nets) == 1:
            return nets[0], "transports"
        if self.plugin_network:
            return self.plugin_network, "plugin"
        if self.result.ib_devices:
            return "IB", "ib-devices"
        if any(i.source == "socket" for i in self.result.interface_details):
            return "Socket", "socket"
        if len(self.net_tags) == 1:  # only a net's own warnings survived (a pasted error, no init lines)
            return next(iter(self.net_tags)), "net-lines"
        return None, None

    # -- finish -------------------------------------------------------------------------------
    def finish(self) -> NcclLogResult:
        result = self.result
        result.network = result.networks[0] if result.networks else None
        result.transports = sorted(self.transports)
        result.network_source = "using-network" if result.network else None
        if result.network is None:
            result.network, result.network_source = self._inferred_network()
        if result.ranks:
            result.nranks = max(r.nranks for r in result.ranks)
            result.init_complete_ranks = sorted(
                {r.rank for r in result.ranks if r.init_complete and r.nranks == result.nranks}
            )
        uses_socket = result.network == "Socket" or "NET/Socket" in self.transports
        if uses_socket and self.ib_unavailable and self.socket_line is not None:
            text = f"NCCL uses the Socket transport: {self.ib_unavailable}"
            self.errors.append((self.socket_line, NcclError("socket_fallback", text)))
        result.errors = [error for _, error in sorted(self.errors, key=lambda pair: pair[0])]
        if self.dropped_errors:
            result.warnings.append(f"{self.dropped_errors} more distinct errors not listed (limit {MAX_ITEMS})")
        return result


# --------------------------------------------------------------------------------------------
# PyTorch ProcessGroupNCCL (read by torch_pg)
# --------------------------------------------------------------------------------------------


def _watchdogs(joined: str, line_of: Any, builder: _Builder) -> None:
    reading = read_watchdogs(joined)
    for sighting in reading.sightings:
        error = NcclError("timeout", clip_text(sighting.text), None, sighting.timeout.rank)
        builder.add_error(line_of(sighting.offset), error, collapse=False)
    builder.result.watchdog_timeouts = [sighting.timeout for sighting in reading.sightings]
    builder.result.warnings.extend(reading.warnings)


def _torch_lines(joined: str, lines: list[Line], result: NcclLogResult) -> None:
    progress = read_progress(joined)
    result.progress = progress.entries
    result.last_enqueued = progress.last_enqueued
    result.last_completed = progress.last_completed
    result.dist_backend_errors = read_dist_backend_errors(lines)
    result.fr_dump_ranks = read_fr_dump_ranks(joined)


# --------------------------------------------------------------------------------------------
# parse / facts
# --------------------------------------------------------------------------------------------


def parse(text: str) -> NcclLogResult:
    lines = _lines(text)
    builder = _Builder()
    recognised = 0
    for index, line in enumerate(lines):
        nccl = _nccl_line(line.text)
        if nccl is not None:
            recognised += 1
            builder.nccl(index, nccl)
        builder.any_line(index, line, nccl)

    joined = "\n".join(line.text for line in lines)
    starts = [0]
    for line in lines[:-1]:
        starts.append(starts[-1] + len(line.text) + 1)

    def line_of(offset: int) -> int:
        return bisect.bisect_right(starts, offset) - 1

    _watchdogs(joined, line_of, builder)
    result = builder.finish()
    _torch_lines(joined, lines, result)
    result.collective_mismatch = collective_mismatch(result.watchdog_timeouts)
    recognised += len(result.watchdog_timeouts) + len(result.progress) + len(result.dist_backend_errors)
    recognised += len(result.fr_dump_ranks)
    if joined.strip() and not recognised and not result.errors and not result.warnings and result.version is None:
        result.warnings.append("no NCCL or ProcessGroupNCCL lines recognised")
    return result


def _straggler_ranks(values: dict[int, int]) -> list[int]:
    """Ranks holding the lowest value when ranks disagree (else none)."""
    if len(values) < 2 or len(set(values.values())) < 2:
        return []
    lowest = min(values.values())
    return sorted(rank for rank, value in values.items() if value == lowest)


def _per_group(pairs: list[tuple[int | None, int, int]]) -> dict[int | None, dict[int, int]]:
    """(process group, rank, value) -> {group: {rank: value}}; the last value of a rank in a group wins."""
    groups: dict[int | None, dict[int, int]] = {}
    for pg, rank, value in pairs:
        groups.setdefault(pg, {})[rank] = value
    return groups


def _group_stragglers(groups: dict[int | None, dict[int, int]]) -> list[int]:
    """Stragglers found inside each process group, never across groups: sequence numbers count the
    collectives of one group, so rank 3 at SeqNum 40 of PG 1 is not behind rank 0 at 900 of PG 0."""
    return sorted({rank for values in groups.values() for rank in _straggler_ranks(values)})


def _enqueued_groups(result: NcclLogResult) -> dict[int | None, dict[int, int]]:
    """Compare like with like: last enqueued work where two ranks of a group show it, else watchdog SeqNums."""
    enqueued = _per_group([(p.pg, p.rank, p.last_enqueued) for p in result.progress])
    if any(len(ranks) >= 2 for ranks in enqueued.values()):
        return enqueued
    seqs: dict[int | None, dict[int, int]] = {}
    for timeout in result.watchdog_timeouts:
        if timeout.rank is not None and timeout.seq is not None:
            ranks = seqs.setdefault(timeout.pg, {})
            ranks[timeout.rank] = max(ranks.get(timeout.rank, timeout.seq), timeout.seq)
    return seqs


def _completed_lag(result: NcclLogResult) -> list[int]:
    """Ranks behind in completed work, in groups whose ranks all enqueued the same last collective."""
    enqueued = _per_group([(p.pg, p.rank, p.last_enqueued) for p in result.progress])
    completed = _per_group([(p.pg, p.rank, p.last_completed) for p in result.progress])
    level = {pg: values for pg, values in completed.items() if len(set(enqueued.get(pg, {}).values())) == 1}
    return _group_stragglers(level)


def ranks_seen(result: NcclLogResult) -> list[int]:
    """Every rank this log speaks for (init lines, watchdog and progress lines, errors, dumps).

    In a job run each member's own log gives ``hosts[h].nccl_log.ranks_seen``: which host holds a
    rank, even when the lines (PyTorch's) carry no hostname.
    """
    seen = {r.rank for r in result.ranks}
    seen |= {t.rank for t in result.watchdog_timeouts if t.rank is not None}
    seen |= {p.rank for p in result.progress}
    seen |= {e.rank for e in result.dist_backend_errors if e.rank is not None}
    seen |= {e.rank for e in result.errors if e.rank is not None}
    seen |= set(result.fr_dump_ranks)
    return sorted(seen)


# NCCL's IB init opens every verbs device it sees, warns for one it cannot open (a device not given to this
# container, a VF without its driver) and goes on to the next (NVIDIA/nccl src/transport/net_ib.cc ncclIbInit:
# WARN("NET/IB : Unable to open device %s") then continue). Where it then names the IB devices it uses, those
# failed opens are a note (devices_not_opened), not a failure.
_OPEN_FAILED = re.compile(r"Call to ibv_open_device failed|NET/IB : Unable to open device (\S+)")


def _survived_opens(result: NcclLogResult) -> tuple[list[Any], list[str]]:
    """The ibv_open_device failures and warnings NCCL went on past (it lists IB devices in use); none otherwise."""
    if not result.ib_devices:
        return [], []
    errors = [e for e in result.errors if e.kind == "ibv_failed" and _OPEN_FAILED.search(e.text or "")]
    return errors, [w for w in result.warnings_nccl if _OPEN_FAILED.search(w)]


def facts(result: NcclLogResult) -> dict[str, Any]:
    data: dict[str, Any] = to_jsonable(result)
    survived, notes = _survived_opens(result)
    errors = [e for e in result.errors if e not in survived]
    data["devices_not_opened"] = sorted({m.group(1) for w in notes if (m := _OPEN_FAILED.search(w)) and m.group(1)})
    nranks = result.nranks
    complete = set(result.init_complete_ranks)
    seen = set(data.get("ranks_seen") or ranks_seen(result))
    # A rank this log shows without its Init COMPLETE is missing; one it never shows at all only when no rank
    # completed or the log shows trouble (an NCCL WARN, an error, a watchdog timeout): a multi-node job's log
    # taken on one node, or a pasted excerpt, holds some ranks alone, and the others' silence says nothing.
    # Which transport NCCL chose (no IB device, no libibverbs: Socket) is a note, not trouble (TRANSPORT_NOTE_KINDS),
    # as is a warning that reports no failure (knowledge/nccl_benign_warnings.csv).
    failed = [e for e in result.errors if e.kind not in TRANSPORT_NOTE_KINDS]
    warned = [w for w in result.warnings_nccl if not _benign(w) and not _transport_note(w)]
    trouble = bool(failed or warned or result.watchdog_timeouts or result.dist_backend_errors)
    data["missing_init_ranks"] = (
        [rank for rank in range(nranks) if rank not in complete and (rank in seen or not complete or trouble)]
        if nranks
        else None
    )
    data["has_ib_errors"] = bool(result.ib_completion_errors) or any(
        e.kind in ("ib_completion", "ibv_failed", "ib_async_event") for e in errors
    )
    kinds = {e.kind for e in errors}
    # An error whose chain went through bootstrap/init, or an interface NCCL could not use: the
    # communicator never formed (an init failure), not a slow or hung collective.
    # A verbs call that sets a connection up failed (IBV_SETUP_CALL): the connections never formed either.
    setup_failed = any(e.kind == "ibv_failed" and IBV_SETUP_CALL.search(e.text or "") for e in errors)
    data["init_failed"] = bool(
        set(result.failed_in) & {"bootstrap", "init"}
        or kinds & {"no_socket_interface", "ofi_no_provider"}
        or setup_failed
    )
    data["bootstrap_failed"] = "bootstrap" in result.failed_in or "no_socket_interface" in kinds
    data["uses_socket"] = result.network == "Socket" or "Socket" in result.networks or "NET/Socket" in result.transports
    data["has_gdrdma"] = any(t.endswith("/GDRDMA") for t in result.transports)
    data["straggler_ranks"] = _group_stragglers(_enqueued_groups(result))
    data["completed_lag_ranks"] = _completed_lag(result)
    timeout_ranks = {t.rank for t in result.watchdog_timeouts if t.rank is not None}
    timeout_ranks |= {p.rank for p in result.progress if p.timed_out}
    data["timeout_ranks"] = sorted(timeout_ranks)
    data["error_kinds"] = sorted(kinds)
    data["warnings_unexplained"] = [
        w for w in result.warnings_nccl if not _benign(w) and w not in notes and not _transport_note(w)
    ]
    # what went wrong, not which transport NCCL chose (a node without libibverbs on Socket: slow-transport's to judge)
    data["failure_kinds"] = [kind for kind in data["error_kinds"] if kind not in TRANSPORT_NOTE_KINDS]
    data["ranks_seen"] = ranks_seen(result)
    data["uses_loopback"] = "lo" in result.interfaces
    data["loopback_only"] = bool(result.interfaces) and all(name == "lo" for name in result.interfaces)
    # Ranks that started init and none completed, with nothing wrong before the end: a log cut while the
    # communicator forms (a pasted excerpt, a log read seconds after launch) as much as a stuck init. Only a
    # hang the operator reports (symptom=hang), or trouble in the log, makes the missing ranks a hang.
    data["ends_in_init"] = bool(seen) and not complete and not trouble and not result.watchdog_timeouts
    data["hang_evidence"] = bool(
        result.watchdog_timeouts
        or data["timeout_ranks"]
        or (data["missing_init_ranks"] and not data["ends_in_init"])
        or result.dist_backend_errors
        or set(data["error_kinds"]) & HANG_ERROR_KINDS
    )
    return data


@functools.cache
def _benign_patterns() -> tuple[re.Pattern[str], ...]:
    rows = knowledge.read_csv("nccl_benign_warnings.csv", required=("pattern", "meaning", "source"))
    return tuple(re.compile(row["pattern"]) for row in rows)


def _benign(warning: str) -> bool:
    """A warning knowledge/nccl_benign_warnings.csv says reports no failure."""
    return any(pattern.search(warning) for pattern in _benign_patterns())


# Error kinds that say which transport NCCL fell back to, not that anything failed.
TRANSPORT_NOTE_KINDS = frozenset({"ibverbs_missing", "socket_fallback"})


def _transport_note(warning: str) -> bool:
    """A WARN that only says which transport NCCL could use ("Failed to open libibverbs": Socket then; nccl-hang's
    slow-transport says ib-not-used where InfiniBand is expected)."""
    return any(kind in TRANSPORT_NOTE_KINDS and pattern.search(warning) for kind, pattern in CAUSE_PATTERNS)


# Error kinds that show a collective stuck or a peer gone (a hang), not a slow one (nccl-hang's split).
HANG_ERROR_KINDS = frozenset(
    {
        "timeout", "ib_completion", "ibv_failed", "no_route", "connection_refused", "connection_reset",
        "connection_aborted", "connection_closed", "connect_timeout", "net_plugin_error", "proxy_failed",
        "socket_recv_failed", "cuda_failure", "remote_error", "unhandled_system_error", "unhandled_cuda_error",
        "internal_error", "process_down",
    }
)  # fmt: skip


COLLECTOR = Collector(
    **registered(KIND),
    # The log path is the runbook parameter `nccl_log` (one argv element; "--" keeps it a path).
    commands=(("cat", "--", "{nccl_log}"),),
    parse=parse,
    facts=facts,
)
