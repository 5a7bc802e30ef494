"""``ib-ports``: InfiniBand / RoCE port state, rate and error counters, read-only.

Reads, auto-detected line by line (so outputs of several commands concatenated parse in one go):

- the sysfs dump the collector runs: ``grep -s -H . /sys/class/infiniband/*/ports/*/{state,...}``,
  one ``<path>:<value>`` line per file (``.../mlx5_0/ports/1/state:4: ACTIVE``,
  ``.../counters/link_downed:0``); any prefix before ``infiniband/`` is accepted (a copied tree);
- ``ibstat``: ``CA 'mlx5_0'`` / ``Port 1:`` / ``State: Active`` / ``Rate: 400``;
- ``ibv_devinfo``: ``hca_id: mlx5_0`` / ``port: 1`` / ``state: PORT_ACTIVE (4)`` / ``link_layer:``;
- ``ibstatus`` (infiniband-diags' script over the same sysfs files, the fallback gpud uses when ``ibstat``
  fails): ``Infiniband device 'mlx5_0' port 1 status:`` / ``state: 4: ACTIVE`` / ``rate: 400 Gb/sec (4X NDR)``.

sysfs attribute meanings: Linux ``Documentation/ABI/stable/sysfs-class-infiniband``
(https://www.kernel.org/doc/Documentation/ABI/stable/sysfs-class-infiniband). Counters are cumulative
since the driver loaded, so one read cannot tell a climbing counter from an old count: the
``ib-ports-window`` collector compares two reads a window apart.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass, field
from typing import Any

from nightowl.collectors.base import Collector, registered, to_jsonable

KIND = "ib-ports"

# The counters whose rise is an error (sysfs-class-infiniband "counters/"); the others (data, packets,
# xmit_wait) measure traffic. hw_counters are vendor-specific and kept as read, never judged here.
ERROR_COUNTERS = (
    "symbol_error",
    "link_downed",
    "link_error_recovery",
    "port_rcv_errors",
    "port_rcv_remote_physical_errors",
    "port_rcv_switch_relay_errors",
    "port_xmit_discards",
    "port_xmit_constraint_errors",
    "port_rcv_constraint_errors",
    "local_link_integrity_errors",
    "excessive_buffer_overrun_errors",
    "VL15_dropped",
)

# ibstat / ibv_devinfo / sysfs spellings of the port state -> the sysfs name (IBTA PortState).
STATE_NAMES = {
    "active": "ACTIVE",
    "port_active": "ACTIVE",
    "down": "DOWN",
    "port_down": "DOWN",
    "init": "INIT",
    "initializing": "INIT",
    "port_init": "INIT",
    "armed": "ARMED",
    "port_armed": "ARMED",
    "active_defer": "ACTIVE_DEFER",
    "port_active_defer": "ACTIVE_DEFER",
}
# Physical state spellings -> sysfs names (IBTA PortPhysicalState; ibv_devinfo prints LINK_UP etc.).
PHYS_STATE_NAMES = {
    "linkup": "LinkUp",
    "link_up": "LinkUp",
    "disabled": "Disabled",
    "polling": "Polling",
    "sleep": "Sleep",
    "portconfigurationtraining": "PortConfigurationTraining",
    "port_configuration_training": "PortConfigurationTraining",
    "linkerrorrecovery": "LinkErrorRecovery",
    "link_error_recovery": "LinkErrorRecovery",
    "phytest": "PhyTest",
    "phy_test": "PhyTest",
}

_SYSFS = re.compile(
    r"(?:^|/)infiniband/(?P<device>[^/\s]+)/ports/(?P<port>\d+)/(?P<attr>[A-Za-z0-9_./-]+?):(?P<value>.*)$"
)
_STATE_VALUE = re.compile(r"^(?:(?P<code>\d+)\s*:\s*)?(?P<name>[A-Za-z_]+)(?:\s*\((?P<code2>\d+)\))?$")
_RATE = re.compile(r"^(?P<gbps>\d+(?:\.\d+)?)(?:\s*Gb/sec)?(?:\s*\((?P<text>[^)]*)\))?\s*$")
_IBSTAT_CA = re.compile(r"^CA '(?P<device>[^']+)'\s*$")
_IBSTAT_PORT = re.compile(r"^Port (?P<port>\d+):\s*$")
_DEVINFO_HCA = re.compile(r"^hca_id:\s*(?P<device>\S+)\s*$")
_DEVINFO_PORT = re.compile(r"^port:\s*(?P<port>\d+)\s*$")
_IBSTATUS_PORT = re.compile(r"^Infiniband device '(?P<device>[^']+)' port (?P<port>\d+) status:\s*$")
_KEY_VALUE = re.compile(r"^(?P<key>[A-Za-z][A-Za-z0-9 _]*?)\s*:\s*(?P<value>.*)$")
# A shell loop over one port's counters folder (``for f in $(find . -type f); do echo "=== $f ==="; cat $f``):
# the prompt names the folder, ``=== ./name ===`` the counter, the next line its value.
_LOOP_FOLDER = re.compile(r"infiniband/(?P<device>[^/\s]+)/ports/(?P<port>\d+)/(?P<folder>counters|hw_counters)\b")
_LOOP_NAME = re.compile(r"^=== \./(?P<name>[A-Za-z0-9_]+) ===$")
# iWARP and some RoCE drivers have no Performance Management Agent: the file exists, the count does not.
_NO_PMA = re.compile(r"^N/A\b", re.IGNORECASE)
_NOISE = re.compile(
    r"^(?:[$#]\s.*|\+[-+]*|.*\b(?:grep)\b.*/sys/.*|.*[#$]\s*(?:sudo\s+)?(?:ibstat|ibstatus|ibv_devinfo|rdma|perfquery)\b.*"
    r"|(?:sudo\s+)?(?:ibstat|ibstatus|ibv_devinfo|rdma link|perfquery)\b(?:\s+-\S+)*(?:\s+(?:show|mlx\S+|\d+))*\s*)$"
)
# iproute2's `rdma link [show]`: "link mlx5_0/1 state ACTIVE physical_state LINK_UP netdev ens1", and the older
# "0/1: mlx5_0/1: state DOWN physical_state DISABLED" (rdma-link(8)).
_RDMA_LINK = re.compile(r"^(?:link\s+|\d+/\d+:\s+)(?P<device>[\w.-]+)/(?P<port>\d+):?\s+(?P<rest>.*)$")
_RDMA_FIELD = re.compile(r"\b(?P<key>state|physical_state|netdev)\s+(?P<value>\S+)")
# infiniband-diags' perfquery(8): "# Port counters: Lid 10 port 1 (CapMask: ...)" (-x: "extended counters"),
# then "SymbolErrorCounter:..............0" lines; the LID names the port (perfquery reads no device name).
_PERFQUERY_HEADER = re.compile(r"^#\s*Port (?:extended )?counters: Lid (?P<lid>\d+) port (?P<port>\d+)", re.IGNORECASE)
_PERFQUERY_FIELD = re.compile(r"^(?P<name>[A-Za-z0-9]+):\.{2,}\s*(?P<value>\S+)\s*$")
# infiniband-diags' own complaints (ibpanic/ibwarn/iberror): a device it could not read.
_DIAG_ERROR = re.compile(r"^(?:ibpanic|ibwarn|iberror):\s*(?P<text>.*)$")


@dataclass
class Port:
    device: str
    port: int
    state: str | None = None  # ACTIVE | DOWN | INIT | ARMED | ACTIVE_DEFER (sysfs names), None: not shown
    phys_state: str | None = None  # LinkUp | Disabled | Polling | ...
    rate_gbps: float | None = None
    rate_text: str | None = None  # "4X NDR" as sysfs prints it
    link_layer: str | None = None  # InfiniBand | Ethernet
    ca_type: str | None = None  # the adapter model as ibstat prints it (MT4129: ConnectX-7), when shown
    system_guid: str | None = None  # the card's system image GUID: the ports of one card share it
    counters: dict[str, int] = field(default_factory=dict)
    hw_counters: dict[str, int] = field(default_factory=dict)
    sources: list[str] = field(default_factory=list)  # sysfs | ibstat | ibv_devinfo | ibstatus | rdma-link | perfquery

    @property
    def label(self) -> str:
        return f"{self.device}/{self.port}"


@dataclass
class IbPortsResult:
    kind: str
    warnings: list[str]
    ports: list[Port]
    diag_errors: list[str] = field(default_factory=list)  # ibpanic/ibwarn/iberror lines: devices not read
    # devices ibstat/ibv_devinfo named but printed no port of: the listing ends before their port block
    devices_without_ports: list[str] = field(default_factory=list)


@dataclass
class _State:
    ports: dict[tuple[str, int], Port] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    diag_errors: list[str] = field(default_factory=list)
    device: str | None = None
    port: Port | None = None
    tool: str | None = None  # the block being read: ibstat | ibv_devinfo | ibstatus
    loop: tuple[str, int, str] | None = None  # (device, port, folder) of a counters loop dump
    loop_name: str | None = None
    unavailable: set[str] = field(default_factory=set)  # ports whose counters read N/A (no PMA)
    ca_types: dict[str, str] = field(default_factory=dict)  # device -> CA type / vendor_part_id
    system_guids: dict[str, str] = field(default_factory=dict)  # device -> system image GUID (one per card)
    devices_named: list[str] = field(default_factory=list)  # CA / hca_id headers, in order

    def port_at(self, device: str, number: int, source: str) -> Port:
        key = (device, number)
        if key not in self.ports:
            self.ports[key] = Port(device=device, port=number)
        port = self.ports[key]
        if source not in port.sources:
            port.sources.append(source)
        return port


# Logical port states a port reaches only once its physical link is LinkUp (IBTA InfiniBand Architecture
# Specification vol. 1, PortInfo PortState: Init and Armed follow LinkUp training; Active too, not judged here).
LINK_UP_STATES = ("INIT", "ARMED")


def _state(text: str) -> str | None:
    match = _STATE_VALUE.match(text.strip())
    if match is None:
        return None
    return STATE_NAMES.get(match.group("name").lower())


def _phys_state(text: str) -> str | None:
    match = _STATE_VALUE.match(text.strip())
    if match is None:
        return None
    return PHYS_STATE_NAMES.get(match.group("name").lower())


def _read_rate(port: Port, text: str) -> bool:
    match = _RATE.match(text.strip())
    if match is None:
        return False
    port.rate_gbps = float(match.group("gbps"))
    port.rate_text = match.group("text") or port.rate_text
    return True


# The widest port counter is 64 bits (20 decimal digits): a longer "number" is no counter (and Python's
# int() refuses strings past 4,300 digits with an error no parser may raise).
MAX_COUNTER_DIGITS = 20


def counter_value(text: str) -> int | None:
    """A counter's value as a port tool prints it, or None when it is not one (empty, 1e400, 5,000 digits)."""
    value = text.strip()
    if not value.isdigit() or not value.isascii() or len(value) > MAX_COUNTER_DIGITS:
        return None
    return int(value)


