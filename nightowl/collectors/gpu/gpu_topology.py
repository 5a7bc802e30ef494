"""GPU/NIC connection matrix from ``nvidia-smi topo -m`` (and ``topo -p2p <cap>``).

The matrix is printed with tabs by nvidia-smi but often pasted with spaces, so rows are split on
any whitespace (no cell value contains a space) and the header's multi-word column names
(``CPU Affinity``, ``NUMA Affinity``, ``GPU NUMA ID``) are recognised by name.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from nightowl.collectors.base import Collector, registered, to_jsonable

KIND = "gpu-topology"

# Header columns that are not devices: header text -> result field.
# Source: nvidia-smi topo -m samples (fixtures/corpus/gpu/topo-*, INDEX.md coverage row 6).
AFFINITY_COLUMNS: dict[str, str] = {
    "CPU Affinity": "cpu_affinity",
    "NUMA Affinity": "numa_affinity",
    "GPU NUMA ID": "gpu_numa_id",
}

# Legend of ``topo -m`` (nvidia-smi's own legend text): X = self, NV# = bonded set of # NVLinks,
# PIX/PXB/PHB/NODE/SYS = PCIe paths of growing distance.
TOPOLOGY_VALUES = re.compile(r"^(?:X|NV\d+|PIX|PXB|PHB|NODE|SYS|SOC|PXN|C2C)$")
# Legend of ``topo -p2p``: OK, CNS chipset / GNS GPU / TNS topology not supported, NS, DR, U unknown.
P2P_VALUES = frozenset({"X", "OK", "CNS", "GNS", "TNS", "NS", "DR", "U"})
P2P_ONLY_VALUES = frozenset({"OK", "CNS", "GNS", "TNS", "NS", "DR"})

_NVLINK = re.compile(r"^NV(?P<count>\d+)$")
_DEVICE = re.compile(r"^(?:GPU\d+|NIC\d+|mlx\d+_\d+|ib\w*|eth\w*|en\w+|bnxt\w*|CPU\d+|NVS\w*)$")
# Names and cells that lost the tab between them in a web paste ("NIC8NIC9", "NODEPXB"): split back only where the
# whole token is such names or values end to end.
_GLUED_DEVICES = re.compile(r"(?:GPU|NIC|CPU)\d+|mlx\d+_\d+")
_GLUED_VALUES = re.compile(r"NV\d+|PIX|PXB|PHB|NODE|SYS|SOC|PXN|C2C|X")
_NIC_LEGEND = re.compile(r"^(?P<nic>NIC\d+)\s*:\s*(?P<device>\S+)$")
_LEGEND_ROW = re.compile(r"^\S+\s+=\s+.+$")
_AFFINITY_IN_HEADER = re.compile("|".join(re.escape(name) for name in AFFINITY_COLUMNS))
_NOISE = re.compile(r"^(?:[$#>]\s.*|.*\bnvidia-smi\s+topo\b.*|Legend:|NIC Legend:)$", re.IGNORECASE)
_MISSING = frozenset({"N/A", "", "-"})


@dataclass
class Device:
    name: str
    type: str  # gpu | nic | other
    device: str | None = None  # NIC legend: mlx5_0 ...


@dataclass
class TopologyResult:
    kind: str
    warnings: list[str]
    devices: list[Device]
    matrix: dict[str, dict[str, str]]
    cpu_affinity: dict[str, str | None]
    numa_affinity: dict[str, str | None]
    gpu_numa_id: dict[str, str | None] = field(default_factory=dict)
    mode: str | None = None  # "topology" (topo -m) or "p2p" (topo -p2p ...)


def _device_type(name: str) -> str:
    if name.startswith("GPU"):
        return "gpu"
    if name.startswith(("NIC", "mlx", "ib", "eth", "en", "bnxt")):
        return "nic"
    return "other"


def _header_columns(line: str) -> list[str] | None:
    """Column names of a matrix header line, or None when the line is not one."""
    columns: list[str] = []
    position = 0
    for match in _AFFINITY_IN_HEADER.finditer(line):
        columns.extend(line[position : match.start()].split())
        columns.append(match.group(0))
        position = match.end()
    columns.extend(line[position:].split())
    columns = _unglued(columns, _GLUED_DEVICES)
    devices = [column for column in columns if column not in AFFINITY_COLUMNS]
    if not devices or not all(_DEVICE.match(column) for column in devices):
        return None
    return columns if any(column.startswith("GPU") for column in devices) else None


@dataclass
class _Reader:
    warnings: list[str] = field(default_factory=list)
    columns: list[str] = field(default_factory=list)
    rows: dict[str, list[str]] = field(default_factory=dict)
    nic_names: dict[str, str] = field(default_factory=dict)
    legend_p2p: bool = False
    in_legend: bool = False

    def read(self, raw: str) -> None:
        line = raw.strip()
        if not line:
            return
        if line in ("Legend:", "NIC Legend:"):
            self.in_legend = True
            return
        nic = _NIC_LEGEND.match(line)
        if nic:
            self.nic_names[nic.group("nic")] = nic.group("device")
            return
        if _LEGEND_ROW.match(line):
            self.legend_p2p = self.legend_p2p or "Status Ok" in line or "not supported" in line.lower()
            return
        if _NOISE.match(line):
            return
        if not self.columns:
            header = _header_columns(line)
            if header:
                self.columns = header
                return
        tokens = line.split()
        if tokens and self.columns:
            tokens = tokens[:1] + _unglued(tokens[1:], _GLUED_VALUES)
        if self.columns and tokens and _DEVICE.match(tokens[0]) and not self.in_legend:
            if tokens[0] in self.rows:
                self.warnings.append(f"row {tokens[0]} repeated; keeping the first")
            else:
                self.rows[tokens[0]] = tokens[1:]
            return
        self.warnings.append(f"unrecognised line: {line[:200]}")


def _unglued(tokens: list[str], names: re.Pattern[str]) -> list[str]:
    """``tokens`` with each one made of two or more ``names`` end to end split into them."""
    out: list[str] = []
    for token in tokens:
        parts = names.findall(token)
        out.extend(parts if len(parts) > 1 and "".join(parts) == token else [token])
    return out


def _cell(value: str) -> str | None:
    return None if value in _MISSING else value


def _build(reader: _Reader) -> TopologyResult:
    device_columns = [column for column in reader.columns if column not in AFFINITY_COLUMNS]
    names = list(dict.fromkeys(device_columns + list(reader.rows)))
    devices = [Device(name, _device_type(name), reader.nic_names.get(name)) for name in names]
    matrix: dict[str, dict[str, str]] = {}
    affinity: dict[str, dict[str, str | None]] = {field_name: {} for field_name in AFFINITY_COLUMNS.values()}
    warnings = list(reader.warnings)
    for row_name, cells in reader.rows.items():
        if len(cells) > len(reader.columns):
            warnings.append(f"row {row_name} has {len(cells)} cells for {len(reader.columns)} columns")
        row: dict[str, str] = {}
        for column, value in zip(reader.columns, cells, strict=False):
            if column in AFFINITY_COLUMNS:
                affinity[AFFINITY_COLUMNS[column]][row_name] = _cell(value)
            else:
                row[column] = value
        matrix[row_name] = row
    missing_rows = [name for name in device_columns if name not in reader.rows]
    if reader.columns and missing_rows:
        warnings.append(f"matrix rows missing (truncated output?): {', '.join(missing_rows)}")
    if not reader.columns:
        warnings.append("no topology matrix header found")
    values = {value for row in matrix.values() for value in row.values()}
    mode = None
    if reader.columns:
        mode = "p2p" if reader.legend_p2p or values & P2P_ONLY_VALUES else "topology"
        known = P2P_VALUES if mode == "p2p" else None
        unknown = sorted(v for v in values if not (v in known if known else TOPOLOGY_VALUES.match(v)))
        if unknown:
            warnings.append(f"unknown matrix values: {', '.join(unknown)}")
    return TopologyResult(
        kind=KIND,
        warnings=warnings,
        devices=devices,
        matrix=matrix,
        cpu_affinity=affinity["cpu_affinity"],
        numa_affinity=affinity["numa_affinity"],
        gpu_numa_id=affinity["gpu_numa_id"],
        mode=mode,
    )


def parse(text: str) -> TopologyResult:
    """Parse ``nvidia-smi topo -m`` / ``topo -p2p`` output; never raises."""
    reader = _Reader()
    for raw in str(text).splitlines():
        reader.read(raw)
    return _build(reader)


def _gpu_pairs(result: TopologyResult) -> list[tuple[str, str, str | None]]:
    """Each unordered GPU pair with its matrix value (from either row), None if neither row shows it."""
    gpus = [device.name for device in result.devices if device.type == "gpu"]
    pairs = []
    for position, first in enumerate(gpus):
        for second in gpus[position + 1 :]:
            value = result.matrix.get(first, {}).get(second) or result.matrix.get(second, {}).get(first)
            pairs.append((first, second, value))
    return pairs


def facts(result: TopologyResult) -> dict[str, Any]:
    """Contract JSON plus gpu_pairs_without_nvlink, nvlink_all_pairs, gpu_count, nvlink_min_bonded.

    A p2p matrix says nothing about NVLink, so its NVLink facts are null; a pair no row shows
    (truncated output) is neither with nor without NVLink.
    """
    data = to_jsonable(result)
    pairs = _gpu_pairs(result)
    data["gpu_count"] = sum(1 for device in result.devices if device.type == "gpu")
    if result.mode != "topology":
        data["gpu_pairs_without_nvlink"] = None
        data["nvlink_all_pairs"] = None
        data["nvlink_min_bonded"] = None
        data["nvlink_gap_within_first"] = None
        return data
    without = [{"a": a, "b": b, "link": value} for a, b, value in pairs if value and not _NVLINK.match(value)]
    unknown = [pair for pair in pairs if pair[2] is None]
    bonded = [int(match.group("count")) for _, _, value in pairs if value and (match := _NVLINK.match(value))]
    data["gpu_pairs_without_nvlink"] = without
    if without:
        data["nvlink_all_pairs"] = False
    elif unknown or not pairs:
        data["nvlink_all_pairs"] = None
    else:
        data["nvlink_all_pairs"] = True
    data["nvlink_min_bonded"] = min(bonded) if bonded else None
    data["nvlink_gap_within_first"] = _nvlink_gap_within_first(result, without)
    return data


def _nvlink_gap_within_first(result: TopologyResult, without: list[dict[str, Any]]) -> int | None:
    """The smallest n whose first n GPUs (matrix order) hold a pair without NVLink: a tensor-parallel
    group on the first ``tp`` GPUs lacks NVLink when n <= tp. None when no GPU pair lacks NVLink."""
    order = {device.name: index for index, device in enumerate(d for d in result.devices if d.type == "gpu")}
    sizes = [
        max(order[pair["a"]], order[pair["b"]]) + 1 for pair in without if pair["a"] in order and pair["b"] in order
    ]
    return min(sizes) if sizes else None


COLLECTOR = Collector(**registered(KIND), commands=(("nvidia-smi", "topo", "-m"),), parse=parse, facts=facts)
