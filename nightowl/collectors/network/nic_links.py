"""NIC link state changes in the kernel log (mlx5, ice, igb, e1000e, bnxt, ...; the bonding driver), per port.

Drivers print a port's link going down and up in a few wordings (read here by ``_LINK``): mlx5_core's
``mlx5_core 0000:3b:00.0 ens1f0np0: Link down`` / ``Link up`` (drivers/net/ethernet/mellanox/mlx5/core/en_main.c),
Intel's and Broadcom's ``NIC Link is Down`` / ``NIC Link is Up 100 Gbps ...``, and bonding's ``bond0: (slave
ens1f0np0): link status definitely down, disabling slave`` (drivers/net/bonding/bond_main.c; older kernels:
``link status definitely down for interface eth1, disabling it``; with a downdelay, the first word of an outage is
``link status down for interface eno4, disabling it in 200 ms``, named after whatever the bond is called). A port
that flaps is a cable, optic or NIC problem, not the GPU's; the thresholds are data
(nightowl/knowledge/host_thresholds.csv, each with its source).
"""

from __future__ import annotations

import re
from typing import Any

MAX_PORTS = 256
MAX_TIMES = 64  # down/up times kept per port (a storm repeats; counts go on)

_ADDRESS = r"(?:(?P<pci>[0-9a-fA-F]{4}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7])\s+)?"
_LINK = re.compile(
    r"(?P<driver>[\w-]+)[: ]\s*"
    + _ADDRESS
    + r"(?P<port>[\w.@-]+):? (?:\w+: \S+ )?(?:NIC )?Link (?:is )?(?P<state>[Dd]own|[Uu]p)\b"
    r"|(?P<bond>[\w-]+): (?:\(slave (?P<slave>[\w.@-]+)\): )?link status (?:definitely )?(?P<bstate>down|up)\b"
    r"(?: again after \d+ ms)?(?: for interface (?P<iface>[\w.@-]+))?"
)
HINTS = ("Link ", "link status")


def link_change(message: str) -> tuple[str, str, str | None, str] | None:
    """(port, "down" or "up", PCI address or None, driver) of a link-state line, else None."""
    match = _LINK.search(message)
    if match is None:
        return None
    if match.group("bond"):
        port = match.group("slave") or match.group("iface")
        if not port:
            return None
        return port, match.group("bstate"), None, "bonding " + match.group("bond")
    return match.group("port"), match.group("state").lower(), match.group("pci"), match.group("driver")


class LinkScan:
    """Per-port link downs and ups, in log order."""

    def __init__(self) -> None:
        self.ports: dict[str, dict[str, Any]] = {}

    def feed(self, line: str, time: float | None) -> None:
        found = link_change(line)
        if found is None:
            return
        port, state, pci, driver = found
        record = self.ports.get(port)
        if record is None:
            if len(self.ports) >= MAX_PORTS:
                return
            record = self.ports[port] = {
                "port": port,
                "pci": None,
                "driver": driver,
                "downs": 0,
                "ups": 0,
                "down_times": [],
                "last_state": None,
            }
        if pci and record["pci"] is None:
            from nightowl.collectors.pci import normalize_pci

            record["pci"] = normalize_pci(pci)
        if record["last_state"] == state:
            return  # the same outage told twice (the driver's "Link down", then bonding's "definitely down")
        record["downs" if state == "down" else "ups"] += 1
        record["last_state"] = state
        if state == "down" and len(record["down_times"]) < MAX_TIMES:
            record["down_times"].append(time)

    def finish(self) -> list[dict[str, Any]]:
        return list(self.ports.values())


def most_in_window(times: list[float | None], window: float) -> int:
    """The most events within any ``window`` seconds; times unknown count as one window (all together)."""
    known = sorted(t for t in times if t is not None)
    if len(known) < len(times):
        return len(times)
    best, start = 0, 0
    for end, now in enumerate(known):
        while now - known[start] > window:
            start += 1
        best = max(best, end - start + 1)
    return best