def _read_sysfs(state: _State, match: re.Match[str]) -> bool:
    port = state.port_at(match.group("device"), int(match.group("port")), "sysfs")
    attr, value = match.group("attr"), match.group("value").strip()
    folder, _, name = attr.rpartition("/")
    if folder in ("counters", "hw_counters"):
        if _NO_PMA.match(value):
            state.unavailable.add(port.label)
            return True
        count = counter_value(value)
        if count is None:
            return False
        (port.counters if folder == "counters" else port.hw_counters)[name] = count
        return True
    if folder:
        return True  # other per-port folders (gids, pkeys, gid_attrs): not what this collector judges
    if name == "state":
        port.state = _state(value)
        return port.state is not None
    if name == "phys_state":
        port.phys_state = _phys_state(value)
        return port.phys_state is not None
    if name == "rate":
        return _read_rate(port, value)
    if name == "link_layer":
        port.link_layer = value or None
        return True
    return True  # lid, sm_lid, cap_mask ...: read, not judged


def _read_tool_field(state: _State, key: str, value: str) -> bool:
    """A ``key: value`` line inside an ibstat or ibv_devinfo port block."""
    port = state.port
    if port is None:
        name = key.strip().lower()
        if name in ("ca type", "vendor_part_id") and state.device is not None:
            state.ca_types[state.device] = value.strip()  # the adapter model: ports compare with their own kind
        elif name in ("system image guid", "sys_image_guid") and state.device is not None:
            state.system_guids[state.device] = value.strip().lower()  # one card's ports share it
        return True  # other CA-level fields (firmware, GUIDs, transport): not judged
    key = key.strip().lower()
    if key == "state":
        port.state = _state(value)
        return port.state is not None
    if key in ("physical state", "phys_state", "phys state"):
        port.phys_state = _phys_state(value)
        return port.phys_state is not None
    if key == "rate":
        return _read_rate(port, value)
    if key in ("link layer", "link_layer"):
        port.link_layer = value.strip() or None
        return True
    return True


