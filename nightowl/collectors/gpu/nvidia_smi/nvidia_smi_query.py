"""``nvidia-smi --query-gpu=... --format=csv[,noheader][,nounits]``: one row per GPU.

With a header line (``name, pci.bus_id, utilization.gpu [%]``) the columns name themselves; without
one they are the field list of the command that ran, so ``COLLECTOR`` fixes that list and
``parse`` falls back to it (or to the ``--query-gpu=`` list when the pasted command line shows it).
Units (``[%]`` in the header, ``81559 MiB`` in values) are stripped and numbers parsed.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from nightowl.collectors.base import Collector, registered, to_jsonable
from nightowl.collectors.gpu.nvidia_smi.tree import SHELL_PROMPT, clean, is_error_value, pcie_degraded, tool_failure
from nightowl.collectors.pci import find_pci, normalize_pci

KIND = "nvidia-smi-query"

DEFAULT_FIELDS: tuple[str, ...] = (
    "index",
    "pci.bus_id",
    "name",
    "uuid",
    "driver_version",
    "temperature.gpu",
    "utilization.gpu",
    "memory.total",
    "memory.used",
    "ecc.errors.uncorrected.volatile.total",
    "clocks_event_reasons.active",
    "pcie.link.gen.current",
    "pcie.link.gen.max",
    "pcie.link.width.current",
    "pcie.link.width.max",
)
QUERY_ARGUMENT = "--query-gpu=" + ",".join(DEFAULT_FIELDS)

# Query names accepted by --query-gpu -> the name nvidia-smi prints in the header
# (source: `nvidia-smi --help-query-gpu`, and the h100-vbios sample: gpu_name,gpu_bus_id -> name, pci.bus_id).
FIELD_ALIASES = {
    "gpu_name": "name",
    "gpu_bus_id": "pci.bus_id",
    "gpu_uuid": "uuid",
    "gpu_serial": "serial",
    "clocks_throttle_reasons.active": "clocks_event_reasons.active",
}
# Values kept as text even when they look numeric ("535.54" driver, "0x233010DE" device id).
TEXT_FIELDS = frozenset(
    {
        "name",
        "pci.bus_id",
        "uuid",
        "serial",
        "vbios_version",
        "driver_version",
        "pstate",
        "inforom.img",
        "inforom.oem",
        "inforom.ecc",
        "inforom.pwr",
        "compute_mode",
        "gpu_recovery_action",
    }
)
TEXT_PREFIXES = ("pci.", "inforom.", "mig.", "driver_model.", "display_", "persistence_mode", "compute_cap")
# Hex bit masks (NVML nvmlClocksEventReason*, docs/sources.md#nvidia-smi: clocks_event_reasons.active is
# the OR of the reason bits).
HEX_FIELDS = frozenset({"clocks_event_reasons.active", "clocks_event_reasons.supported"})
HW_SLOWDOWN_BITS = 0x8 | 0x40 | 0x80  # hw_slowdown, hw_thermal_slowdown, hw_power_brake_slowdown

_HEADER_CELL = re.compile(r"^(?P<name>[a-z][a-z0-9_.]*)(?:\s*\[(?P<unit>[^\]]*)\])?$")
_NUMBER = re.compile(r"^(?P<number>-?\d+(?:\.\d+)?)(?:\s*(?P<unit>%|[A-Za-z/]+))?$")
_QUERY_IN_LINE = re.compile(r"--query-gpu[= ](?P<fields>[\w.,]+)")


@dataclass(frozen=True)
class QueryError:
    pci: str | None
    index: int | None
    field: str | None
    message: str


@dataclass(frozen=True)
class QueryResult:
    kind: str
    warnings: tuple[str, ...]
    fields: tuple[str, ...]
    gpus: tuple[dict[str, Any], ...]
    errors: tuple[QueryError, ...]
    gpu_count: int
    units: dict[str, str] = field(default_factory=dict)
    header: bool = False


def _canonical_field(name: str) -> str:
    name = name.strip().lower()
    if name.startswith("clocks_throttle_reasons."):  # renamed clocks_event_reasons.* around R535, same bits
        name = "clocks_event_reasons." + name.removeprefix("clocks_throttle_reasons.")
    return FIELD_ALIASES.get(name, name)


def parse_header(line: str) -> tuple[list[str], dict[str, str]] | None:
    """Field names and units of a header line, or None when the line is data."""
    cells = [cell.strip() for cell in line.split(",")]
    matches = [_HEADER_CELL.match(cell) for cell in cells]
    if not all(matches):
        return None
    names = [_canonical_field(m.group("name")) for m in matches if m]
    if not any("." in n or "_" in n or n in ("name", "index", "uuid", "serial", "count") for n in names):
        return None
    units = {_canonical_field(m.group("name")): m.group("unit") for m in matches if m and m.group("unit")}
    return names, units


# A sweep parses every host's query every round, and most of its cells (names, UUIDs, bus ids, link widths) are
# the same each time: a short cell's value is remembered (a value is a str, number or None: nothing to share by
# mistake). A long one is not: a garbled output's megabyte-long cells would be held by the cache.
SHORT_CELL = 128


def convert(field_name: str, raw: str) -> tuple[Any, bool]:
    """(value, is_error): numbers parsed, N/A -> None, error tokens -> (None, True)."""
    if len(raw) > SHORT_CELL:
        return _convert(field_name, raw)
    return _remembered(field_name, raw)


@functools.lru_cache(maxsize=16384)
def _remembered(field_name: str, raw: str) -> tuple[Any, bool]:
    return _convert(field_name, raw)


def _convert(field_name: str, raw: str) -> tuple[Any, bool]:
    value = raw.strip()
    if is_error_value(value):  # the -q parser's vocabulary: error tokens -> null plus an error entry
        return None, True
    if clean(value) is None:  # N/A-like -> null
        return None, False
    if field_name in HEX_FIELDS:
        try:
            return int(value, 16), False
        except ValueError:
            return value, False
    if field_name in TEXT_FIELDS or field_name.startswith(TEXT_PREFIXES):
        return value, False
    number = _NUMBER.match(value)
    if number is None:
        return value, False
    text = number.group("number")
    return (float(text) if "." in text else int(text)), False


def _row(fields: Sequence[str], cells: Sequence[str]) -> tuple[dict[str, Any], list[QueryError]]:
    gpu: dict[str, Any] = {}
    failed: list[tuple[str, str]] = []
    for name, cell in zip(fields, cells, strict=False):
        value, is_error = convert(name, cell)
        gpu[name] = value
        if is_error:
            failed.append((name, cell.strip()))
    pci = normalize_pci(gpu.get("pci.bus_id")) if isinstance(gpu.get("pci.bus_id"), str) else None
    index = gpu.get("index") if isinstance(gpu.get("index"), int) else None
    errors = [QueryError(pci=pci, index=index, field=name, message=f"{name}: {raw}") for name, raw in failed]
    return gpu, errors


def _implausible(gpu: dict[str, Any]) -> str | None:
    """Why a CSV-shaped line is not a GPU row (pasted JSON, logs): None when it looks like one."""
    if "index" in gpu and not isinstance(gpu["index"], int) and gpu["index"] is not None:
        return "index is not a number"
    bus_id = gpu.get("pci.bus_id")
    if isinstance(bus_id, str) and normalize_pci(bus_id) is None:
        return "pci.bus_id is not a PCI address"
    if all(value is None or (isinstance(value, str) and not value.strip("{}[]()")) for value in gpu.values()):
        return "no values"
    return None


_ALIGNED = re.compile(r"\s{2,}")


def _is_noise(line: str) -> bool:
    return not line.strip() or bool(SHELL_PROMPT.match(line.strip()))


def _parse(text: str) -> QueryResult:
    fields: list[str] = list(DEFAULT_FIELDS)
    units: dict[str, str] = {}
    header_seen = False
    gpus: list[dict[str, Any]] = []
    errors: list[QueryError] = []
    warnings: list[str] = []
    aligned = named_fields = False
    for line in text.splitlines():
        query = _QUERY_IN_LINE.search(line)
        if query:  # the pasted command line: its field list applies until a header says otherwise
            fields = [_canonical_field(name) for name in query.group("fields").split(",") if name]
            named_fields = True
            continue
        if _is_noise(line):
            continue
        failure = tool_failure(line)
        if failure:
            errors.append(QueryError(pci=find_pci(line), index=None, field=None, message=failure))
            continue
        if not header_seen and not gpus:
            header = parse_header(line)
            if header is None and "," not in line:  # `| column -s, -t`: the columns aligned by spaces
                header = parse_header(",".join(_ALIGNED.split(line.strip())))
                aligned = header is not None
            if header is not None:
                fields, units = header
                header_seen = True
                continue
        cells = _ALIGNED.split(line.strip()) if aligned else line.split(",")
        if len(cells) != len(fields):
            loose = None if header_seen or named_fields else _loose_row(cells)
            if loose is not None:  # noheader output of fields nobody named: a GPU row all the same
                gpus.append(loose)
                continue
            warnings.append(f"unread line ({len(cells)} values for {len(fields)} fields): {line.strip()[:200]}")
            continue
        gpu, row_errors = _row(fields, cells)
        problem = _implausible(gpu)
        if problem:
            warnings.append(f"unread line ({problem}): {line.strip()[:200]}")
            continue
        gpus.append(gpu)
        errors.extend(row_errors)
    gpus = _latest_per_gpu(gpus)
    return QueryResult(
        kind=KIND,
        warnings=tuple(warnings[:50]),
        fields=tuple(fields),
        gpus=tuple(gpus),
        errors=tuple(errors),
        gpu_count=len(gpus),
        units=units,
        header=header_seen,
    )


def _latest_per_gpu(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One row per GPU: a query sampled in a loop (``-l 1``) prints each GPU again every interval; the GPU
    is its uuid, bus id or index (the last sample kept, in first-seen order). Rows naming none stay apart."""
    latest: dict[Any, dict[str, Any]] = {}
    for number, row in enumerate(rows):
        key = next((row.get(name) for name in ("uuid", "pci.bus_id", "index") if row.get(name) is not None), None)
        latest[key if key is not None else ("row", number)] = row
    return list(latest.values())


