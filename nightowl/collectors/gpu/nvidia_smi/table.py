"""The default ``nvidia-smi`` table view (no options), read row by row into the nvidia-smi result shape."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Sequence

from nightowl.collectors.gpu.nvidia_smi.results import Gpu, GpuError, MigDevice
from nightowl.collectors.gpu.nvidia_smi.tree import clean, is_error_value, to_float, to_int
from nightowl.collectors.pci import normalize_pci

# ---------------------------------------------------------------------------------------------
# Default table view (`nvidia-smi` with no options), old 80-column and new 89-column layouts
# ---------------------------------------------------------------------------------------------

_PCI_ADDRESS = r"[0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-7]"
_TABLE_ROW_NAME = re.compile(
    r"^\|\s*(?P<index>\d+)\s+(?P<name>.*?)\s+(?P<persistence>\S+)\s*\|\s*(?P<bus>" + _PCI_ADDRESS + r")\s+"
    r"(?P<display>\S+)\s*\|\s*(?P<ecc>\S+)\s*\|"
)
_TABLE_ROW_USAGE = re.compile(
    r"^\|\s*(?P<fan>\S+)\s+(?P<temp>\S+)\s+(?P<perf>\S+)\s+(?P<power>\S+)\s*/\s*(?P<cap>\S+)\s*\|"
    r"\s*(?P<mem_used>\S+)\s*/\s*(?P<mem_total>\S+)\s*\|\s*(?P<util>\S+)\s+(?P<compute>.*?)\s*\|"
)
# Indented too: a table inside a larger report (TGI's `text-generation-launcher --env` indents it 3 spaces
# under unindented lines, so no common indentation is there for the normaliser to take off).
_TABLE_HEADER = re.compile(r"^[ \t]*\|\s*NVIDIA-SMI\s", re.MULTILINE)
# R590+ prints "KMD Version: X   CUDA UMD Version: Y" where older drivers print "Driver Version" /
# "CUDA Version" (docs.nvidia.com/deploy/nvidia-smi: "deprecated Driver Version and CUDA Version in favor
# of KMD Version and CUDA UMD Version"); the new keys are read first.
HEADER_DRIVER = re.compile(r"(?:KMD|Driver) Version:\s*(\S+)")
HEADER_CUDA = re.compile(r"CUDA (?:UMD )?Version:\s*(\S+)")
HEADER_KMD = re.compile(r"KMD Version:\s*(\S+)")
HEADER_CUDA_UMD = re.compile(r"CUDA UMD Version:\s*(\S+)")
# The Windows table puts the driver model (WDDM, TCC, MCDM) where Linux prints Persistence-M, under a
# "TCC/WDDM" or "Driver-Model" heading.
DRIVER_MODELS = frozenset({"wddm", "tcc", "mcdm"})
# Table column -> the name used in `errors[].field` when the cell reads "ERR!".
TABLE_COLUMNS = {
    "persistence": "Persistence-M",
    "display": "Disp.A",
    "ecc": "Volatile Uncorr. ECC",
    "fan": "Fan",
    "temp": "Temp",
    "perf": "Perf",
    "power": "Pwr:Usage",
    "cap": "Pwr:Cap",
    "mem_used": "Memory-Usage",
    "mem_total": "Memory-Usage",
    "util": "GPU-Util",
    "compute": "Compute M.",
    "name": "Name",
}
PERSISTENCE_WORDS = {"on": "Enabled", "off": "Disabled"}


def looks_like_table(text: str) -> bool:
    if "|" not in text:  # both the header and a GPU row start with "|": the common -q text is ruled out at once
        return False
    return bool(_TABLE_HEADER.search(text)) or any(
        line.lstrip().startswith("|") and _TABLE_ROW_NAME.match(line.strip()) for line in text.splitlines()
    )


def _table_gpu(first: re.Match[str], second: re.Match[str] | None) -> tuple[Gpu, list[GpuError]]:
    cells = dict(first.groupdict())
    if second is not None:
        cells.update(second.groupdict())
    pci = normalize_pci(cells["bus"])
    errors = [
        GpuError(pci=pci, message=f"{TABLE_COLUMNS.get(name, name)}: {value}", field=TABLE_COLUMNS.get(name, name))
        for name, value in cells.items()
        if is_error_value(value)
    ]
    persistence = clean(cells["persistence"])
    driver_model = None
    if (persistence or "").lower() in DRIVER_MODELS:
        driver_model, persistence = persistence, None
    gpu = Gpu(
        pci=pci,
        index=int(cells["index"]),
        name=clean(cells["name"]),
        persistence_mode=PERSISTENCE_WORDS.get((persistence or "").lower(), persistence),
        driver_model=driver_model,
        ecc_volatile_uncorrected_total=to_int(cells["ecc"]),
        fan_speed_percent=to_int(cells.get("fan")),
        temperature_gpu=to_int(cells.get("temp")),
        power_draw_w=to_float(cells.get("power")),
        memory_used_mib=to_int(cells.get("mem_used")),
        memory_total_mib=to_int(cells.get("mem_total")),
        utilization_gpu=to_int(cells.get("util")),
    )
    return gpu, errors


# The table's "MIG devices" section: GPU, GPU instance, compute instance and MIG device ids, memory, SM count and
# the instance's volatile uncorrectable ECC ("Vol Unc ECC"); the next row holds BAR1 usage.
_MIG_ROW = re.compile(
    r"^\|\s*(?P<gpu>\d+)\s+(?P<gi>\d+)\s+(?P<ci>\d+)\s+(?P<dev>\d+)\s*\|\s*(?P<used>\S+)\s*/\s*(?P<total>\S+)\s*\|"
    r"\s*(?P<sm>\d+)\s+(?P<ecc>\S+)\s*\|"
)


def mig_rows(lines: Sequence[str]) -> dict[int, list[MigDevice]]:
    """MIG devices of the table view by GPU index."""
    found: dict[int, list[MigDevice]] = {}
    for line in lines:
        row = _MIG_ROW.match(line.strip())
        if row is None:
            continue
        found.setdefault(int(row.group("gpu")), []).append(
            MigDevice(
                index=int(row.group("dev")),
                profile=None,
                gpu_instance_id=int(row.group("gi")),
                compute_instance_id=int(row.group("ci")),
                sram_uncorrectable_volatile=to_int(row.group("ecc")),
                memory_total_mib=to_int(row.group("total")),
            )
        )
    return found


def parse_table(lines: Sequence[str]) -> tuple[list[Gpu], list[GpuError]]:
    gpus: list[Gpu] = []
    errors: list[GpuError] = []
    for number, line in enumerate(lines):
        first = _TABLE_ROW_NAME.match(line.strip())
        if first is None:
            continue
        following = lines[number + 1].strip() if number + 1 < len(lines) else ""
        gpu, gpu_errors = _table_gpu(first, _TABLE_ROW_USAGE.match(following))
        gpus.append(gpu)
        errors.extend(gpu_errors)
    migs = mig_rows(lines)
    if migs:
        gpus = [
            dataclasses.replace(g, mig_mode="Enabled", mig_devices=tuple(migs[g.index])) if g.index in migs else g
            for g in gpus
        ]
    return gpus, errors


_RULE = re.compile(r"^\s*\+[-=+]+\+\s*$")


def table_closed(lines: Sequence[str]) -> bool:
    """Whether the GPU table reaches its closing rule: after the last GPU row's block a rule line comes, and
    then the Processes table, a blank line or the end. A paste cut inside the GPU rows does not."""
    last = max((n for n, line in enumerate(lines) if _TABLE_ROW_NAME.match(line.strip())), default=None)
    if last is None:
        return True
    after = [line for line in lines[last + 1 :]]
    for number, line in enumerate(after):
        if _RULE.match(line):
            rest = [rest_line for rest_line in after[number + 1 :] if rest_line.strip()]
            return not rest or not rest[0].lstrip().startswith("|") or "Processes" in rest[0] or "MIG" in rest[0]
    return False