def _read_loop(state: _State, line: str) -> bool:
    """The three lines of a counters-folder loop: prompt (folder), ``=== ./name ===``, value."""
    name = _LOOP_NAME.match(line)
    if name is not None and state.loop is not None:
        state.loop_name = name.group("name")
        return True
    if state.loop is not None and state.loop_name is not None and re.fullmatch(r"\d+", line):
        device, number, folder = state.loop
        port = state.port_at(device, number, "sysfs")
        count = counter_value(line)
        if count is None:
            return False
        (port.counters if folder == "counters" else port.hw_counters)[state.loop_name] = count
        state.loop_name = None
        return True
    prompt = _LOOP_FOLDER.search(line)
    if prompt is not None and not _SYSFS.search(line):
        state.loop = (prompt.group("device"), int(prompt.group("port")), prompt.group("folder"))
        state.loop_name = None
        return True
    # the loop's own lines, echoed by the prompt
    return state.loop is not None and re.match(r"^(?:echo|cat|done|do)\b", line) is not None


def _read_rdma_link(state: _State, match: re.Match[str]) -> None:
    port = state.port_at(match.group("device"), int(match.group("port")), "rdma-link")
    state.device, state.port, state.tool = None, None, None
    for field_match in _RDMA_FIELD.finditer(match.group("rest")):
        key, value = field_match.group("key"), field_match.group("value")
        if key == "state":
            port.state = _state(value) or port.state
        elif key == "physical_state":
            port.phys_state = _phys_state(value) or port.phys_state