# Cells of a GPU row whatever its fields: a product name, a UUID or a PCI bus id.
_GPU_CELL = re.compile(
    r"(?i)\b(?:nvidia|tesla|geforce|quadro|titan|rtx)\b|^\s*GPU-[0-9a-f-]{8,}|^\s*[0-9a-f]{4,8}:[0-9a-f]{2}:[0-9a-f]{2}\.\d"
)


_UUID_CELL = re.compile(r"(?i)^GPU-[0-9a-f-]{8,}$")
_BUS_CELL = re.compile(r"(?i)^[0-9a-f]{4,8}:[0-9a-f]{2}:[0-9a-f]{2}\.\d$")


def _loose_row(cells: Sequence[str]) -> dict[str, Any] | None:
    """A noheader row of fields nobody named, when one of its cells is a GPU's name, UUID or bus id. The
    UUID or bus id cell names the GPU too, so a query sampled in a loop counts each GPU once."""
    if not any(_GPU_CELL.search(cell) for cell in cells):
        return None
    row: dict[str, Any] = {f"column_{number}": cell.strip() for number, cell in enumerate(cells, start=1)}
    for cell in (cell.strip() for cell in cells):
        if "uuid" not in row and _UUID_CELL.match(cell):
            row["uuid"] = cell
        elif "pci.bus_id" not in row and _BUS_CELL.match(cell) and normalize_pci(cell) is not None:
            row["pci.bus_id"] = cell
    return row


