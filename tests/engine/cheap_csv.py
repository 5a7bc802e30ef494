"""A ``--query-gpu`` CSV (the cheap form's fields, with its header) that says what a full ``nvidia-smi -q -x``
says, for stand-ins (tests/engine/test_cheap_forms.py, bench/steady.py). ``changes``: per GPU index, field ->
value to print instead (an ECC count, a clock mask)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from nightowl.collectors.gpu.nvidia_smi import nvidia_smi
from nightowl.collectors.gpu.nvidia_smi.cheap import CHEAP_FIELDS


def _cell(value: Any) -> str:
    return "[N/A]" if value is None else str(value)


def cheap_csv(full_xml: str, changes: Mapping[int, Mapping[str, Any]] | None = None) -> str:
    facts = nvidia_smi.facts(nvidia_smi.parse(full_xml))
    rows = []
    for number, gpu in enumerate(facts["gpus"]):
        pcie, retired, remap = gpu["pcie"], gpu.get("retired_pages"), gpu.get("remapped_rows")
        values = {
            "index": number,
            "pci.bus_id": "0000" + gpu["pci"].upper() + ".0",
            "name": gpu["name"],
            "uuid": gpu["uuid"],
            "serial": gpu.get("serial"),
            "driver_version": facts["driver_version"],
            "utilization.gpu": gpu["utilization_gpu"],
            "ecc.errors.uncorrected.volatile.total": 0,
            "clocks_event_reasons.active": "0x0000000000000000",
            "pcie.link.gen.current": pcie["gen_current"],
            "pcie.link.gen.max": pcie["gen_max"],
            "pcie.link.width.current": pcie["width_current"],
            "pcie.link.width.max": pcie["width_max"],
            "retired_pages.pending": None if retired is None else ("Yes" if retired["pending"] else "No"),
            "remapped_rows.pending": None if remap is None else ("Yes" if remap["pending"] else "No"),
            "remapped_rows.failure": None if remap is None else ("Yes" if remap["failure"] else "No"),
            "temperature.gpu": gpu["temperature_gpu"],
            "power.draw": gpu["power_draw_w"],
            "fan.speed": gpu["fan_speed_percent"],
        }
        values.update((changes or {}).get(number, {}))
        rows.append(", ".join(_cell(values[name]) for name in CHEAP_FIELDS))
    return ", ".join(CHEAP_FIELDS) + "\n" + "\n".join(rows) + "\n"


def fabric_csv(full_q: str, changes: Mapping[int, Mapping[str, Any]] | None = None) -> str:
    """The fabric collector's cheap form (its Fabric fields) as a full ``nvidia-smi -q`` says them."""
    from nightowl.collectors.gpu import fabric
    from nightowl.collectors.gpu.nvidia_smi.cheap_fabric import FABRIC_FIELDS

    rows = []
    for number, gpu in enumerate(fabric.facts(fabric.parse(full_q))["gpus"]):
        health = gpu.get("health") or {}
        values: dict[str, Any] = {
            "pci.bus_id": "0000" + gpu["pci"].upper() + ".0",
            "name": gpu["name"],
            "fabric.state": gpu["state"],
            "fabric.status": gpu["status"],
            "fabric.clique": gpu["clique_id"],
            "fabric.cluster": gpu["cluster_uuid"],
        }
        for name in FABRIC_FIELDS:
            if name.startswith("fabric.health."):
                values[name] = health.get(name.removeprefix("fabric.health."))
        values.update((changes or {}).get(number, {}))
        rows.append(", ".join(_cell(values[name]) for name in FABRIC_FIELDS))
    return ", ".join(FABRIC_FIELDS) + "\n" + "\n".join(rows) + "\n"


def shared_csv(query: str, fabric: str) -> str:
    """The query both cheap forms share (cheap.SHARED_ARGV) on a host whose own two cheap CSVs are ``query``
    and ``fabric`` (cheap_csv's and fabric_csv's): each GPU's two rows joined on its bus id."""
    from nightowl.collectors.gpu.nvidia_smi.cheap import SHARED_FIELDS

    def rows(text: str) -> list[dict[str, str]]:
        head, *lines = text.splitlines()
        names = [cell.strip() for cell in head.split(",")]
        return [dict(zip(names, (cell.strip() for cell in line.split(",")), strict=True)) for line in lines if line]

    fabric_rows = {row["pci.bus_id"]: row for row in rows(fabric)}
    joined = [{**fabric_rows[row["pci.bus_id"]], **row} for row in rows(query)]
    lines = [", ".join(row[name] for name in SHARED_FIELDS) for row in joined]
    return ", ".join(SHARED_FIELDS) + "\n" + "\n".join(lines) + "\n"


def one_node_q(full_q: str, full_xml: str) -> str:
    """``full_q`` (a real ``nvidia-smi -q``) with each GPU's bus id and product name those of the GPU at the same
    place in ``full_xml`` (a real ``-q -x``). fixtures/hosts/real-size-8gpu's two forms are of two nodes (no
    public report holds both of one); one host's query of both collectors' fields names one set of GPUs, so a
    stand-in host whose two full reads are these must name the same GPUs in both."""
    import re

    gpus = nvidia_smi.facts(nvidia_smi.parse(full_xml))["gpus"]
    blocks = re.split(r"(?m)^(?=GPU [0-9A-Fa-f]{8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.\d\s*$)", full_q)
    out = [blocks[0]]
    for block, gpu in zip(blocks[1:], gpus, strict=True):
        old = block.split(None, 2)[1]
        new = "0000" + gpu["pci"].upper() + ".0"
        block = block.replace(old, new)
        block = re.sub(r"(?m)^(\s*Product Name\s*: ).*$", lambda m, name=gpu["name"]: m.group(1) + name, block, count=1)
        out.append(re.sub(r"(?m)^(\s*Bus\s*: 0x)[0-9A-Fa-f]+$", lambda m, bus=new[9:11]: m.group(1) + bus, block))
    return "".join(out)