def _read_perfquery(state: _State, line: str) -> bool:
    """A perfquery header (a new port block) or one of its counter lines."""
    header = _PERFQUERY_HEADER.match(line)
    if header is not None:
        state.device, state.tool = f"lid{header.group('lid')}", "perfquery"
        state.port = state.port_at(state.device, int(header.group("port")), "perfquery")
        return True
    if state.tool != "perfquery" or state.port is None:
        return False
    field_match = _PERFQUERY_FIELD.match(line)
    if field_match is None:
        return False
    name = _counter_table()[1].get(field_match.group("name"))
    value = field_match.group("value")
    count = counter_value(value)
    if name is not None and count is not None:
        state.port.counters[name] = count
    return True  # PortSelect, CounterSelect, VL counters: read, not judged


def _read_line(state: _State, raw: str) -> None:
    line = raw.strip()
    if not line:
        return
    if _read_perfquery(state, line):
        return
    if _NOISE.match(line):
        return
    rdma = _RDMA_LINK.match(line)
    if rdma is not None:
        _read_rdma_link(state, rdma)
        return
    diag = _DIAG_ERROR.match(line)
    if diag is not None:
        state.warnings.append(f"ibstat could not read everything: {diag.group('text')[:200]}")
        state.diag_errors.append(line[:300])
        return
    if _read_loop(state, line):
        return
    sysfs = _SYSFS.search(line)
    if sysfs is not None:
        if not _read_sysfs(state, sysfs):
            state.warnings.append(f"unreadable sysfs value: {line[:200]}")
        return
    status = _IBSTATUS_PORT.match(line)
    if status is not None:  # ibstatus names device and port in one header
        state.device, state.tool = status.group("device"), "ibstatus"
        state.port = state.port_at(state.device, int(status.group("port")), "ibstatus")
        return
    for pattern, tool in ((_IBSTAT_CA, "ibstat"), (_DEVINFO_HCA, "ibv_devinfo")):
        device = pattern.match(line)
        if device is not None:
            state.device, state.port, state.tool = device.group("device"), None, tool
            if state.device not in state.devices_named:
                state.devices_named.append(state.device)
            return
    if state.tool is None and _IBSTAT_PORT.match(line):  # an ibstat excerpt that starts at its "Port 1:"
        state.device, state.tool = "unnamed", "ibstat"
    port_header = (_IBSTAT_PORT if state.tool == "ibstat" else _DEVINFO_PORT).match(line)
    if port_header is not None and state.device is not None and state.tool is not None:
        state.port = state.port_at(state.device, int(port_header.group("port")), state.tool)
        return
    pair = _KEY_VALUE.match(line)
    if pair is not None and state.tool is not None:
        if not _read_tool_field(state, pair.group("key"), pair.group("value")):
            state.warnings.append(f"unreadable {state.tool} value: {line[:200]}")
        return
    if state.tool is not None and state.port is None:
        return  # ibv_devinfo -v CA-level blocks (GUIDs, caps lists)
    state.warnings.append(f"unrecognised line: {line[:200]}")