def parse(text: str) -> QueryResult:
    """Parse ``--query-gpu`` CSV output. Pure; never raises."""
    try:
        return _parse(text if isinstance(text, str) else str(text))
    except Exception as exc:  # noqa: BLE001 - last line of defence: a result with a warning, not a crash
        return QueryResult(
            kind=KIND,
            warnings=(f"nvidia-smi-query parser error: {type(exc).__name__}: {exc}",),
            fields=(),
            gpus=(),
            errors=(),
            gpu_count=0,
        )


# ---------------------------------------------------------------------------------------------
# facts: same key names as the nvidia-smi collector where the meaning is the same
# ---------------------------------------------------------------------------------------------


def gpu_id(gpu: dict[str, Any]) -> str | int | None:
    """The normalised PCI address when the query has one, else the index, else None."""
    bus_id = gpu.get("pci.bus_id")
    pci = normalize_pci(bus_id) if isinstance(bus_id, str) else None
    if pci is not None:
        return pci
    index = gpu.get("index")
    return index if isinstance(index, int) else None


def _number(gpu: dict[str, Any], name: str) -> float | None:
    value = gpu.get(name)
    return value if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _pcie_degraded(gpu: dict[str, Any]) -> bool:
    fields = (
        "utilization.gpu",
        "pcie.link.gen.current",
        "pcie.link.gen.max",
        "pcie.link.width.current",
        "pcie.link.width.max",
    )
    return pcie_degraded(*(_number(gpu, name) for name in fields))


def _uncorrectable(gpu: dict[str, Any]) -> bool:
    names = (
        "ecc.errors.uncorrected.volatile.total",
        "ecc.errors.uncorrected.volatile.dram",
        "ecc.errors.uncorrected.volatile.sram",
    )
    return any((_number(gpu, n) or 0) > 0 for n in names)


def _hw_slowdown(gpu: dict[str, Any]) -> bool:
    mask = gpu.get("clocks_event_reasons.active")
    return isinstance(mask, int) and bool(mask & HW_SLOWDOWN_BITS)


def _ids(gpus: Iterable[dict[str, Any]]) -> list[str | int | None]:
    return [gpu_id(g) for g in gpus]


def facts(result: QueryResult) -> dict[str, Any]:
    data: dict[str, Any] = to_jsonable(result)
    gpus = result.gpus
    recovery = {
        str(gpu_id(g)): g["gpu_recovery_action"]
        for g in gpus
        if isinstance(g.get("gpu_recovery_action"), str) and g["gpu_recovery_action"].lower() != "none"
    }
    data.update(
        error_count=len(result.errors),
        gpus_with_field_errors=list(
            dict.fromkeys(e.pci if e.pci is not None else e.index for e in result.errors if e.field is not None)
        ),
        dram_uncorrectable_volatile_gpus=_ids(g for g in gpus if _uncorrectable(g)),
        hw_slowdown_gpus=_ids(g for g in gpus if _hw_slowdown(g)),
        pcie_degraded_gpus=_ids(g for g in gpus if _pcie_degraded(g)),
        recovery_actions=recovery,
        gpu_names=sorted({g["name"] for g in gpus if isinstance(g.get("name"), str)}),
    )
    return data


COLLECTOR = Collector(
    **registered(KIND),
    commands=(("nvidia-smi", QUERY_ARGUMENT, "--format=csv,noheader,nounits"),),
    parse=parse,
    facts=facts,
)