def parse(text: str) -> IbPortsResult:
    """Parse a sysfs dump, ibstat, ibstatus, ibv_devinfo, `rdma link` or perfquery output; never raises."""
    state = _State()
    for raw in str(text).splitlines():
        _read_line(state, raw)
    ports = [state.ports[key] for key in sorted(state.ports)]
    for port in ports:
        port.ca_type = state.ca_types.get(port.device)
        port.system_guid = state.system_guids.get(port.device)
        if port.phys_state is None and port.state in LINK_UP_STATES:
            port.phys_state = "LinkUp"  # ibv_devinfo without -v prints no physical state: Init implies it
    for label in sorted(state.unavailable):
        state.warnings.append(f"{label}: counters read N/A (no PMA): this driver keeps no port counters")
    if not ports:
        state.warnings.append("no InfiniBand/RoCE port found")
    with_ports = {port.device for port in ports}
    return IbPortsResult(
        kind=KIND,
        warnings=state.warnings,
        ports=ports,
        diag_errors=state.diag_errors,
        devices_without_ports=[device for device in state.devices_named if device not in with_ports],
    )


def _is_down(port: Port) -> bool:
    return (port.state is not None and port.state != "ACTIVE") or (
        port.phys_state is not None and port.phys_state != "LinkUp"
    )


# Physical states of a port that never trained: no cable or no peer (Polling), or switched off (Disabled).
NEVER_UP_PHYS = ("Disabled", "Polling", "Sleep")
# Counters that measure traffic: any of them above zero says the port carried data once.
TRAFFIC_COUNTERS = ("port_xmit_data", "port_rcv_data", "port_xmit_packets", "port_rcv_packets", "unicast_xmit_packets")


def _never_up(port: Port) -> bool:
    """A down port with no sign it was ever in use: physically Disabled/Polling (or only "DOWN" where the tool
    prints no physical state), no link-down counted, no traffic counted."""
    if not _is_down(port) or port.phys_state not in (*NEVER_UP_PHYS, None):
        return False
    if port.phys_state is None and port.state not in ("DOWN", None):
        return False
    return not port.counters.get("link_downed") and not any(port.counters.get(name) for name in TRAFFIC_COUNTERS)


def unused_ports(ports: list[Port]) -> list[Port]:
    """Down ports never in use on a host whose other ports carry the fabric: the unused second port of a
    dual-port card, a port of another kind of adapter than every active one, or a multi-port card none of whose
    ports came up; not a failed link. Where the tool names the cards (ibstat's CA type and system image GUID),
    a never-up single-port card of the active ports' model is one of a set of like NICs, down (two of eight
    compute NICs Disabled is a fault); where it does not (sysfs, ibstatus, rdma link), any active port carries
    the fabric.
    Whether a port is expected is the operator's to say (node-health's expected_ib_ports), not the port's."""
    active = [p for p in ports if p.state == "ACTIVE" and not _is_down(p)]
    if not active:
        return []
    active_cards = {p.system_guid for p in active if p.system_guid}
    active_models = {p.ca_type for p in active if p.ca_type}
    ports_of_card: dict[str, int] = {}
    for port in ports:
        if port.system_guid:
            ports_of_card[port.system_guid] = ports_of_card.get(port.system_guid, 0) + 1

    def unused(port: Port) -> bool:
        if port.system_guid is None or port.ca_type is None:
            return True  # the tool names no card: the host's other ports carry the fabric
        if port.system_guid in active_cards or port.ca_type not in active_models:
            return True  # the spare port of a card in use, or another kind of adapter than the fabric's
        # a card of the fabric's model with no port up: one of a set of like single-port NICs is down; a
        # multi-port card none of whose ports ever came up is a spare card
        return ports_of_card.get(port.system_guid, 1) > 1

    return [p for p in ports if _never_up(p) and unused(p)]


def switched_off_only(ports: list[Port]) -> bool:
    """No port is active and every port is an Ethernet (RoCE) port Disabled and never up: the host's RDMA NICs are
    switched off or not cabled, a fault only if they should carry traffic (node-health's expect_ib /
    expected_ib_ports say so). A Polling port (no link partner) is not switched off, and an InfiniBand port has
    no use but the fabric: one Disabled with none active is a down fabric, not a spare NIC."""
    return bool(ports) and all(
        _never_up(p) and p.phys_state == "Disabled" and p.link_layer != "InfiniBand" for p in ports
    )


@functools.cache
def _counter_table() -> tuple[dict[str, int], dict[str, str]]:
    """(bits of each error counter, sysfs name of each perfquery field) from nightowl/knowledge/ib_counters.csv."""
    from nightowl import knowledge

    rows = knowledge.read_csv("ib_counters.csv", ("counter", "perfquery", "source"))
    widths = {row["counter"]: int(row["bits"]) for row in rows if row.get("bits")}
    return widths, {row["perfquery"]: row["counter"] for row in rows}


def counter_widths() -> dict[str, int]:
    """Bits of each PortCounters error field: a counter at 2^bits - 1 is saturated."""
    return _counter_table()[0]


def saturated(port: Port) -> list[str]:
    """The error counters of a port that stand at their width's maximum: they count no more."""
    widths = counter_widths()
    return sorted(name for name, value in port.counters.items() if name in widths and value >= (1 << widths[name]) - 1)


def role_of(port: Port) -> str:
    """The ports a port is compared with: same link layer (InfiniBand fabric vs Ethernet/RoCE) and, where the
    tool names it, the same adapter model (a ConnectX-7 at 400 Gb/s beside a ConnectX-6 Dx front-end NIC at 100
    is two networks, not a slow port)."""
    layer = port.link_layer or "unknown"
    return f"{layer} {port.ca_type}" if port.ca_type else layer


def facts(result: IbPortsResult) -> dict[str, Any]:
    """Contract JSON plus per-port judgements: ports down, below their role's rate, error counters."""
    data: dict[str, Any] = to_jsonable(result)
    ports = result.ports
    data["port_count"] = len(ports)
    data["active_ports"] = [p.label for p in ports if p.state == "ACTIVE" and not _is_down(p)]
    unused = unused_ports(ports)
    data["ports_down"] = [
        {"port": p.label, "state": p.state, "phys_state": p.phys_state, "link_layer": p.link_layer}
        for p in ports
        if _is_down(p) and p not in unused
    ]
    data["unused_ports"] = [
        {"port": p.label, "state": p.state, "phys_state": p.phys_state, "link_layer": p.link_layer} for p in unused
    ]
    data["switched_off_only"] = switched_off_only(ports)
    data["saturated_counters"] = {p.label: names for p in ports if (names := saturated(p))}
    best: dict[str, float] = {}
    for p in ports:
        if not _is_down(p) and p.rate_gbps is not None:
            best[role_of(p)] = max(best.get(role_of(p), 0.0), p.rate_gbps)
    data["ports_below_peer_rate"] = [
        {"port": p.label, "rate_gbps": p.rate_gbps, "peer_rate_gbps": best[role_of(p)], "link_layer": p.link_layer}
        for p in ports
        if not _is_down(p) and p.rate_gbps is not None and p.rate_gbps < best[role_of(p)]
    ]
    data["error_counts"] = {
        p.label: {name: p.counters[name] for name in ERROR_COUNTERS if p.counters.get(name)}
        for p in ports
        if any(p.counters.get(name) for name in ERROR_COUNTERS)
    }
    data["has_counters"] = any(p.counters for p in ports)
    # infiniband-diags' own complaints (ibpanic: the tool stopped; ibwarn/iberror): devices it did not read
    data["diag_errors"] = list(result.diag_errors)
    data["roles"] = sorted({role_of(p) for p in ports})
    return data


# One fixed command, globbed by sh: the allow-list (readonly.py) holds it verbatim, and it only reads.
# grep -s -H prints "<file>:<value>" per one-line sysfs file and stays silent on a missing or unreadable one.
SYSFS_SCRIPT = (
    "exec grep -s -H . /sys/class/infiniband/*/ports/*/state /sys/class/infiniband/*/ports/*/phys_state"
    " /sys/class/infiniband/*/ports/*/rate /sys/class/infiniband/*/ports/*/link_layer"
    " /sys/class/infiniband/*/ports/*/counters/*"
)
SYSFS_COMMAND = ("sh", "-c", SYSFS_SCRIPT, "ib-ports")


def shows_nothing(text: str) -> bool:
    """No port line at all: no sysfs tree (no RDMA driver) is not a clean port. A device named with no port (a
    listing cut before its port block) is something to judge: a device not read."""
    result = parse(text)
    return not result.ports and not result.devices_without_ports


COLLECTOR = Collector(
    **registered(KIND),
    commands=(SYSFS_COMMAND, ("ibstat",)),
    parse=parse,
    facts=facts,
    shows_nothing=shows_nothing,
)
