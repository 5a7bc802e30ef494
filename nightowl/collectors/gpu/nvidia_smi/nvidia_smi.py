"""``nvidia-smi -q`` / ``-q -x`` (and the default table view): per-GPU health (docs/reference.md#parse-output).

Both report formats are first turned into one tree of labelled nodes (text ``-q`` by indentation,
XML by element nesting) and every field is then read through alias tables that name the text label
and the XML tag of each driver generation. The plain ``nvidia-smi`` table, which operators paste
as often as ``-q``, is read row by row into the same result shape; what it does not show is null.
The tree and the value helpers live in ``tree``, the table reader in ``table``, the result types in
``results``; this module holds the GPU field tables, ``parse``, ``facts`` and ``COLLECTOR``.

Choices the contract leaves open, stated once here:

- ``gpu_count`` is the number of GPUs the output says it lists: ``Attached GPUs`` /
  ``<attached_gpus>`` when printed (a trimmed ``-q`` still says 8 even if one block follows), else
  the number of GPU blocks or table rows. When the tool printed only an error ("No devices were
  found", "Unable to determine the device handle ...") it listed 0 GPUs. A fragment without any GPU
  header (a pasted ``ECC Errors`` block) or text that is not nvidia-smi output gives null.
- A fragment without a GPU header is read as one GPU with ``pci`` null.
- ``errors`` entries carry an extra ``field``: null when the whole tool or a whole GPU could not be
  read, else the label path of the one value that read as an error ("Unknown Error", "ERR!").
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from typing import Any

from nightowl.collectors.base import Collector, parsed_once, registered, to_jsonable
from nightowl.collectors.gpu.nvidia_smi.cheap import FULL_ARGVS, CheapFirst
from nightowl.collectors.gpu.nvidia_smi.listing import looks_like_listing, parse_listing
from nightowl.collectors.gpu.nvidia_smi.results import (
    BankHistogram,
    Ecc,
    EccCounts,
    Gpu,
    GpuError,
    MigDevice,
    NvidiaSmiResult,
    Pcie,
    RemappedRows,
    RetiredPages,
    UnplacedCounter,
)
from nightowl.collectors.gpu.nvidia_smi.table import (
    HEADER_CUDA,
    HEADER_CUDA_UMD,
    HEADER_DRIVER,
    HEADER_KMD,
    looks_like_table,
    parse_table,
    table_closed,
)
from nightowl.collectors.gpu.nvidia_smi.tree import (
    GPU_KEY,
    Node,
    Path,
    build_text_tree,
    build_xml_tree,
    canon,
    clean,
    is_error_value,
    lookup,
    may_hold_tool_failure,
    pcie_degraded,
    raw_value,
    to_bool,
    to_float,
    to_int,
    tool_failure,
    walk,
)
from nightowl.collectors.pci import find_pci, normalize_pci

KIND = "nvidia-smi"
MAX_WARNINGS = 50
# A GPU with more error-valued fields than this is treated as unreadable, not as one flaky sensor:
# the V100 sample (INDEX.md, "Host Max : Unknown Error") is healthy with one such field.
MAX_ISOLATED_FIELD_ERRORS = 3

# ---------------------------------------------------------------------------------------------
# Field tables: (text label path, XML tag path, older layouts...), keys in canonical form
# ---------------------------------------------------------------------------------------------

NAME: Path = (("product_name",),)
UUID: Path = (("gpu_uuid", "uuid"),)
SERIAL: Path = (("serial_number", "serial"),)
VBIOS: Path = (("vbios_version",),)
PERSISTENCE: Path = (("persistence_mode",),)
RECOVERY_ACTION: Path = (("gpu_recovery_action",),)  # R550+ text and DTD v12+ XML
BUS_ID: Path = (("pci",), ("bus_id", "pci_bus_id"))
UTILIZATION: Path = (("utilization",), ("gpu", "gpu_util"))
TEMPERATURE: Path = (("temperature",), ("gpu_current_temp", "gpu_temp"))
FB_TOTAL: Path = (("fb_memory_usage",), ("total",))
FB_USED: Path = (("fb_memory_usage",), ("used",))
POWER_DRAW: tuple[Path, ...] = (
    (("gpu_power_readings", "power_readings"), ("power_draw",)),
    (("gpu_power_readings", "power_readings"), ("instant_power_draw",)),
    (("gpu_power_readings", "power_readings"), ("average_power_draw",)),
)
FAN_SPEED: Path = (("fan_speed",),)
RESET_REQUIRED: Path = (("gpu_reset_status",), ("reset_required",))
DRAIN_AND_RESET: Path = (("gpu_reset_status",), ("drain_and_reset_recommended",))
FABRIC_STATE: Path = (("fabric",), ("state",))
FABRIC_STATUS: Path = (("fabric",), ("status",))
SRAM_THRESHOLD: Path = (("ecc_errors",), ("aggregate",), ("sram_threshold_exceeded",))
DRIVER_MODEL: Path = (("driver_model",), ("current", "current_dm"))
# "GPU Virtualization Mode / Virtualization Mode : Pass-Through" (XML <gpu_virtualization_mode><virtualization_mode>):
# None on bare metal, Pass-Through or VGPU in a virtual machine (nvidia-smi(1), -q).
VIRTUALIZATION_MODE: Path = (("gpu_virtualization_mode",), ("virtualization_mode",))
# R590+: "KMD Version" / "CUDA UMD Version" replace "Driver Version" / "CUDA Version", which stay for a
# while with a note ("610.47 [Deprecated; will be removed in CUDA 14.0. Use KMD Version instead]"):
# the new keys first, the note stripped (docs.nvidia.com/deploy/nvidia-smi, "Modified version information").
DRIVER_VERSION: tuple[Path, ...] = ((("kmd_version",),), (("driver_version",),))
CUDA_VERSION: tuple[Path, ...] = ((("cuda_umd_version",),), (("cuda_version",),))
# NVML nvmlDeviceGetRepairStatus (R590+): a TPC or channel repair waits for the next GPU reset.
REPAIR_KEYS = {"channel_repair_pending": "channel_repair_pending", "tpc_repair_pending": "tpc_repair_pending"}
# MIG (nvidia-smi -q "MIG Mode" / "MIG Devices", XML <mig_mode>/<mig_devices><mig_device>; NVIDIA MIG user guide,
# https://docs.nvidia.com/datacenter/tesla/mig-user-guide/): each MIG device has its own ECC and BAR1 sections.
MIG_CURRENT: Path = (("mig_mode",), ("current", "current_mig"))
MIG_PENDING: Path = (("mig_mode",), ("pending", "pending_mig"))
MIG_DEVICES = ("mig_devices",)
MIG_GI: Path = (("gpu_instance_id",),)
MIG_CI: Path = (("compute_instance_id",),)
MIG_INDEX: Path = (("index",),)
MIG_ECC_VOLATILE: Path = (("ecc_errors", "ecc_error_count"), ("volatile", "volatile_count"))
MIG_FB_TOTAL: Path = (("fb_memory_usage",), ("total",))
MIG_BAR1_TOTAL: Path = (("bar1_memory_usage",), ("total",))
_MIG_HEADER = re.compile(r"MIG\s+(?P<profile>\S+)\s+Device\s+(?P<index>\d+)")
_BRACKETED_NOTE = re.compile(r"\s*\[[^\]]*\]\s*$")

_LINK = (("pci",), ("gpu_link_info", "pci_gpu_link_info"))
GEN_MAX: Path = (*_LINK, ("pcie_generation", "pcie_gen"), ("max", "max_link_gen"))
GEN_CURRENT: Path = (*_LINK, ("pcie_generation", "pcie_gen"), ("current", "current_link_gen"))
WIDTH_MAX: Path = (*_LINK, ("link_width", "link_widths"), ("max", "max_link_width"))
WIDTH_CURRENT: Path = (*_LINK, ("link_width", "link_widths"), ("current", "current_link_width"))
REPLAYS: Path = (("pci",), ("replays_since_reset", "replay_counter"))

ECC_SECTION = ("ecc_errors",)
ECC_SCOPES = {"volatile": ("volatile",), "aggregate": ("aggregate",)}
# R450+ layout (docs/sources.md#nvidia-smi): one counter per memory kind; R535+ splits SRAM uncorrectable.
SRAM_CORRECTABLE = ("sram_correctable",)
SRAM_UNCORRECTABLE = ("sram_uncorrectable",)  # single counter, drivers before the split
SRAM_UNCORRECTABLE_PARTS = (
    ("sram_uncorrectable_parity",),
    ("sram_uncorrectable_sec_ded", "sram_uncorrectable_secded"),
)
DRAM_CORRECTABLE = ("dram_correctable",)
DRAM_UNCORRECTABLE = ("dram_uncorrectable",)
# Volta-and-older layout (nvsmi-q-v100-...: "Single Bit"/"Double Bit" per memory location).
# dram_* = "Device Memory" (the DRAM counter). "Total" is NOT used for DRAM: it also counts the
# on-chip locations. sram_* = sum of the on-chip locations that show a number (null if none does).
VOLTA_BITS = {"correctable": ("single_bit",), "uncorrectable": ("double_bit",)}
VOLTA_DRAM = ("device_memory",)
VOLTA_SRAM = (
    ("register_file",),
    ("l1_cache",),
    ("l2_cache",),
    ("texture_memory",),
    ("texture_shared", "texture_shm"),
    ("cbu",),
)

RETIRED_SECTION = ("retired_pages",)
RETIRED_SINGLE: tuple[Path, ...] = (
    (("single_bit_ecc",),),
    (("multiple_single_bit_retirement",), ("retired_count",)),
)
RETIRED_DOUBLE: tuple[Path, ...] = ((("double_bit_ecc",),), (("double_bit_retirement",), ("retired_count",)))
RETIRED_PENDING = ("pending_page_blacklist", "pending_blacklist", "pending_retirement", "pending")

REMAP_SECTION = ("remapped_rows",)
REMAP_CORRECTABLE: Path = (("correctable_error", "remapped_row_corr"),)
REMAP_UNCORRECTABLE: Path = (("uncorrectable_error", "remapped_row_unc"),)
REMAP_PENDING: Path = (("pending", "remapped_row_pending"),)
REMAP_FAILURE: Path = (("remapping_failure_occurred", "remapped_row_failure"),)
REMAP_HISTOGRAM = ("bank_remap_availability_histogram", "row_remapper_histogram")
HISTOGRAM_BUCKETS = ("max", "high", "partial", "low", "none")

# "Clocks Throttle Reasons" became "Clocks Event Reasons" around R535 (docs/sources.md#nvidia-smi);
# XML tags carry the prefix clocks_throttle_reason_ / clocks_event_reason_ (DTD v11 / v12+).
REASON_SECTIONS = ("clocks_event_reasons", "clocks_throttle_reasons")
REASON_PREFIXES = ("clocks_event_reason_", "clocks_throttle_reason_")
REASON_NAMES = {  # label or tag suffix -> contract name (bit names of clocks_event_reasons.*)
    "idle": "gpu_idle",
    "gpu_idle": "gpu_idle",
    "applications_clocks_setting": "applications_clocks_setting",
    "sw_power_cap": "sw_power_cap",
    "hw_slowdown": "hw_slowdown",
    "hw_thermal_slowdown": "hw_thermal_slowdown",
    "hw_power_brake_slowdown": "hw_power_brake_slowdown",
    "sync_boost": "sync_boost",
    "sw_thermal_slowdown": "sw_thermal_slowdown",
    "display_clock_setting": "display_clock_setting",
    "display_clocks_setting": "display_clock_setting",
}
# R580 text "Clocks Event Reasons Counters" (cubecos312 sample) and DTD v13 XML counters.
COUNTER_SECTIONS = ("clocks_event_reasons_counters",)
COUNTER_NAMES = {
    "sw_power_capping": "sw_power_cap",
    "clocks_event_reasons_counters_sw_power_cap": "sw_power_cap",
    "sync_boost": "sync_boost",
    "clocks_event_reasons_counters_sync_boost": "sync_boost",
    "sw_thermal_slowdown": "sw_thermal_slowdown",
    "clocks_event_reasons_counters_sw_therm_slowdown": "sw_thermal_slowdown",
    "hw_thermal_slowdown": "hw_thermal_slowdown",
    "clocks_event_reasons_counters_hw_therm_slowdown": "hw_thermal_slowdown",
    "hw_power_braking": "hw_power_brake_slowdown",
    "clocks_event_reasons_counters_hw_power_brake": "hw_power_brake_slowdown",
}

# Root-level keys that show a headerless fragment is one GPU's block.
GPU_SECTION_KEYS = frozenset(
    {
        "product_name",
        "gpu_uuid",
        "ecc_errors",
        "remapped_rows",
        "retired_pages",
        "pci",
        "utilization",
        "fb_memory_usage",
        "temperature",
        "gpu_recovery_action",
        "performance_state",
        *REASON_SECTIONS,
    }
)

# ---------------------------------------------------------------------------------------------
# Tree -> Gpu
# ---------------------------------------------------------------------------------------------


def _sum_known(values: Iterable[int | None]) -> int | None:
    known = [v for v in values if v is not None]
    return sum(known) if known else None


def _ecc_counts(scope: Node | None) -> EccCounts:
    if scope is None:
        return EccCounts()
    if any(scope.child(bits) for bits in VOLTA_BITS.values()):
        return _volta_counts(scope)
    sram_uncorrectable = to_int(raw_value(scope, (SRAM_UNCORRECTABLE,)))
    if sram_uncorrectable is None:  # R535+: parity + SEC-DED, summed (docs/reference.md#parse-output)
        sram_uncorrectable = _sum_known(to_int(raw_value(scope, (part,))) for part in SRAM_UNCORRECTABLE_PARTS)
    return EccCounts(
        dram_correctable=to_int(raw_value(scope, (DRAM_CORRECTABLE,))),
        dram_uncorrectable=to_int(raw_value(scope, (DRAM_UNCORRECTABLE,))),
        sram_correctable=to_int(raw_value(scope, (SRAM_CORRECTABLE,))),
        sram_uncorrectable=sram_uncorrectable,
    )


def _volta_counts(scope: Node) -> EccCounts:
    counts: dict[str, int | None] = {}
    for kind, aliases in VOLTA_BITS.items():
        bits = scope.child(aliases)
        counts[f"dram_{kind}"] = to_int(raw_value(bits, (VOLTA_DRAM,)))
        counts[f"sram_{kind}"] = _sum_known(to_int(raw_value(bits, (location,))) for location in VOLTA_SRAM)
    return EccCounts(**counts)


def _ecc(gpu: Node) -> Ecc:
    section = gpu.child(ECC_SECTION)
    if section is None:
        return Ecc()
    return Ecc(
        volatile=_ecc_counts(section.child(ECC_SCOPES["volatile"])),
        aggregate=_ecc_counts(section.child(ECC_SCOPES["aggregate"])),
    )


def _all_null(*values: object) -> bool:
    return all(v is None for v in values)


def _remapped_rows(gpu: Node) -> RemappedRows | None:
    section = gpu.child(REMAP_SECTION)
    if section is None:
        return None
    histogram_node = section.child(REMAP_HISTOGRAM)
    histogram = None
    if histogram_node is not None:
        buckets = {
            canon(n.key).removeprefix("row_remapper_histogram_"): to_int(n.value) for n in histogram_node.children
        }
        histogram = BankHistogram(**{b: buckets.get(b) for b in HISTOGRAM_BUCKETS})
    rows = RemappedRows(
        correctable=to_int(raw_value(section, REMAP_CORRECTABLE)),
        uncorrectable=to_int(raw_value(section, REMAP_UNCORRECTABLE)),
        pending=to_bool(raw_value(section, REMAP_PENDING)),
        failure=to_bool(raw_value(section, REMAP_FAILURE)),
        bank_histogram=histogram,
    )
    # "Remapped Rows : N/A" (pre-Ampere) or every counter N/A: the GPU has no row remapper.
    return None if _all_null(rows.correctable, rows.uncorrectable, rows.pending, rows.failure) else rows


def _retired_pages(gpu: Node) -> RetiredPages | None:
    section = gpu.child(RETIRED_SECTION)
    if section is None:
        return None
    pending_flags = [to_bool(n.value) for n in section.children if n.key in RETIRED_PENDING]
    known_flags = [flag for flag in pending_flags if flag is not None]
    pages = RetiredPages(
        single_bit=to_int(raw_value(section, *RETIRED_SINGLE)),
        double_bit=to_int(raw_value(section, *RETIRED_DOUBLE)),
        pending=any(known_flags) if known_flags else None,
    )
    # Ampere+ prints the section with every value N/A: page retirement does not apply.
    return None if _all_null(pages.single_bit, pages.double_bit, pages.pending) else pages


def _reason_name(key: str) -> str:
    for prefix in REASON_PREFIXES:
        key = key.removeprefix(prefix)
    return REASON_NAMES.get(key, key)


def _active_reasons(gpu: Node) -> tuple[str, ...] | None:
    section = gpu.child(REASON_SECTIONS)
    if section is None or (not section.children and clean(section.value) is None):
        return None
    # Walk the whole section: text -q nests "HW Thermal Slowdown" under "HW Slowdown".
    return tuple(_reason_name(n.key) for n in walk(section) if to_bool(n.value) is True)


def _reason_counters(gpu: Node) -> dict[str, int | None] | None:
    section = gpu.child(COUNTER_SECTIONS)
    if section is None:
        return None
    return {COUNTER_NAMES.get(n.key, n.key): to_int(n.value) for n in section.children if n.value is not None}


def version(root: Node, paths: Sequence[Path]) -> str | None:
    """The first of ``paths`` that holds a version, its bracketed note (``[Deprecated; ...]``) removed."""
    for path in paths:
        raw = raw_value(root, path)
        if raw is None:
            continue
        value = clean(_BRACKETED_NOTE.sub("", raw)) if not raw.strip().startswith("[") else None
        if value is not None:
            return value
    return None


def _mig_devices(gpu: Node) -> tuple[MigDevice, ...]:
    section = gpu.child(MIG_DEVICES)
    if section is None:
        return ()
    devices = []
    for node in section.children:
        if not node.children:
            continue  # "None" (MIG off) or a stray value
        header = _MIG_HEADER.search(node.label)
        ecc = lookup(node, MIG_ECC_VOLATILE)
        index = to_int(raw_value(node, MIG_INDEX))
        devices.append(
            MigDevice(
                index=index if index is not None else (int(header.group("index")) if header else None),
                profile=header.group("profile") if header else None,
                gpu_instance_id=to_int(raw_value(node, MIG_GI)),
                compute_instance_id=to_int(raw_value(node, MIG_CI)),
                sram_uncorrectable_volatile=_ecc_counts(ecc).sram_uncorrectable if ecc else None,
                dram_uncorrectable_volatile=_ecc_counts(ecc).dram_uncorrectable if ecc else None,
                sram_correctable_volatile=_ecc_counts(ecc).sram_correctable if ecc else None,
                memory_total_mib=to_int(raw_value(node, MIG_FB_TOTAL)),
                bar1_total_mib=to_int(raw_value(node, MIG_BAR1_TOTAL)),
            )
        )
    return tuple(devices)


def _first_float(gpu: Node, paths: Sequence[Path]) -> float | None:
    for path in paths:
        value = to_float(raw_value(gpu, path))
        if value is not None:
            return value
    return None


def _scan_values(gpu: Node, pci: str | None) -> tuple[list[GpuError], dict[str, bool | None]]:
    """Every value of the GPU's block, read in one pass in document order: one error entry per value that reads
    as an error, named by its label path ("PCI > ... > Host Max"), and the repair flags (the last one printed)."""
    errors = []
    repairs: dict[str, bool | None] = dict.fromkeys(REPAIR_KEYS.values())
    # (node, its parent's entry): the label path is rebuilt only for an error, from its last levels, so a
    # deeply nested (hostile or truncated) document costs linear time, not a copied path per node.
    Entry = tuple[Node, Any]
    pending: list[Entry] = [(child, None) for child in reversed(gpu.children)]
    while pending:
        entry = pending.pop()
        node = entry[0]
        if node.value is not None:
            if is_error_value(node.value):
                name = _label_path(entry)
                errors.append(GpuError(pci=pci, message=f"{name}: {node.value.strip()}", field=name))
            repair = REPAIR_KEYS.get(node.key)
            if repair is not None:
                repairs[repair] = to_bool(node.value)
        if node.children:  # most nodes are leaves: no generator for them
            pending.extend((child, entry) for child in reversed(node.children))
    return errors, repairs


_MAX_LABEL_DEPTH = 12  # nvidia-smi nests 4 deep; deeper paths are cut from the top


def _label_path(entry: tuple[Node, Any]) -> str:
    labels: list[str] = []
    current: Any = entry
    while current is not None and len(labels) < _MAX_LABEL_DEPTH:
        labels.append(current[0].label)
        current = current[1]
    return " > ".join(reversed(labels))


def gpu_from_node(gpu: Node) -> tuple[Gpu, list[GpuError]]:
    pci = normalize_pci(clean(raw_value(gpu, BUS_ID))) or normalize_pci(gpu.value)
    errors, repairs = _scan_values(gpu, pci)
    if not any(child.value is not None for child in walk(gpu)):
        errors.append(GpuError(pci=pci, message="GPU listed but its block has no readable fields"))
    record = Gpu(
        pci=pci,
        name=clean(raw_value(gpu, NAME)),
        uuid=clean(raw_value(gpu, UUID)),
        ecc=_ecc(gpu),
        remapped_rows=_remapped_rows(gpu),
        retired_pages=_retired_pages(gpu),
        pcie=Pcie(
            gen_current=to_int(raw_value(gpu, GEN_CURRENT)),
            gen_max=to_int(raw_value(gpu, GEN_MAX)),
            width_current=to_int(raw_value(gpu, WIDTH_CURRENT)),
            width_max=to_int(raw_value(gpu, WIDTH_MAX)),
            replays_since_reset=to_int(raw_value(gpu, REPLAYS)),
        ),
        clocks_event_reasons_active=_active_reasons(gpu),
        recovery_action=clean(raw_value(gpu, RECOVERY_ACTION)),
        serial=clean(raw_value(gpu, SERIAL)),
        vbios_version=clean(raw_value(gpu, VBIOS)),
        persistence_mode=clean(raw_value(gpu, PERSISTENCE)),
        utilization_gpu=to_int(raw_value(gpu, UTILIZATION)),
        temperature_gpu=to_int(raw_value(gpu, TEMPERATURE)),
        memory_total_mib=to_int(raw_value(gpu, FB_TOTAL)),
        memory_used_mib=to_int(raw_value(gpu, FB_USED)),
        power_draw_w=_first_float(gpu, POWER_DRAW),
        fan_speed_percent=to_int(raw_value(gpu, FAN_SPEED)),
        sram_threshold_exceeded=to_bool(raw_value(gpu, SRAM_THRESHOLD)),
        reset_required=to_bool(raw_value(gpu, RESET_REQUIRED)),
        drain_and_reset_recommended=to_bool(raw_value(gpu, DRAIN_AND_RESET)),
        fabric_state=clean(raw_value(gpu, FABRIC_STATE)),
        fabric_status=clean(raw_value(gpu, FABRIC_STATUS)),
        clocks_event_reasons_counters_us=_reason_counters(gpu),
        driver_model=clean(raw_value(gpu, DRIVER_MODEL)),
        virtualization_mode=clean(raw_value(gpu, VIRTUALIZATION_MODE)),
        mig_mode=clean(raw_value(gpu, MIG_CURRENT)),
        mig_mode_pending=clean(raw_value(gpu, MIG_PENDING)),
        mig_devices=_mig_devices(gpu),
        **repairs,
    )
    return record, errors


# ---------------------------------------------------------------------------------------------
# parse
# ---------------------------------------------------------------------------------------------


def _tool_errors(lines: Iterable[str]) -> list[GpuError]:
    errors = []
    for line in lines:
        message = tool_failure(line)
        if message:
            errors.append(GpuError(pci=find_pci(message) or find_pci(line), message=message))
    return errors


def _dedupe(errors: Iterable[GpuError]) -> tuple[GpuError, ...]:
    seen: dict[tuple[str | None, str], GpuError] = {}
    for error in errors:
        seen.setdefault((error.pci, error.message), error)
    return tuple(seen.values())


def _capped(warnings: list[str]) -> tuple[str, ...]:
    if len(warnings) <= MAX_WARNINGS:
        return tuple(warnings)
    return (*warnings[:MAX_WARNINGS], f"... and {len(warnings) - MAX_WARNINGS} more unread lines")


def _unplaced(root: Node) -> tuple[UnplacedCounter, ...]:
    return tuple(
        UnplacedCounter(field=n.label, value=to_int(n.value))
        for n in root.children
        if n.value is not None and "correctable" in n.key
    )


def _from_tree(root: Node, source_format: str, warnings: list[str], tool_errors: list[GpuError]) -> NvidiaSmiResult:
    gpu_nodes = [n for n in root.children if n.key == GPU_KEY]
    headerless = not gpu_nodes and any(n.key in GPU_SECTION_KEYS for n in root.children)
    if headerless:
        gpu_nodes = [root]
    gpus: list[Gpu] = []
    errors: list[GpuError] = list(tool_errors)
    for node in gpu_nodes:
        gpu, gpu_errors = gpu_from_node(node)
        gpus.append(gpu)
        errors.extend(gpu_errors)
    unplaced = () if gpu_nodes else _unplaced(root)
    if unplaced:
        warnings.append(
            "counter lines outside any GPU/ECC section (volatile or aggregate unknown): see unplaced_counters"
        )
    attached = to_int(raw_value(root, (("attached_gpus",),)))
    driver_version = version(root, DRIVER_VERSION)
    recognised = bool(gpu_nodes) or bool(tool_errors) or driver_version is not None
    if attached is not None:
        gpu_count: int | None = attached
    elif headerless or not recognised:
        gpu_count = None
    else:
        gpu_count = len(gpus)
    return NvidiaSmiResult(
        kind=KIND,
        listing_complete=attached is None or len(gpus) >= attached or not gpus,
        warnings=_capped(warnings),
        driver_version=driver_version,
        cuda_version=version(root, CUDA_VERSION),
        gpu_count=gpu_count,
        gpus=tuple(gpus),
        errors=_dedupe(errors),
        source_format=source_format,
        unplaced_counters=unplaced,
    )


def _from_table(text: str, lines: list[str], tool_errors: list[GpuError]) -> NvidiaSmiResult:
    gpus, errors = parse_table(lines)
    driver = HEADER_KMD.search(text) or HEADER_DRIVER.search(text)
    cuda = HEADER_CUDA_UMD.search(text) or HEADER_CUDA.search(text)
    return NvidiaSmiResult(
        kind=KIND,
        warnings=() if table_closed(lines) else ("the GPU table ends before its closing rule: the paste was cut",),
        driver_version=clean(driver.group(1)) if driver else None,
        cuda_version=clean(cuda.group(1)) if cuda else None,
        gpu_count=len(gpus),
        gpus=tuple(gpus),
        errors=_dedupe([*tool_errors, *errors]),
        source_format="table",
        listing_complete=table_closed(lines),
    )


def _parse(text: str) -> NvidiaSmiResult:
    if "\u2018" in text or "\u2019" in text:  # a paste's typographic apostrophe ("couldn‘t", qixuema/envs#4)
        text = text.replace("\u2018", "'").replace("\u2019", "'")
    # One scan of the whole text spares the per-line failure checks on almost every output.
    check_failures = may_hold_tool_failure(text)
    tool_errors = _tool_errors(text.splitlines()) if check_failures else []
    if "<nvidia_smi_log" in text:
        root, warnings = build_xml_tree(text)
        return _from_tree(root, "xml", warnings, tool_errors)
    lines = text.splitlines()
    if looks_like_table(text):
        return _from_table(text, lines, tool_errors)
    if looks_like_listing(lines):
        gpus = parse_listing(lines)
        return NvidiaSmiResult(
            kind=KIND,
            warnings=(),
            driver_version=None,
            cuda_version=None,
            gpu_count=len(gpus),
            gpus=tuple(gpus),
            errors=_dedupe(tool_errors),
            source_format="listing",
        )
    root, unread = build_text_tree(lines, check_failures)
    return _from_tree(root, "text", [f"unread line: {line}" for line in unread], tool_errors)


@parsed_once  # shows_nothing parses, then the engine parses the same text
def parse(text: str) -> NvidiaSmiResult:
    """Parse ``nvidia-smi -q``, ``-q -x`` or table output. Pure; never raises."""
    try:
        return _parse(text if isinstance(text, str) else str(text))
    except Exception as exc:  # noqa: BLE001 - last line of defence: a result with a warning, not a crash
        return NvidiaSmiResult(
            kind=KIND,
            warnings=(f"nvidia-smi parser error: {type(exc).__name__}: {exc}",),
            driver_version=None,
            cuda_version=None,
            gpu_count=None,
            gpus=(),
            errors=(),
        )


# ---------------------------------------------------------------------------------------------
# facts
# ---------------------------------------------------------------------------------------------

HW_SLOWDOWN_REASONS = frozenset({"hw_slowdown", "hw_thermal_slowdown", "hw_power_brake_slowdown"})


def _positive(value: int | None) -> bool:
    return value is not None and value > 0


def _pcie_degraded(gpu: Gpu) -> bool:
    pcie = gpu.pcie
    return pcie_degraded(gpu.utilization_gpu, pcie.gen_current, pcie.gen_max, pcie.width_current, pcie.width_max)


def _unreadable_gpus(result: NvidiaSmiResult) -> list[str | None]:
    unreadable: list[str | None] = [e.pci for e in result.errors if e.field is None]
    field_errors: dict[str | None, list[str]] = {}
    for error in result.errors:
        if error.field is not None:
            field_errors.setdefault(error.pci, []).append(error.field)
    for pci, names in field_errors.items():
        identity_lost = any(canon(n.split(" > ")[-1]) in ("product_name", "gpu_uuid", "uuid") for n in names)
        if identity_lost or len(names) > MAX_ISOLATED_FIELD_ERRORS:
            unreadable.append(pci)
    return list(dict.fromkeys(unreadable))


# nvidia-smi's words for "the kernel module is not loaded" (its own message, NVML_ERROR_DRIVER_NOT_LOADED's
# text, kmod's modprobe): nothing on the GPUs can be read until the module for this kernel is there.
DRIVER_NOT_LOADED = (
    "couldn't communicate with the NVIDIA driver",
    "Failed to initialize NVML: Driver Not Loaded",
    "modprobe: FATAL: Module nvidia",
)


def facts(result: NvidiaSmiResult) -> dict[str, Any]:
    """The contract JSON plus the conveniences runbook conditions read (lists of PCI addresses)."""
    data: dict[str, Any] = to_jsonable(result)
    gpus = result.gpus
    data.update(
        gpus_missing_or_unreadable=_unreadable_gpus(result),
        driver_not_loaded_messages=[
            error.message
            for error in result.errors
            if error.field is None and any(phrase in error.message for phrase in DRIVER_NOT_LOADED)
        ],
        error_count=len(result.errors),
        field_error_count=sum(1 for e in result.errors if e.field is not None),
        dram_uncorrectable_volatile_gpus=[
            g.pci
            for g in gpus
            if _positive(g.ecc.volatile.dram_uncorrectable)
            or _positive(g.ecc.volatile.sram_uncorrectable)
            or _positive(g.ecc_volatile_uncorrected_total)
        ],
        remap_pending_gpus=[g.pci for g in gpus if g.remapped_rows and g.remapped_rows.pending],
        remap_failure_gpus=[g.pci for g in gpus if g.remapped_rows and g.remapped_rows.failure],
        retired_pages_pending_gpus=[g.pci for g in gpus if g.retired_pages and g.retired_pages.pending],
        sram_threshold_exceeded_gpus=[g.pci for g in gpus if g.sram_threshold_exceeded],
        mig_enabled_gpus=[g.pci for g in gpus if (g.mig_mode or "").lower() == "enabled"],
        mig_instances=[
            {
                "gpu": g.pci,
                "index": m.index,
                "profile": m.profile,
                "gpu_instance_id": m.gpu_instance_id,
                "compute_instance_id": m.compute_instance_id,
            }
            for g in gpus
            for m in g.mig_devices
        ],
        # which MIG instance an uncorrectable ECC count belongs to (the GPU's own count is their sum)
        mig_uncorrectable_ecc_instances=[
            {
                "gpu": g.pci,
                "index": m.index,
                "profile": m.profile,
                "gpu_instance_id": m.gpu_instance_id,
                "sram_uncorrectable": m.sram_uncorrectable_volatile,
                "dram_uncorrectable": m.dram_uncorrectable_volatile,
            }
            for g in gpus
            for m in g.mig_devices
            if _positive(m.sram_uncorrectable_volatile) or _positive(m.dram_uncorrectable_volatile)
        ],
        channel_repair_pending_gpus=[g.pci for g in gpus if g.channel_repair_pending],
        tpc_repair_pending_gpus=[g.pci for g in gpus if g.tpc_repair_pending],
        hw_slowdown_gpus=[g.pci for g in gpus if HW_SLOWDOWN_REASONS.intersection(g.clocks_event_reasons_active or ())],
        pcie_degraded_gpus=[g.pci for g in gpus if _pcie_degraded(g)],
        recovery_actions={
            (g.pci or "unknown"): g.recovery_action
            for g in gpus
            if g.recovery_action is not None and g.recovery_action.lower() != "none"
        },
        gpu_names=sorted({g.name for g in gpus if g.name}),
        sku_judgement=_sku_judgement(result),
        unplaced_uncorrectable_total=sum(
            c.value for c in result.unplaced_counters if c.value and "uncorrectable" in canon(c.field)
        ),
    )
    data["driver_not_loaded"] = bool(data["driver_not_loaded_messages"])
    # every GPU the output announces is in it (a table that reaches its closing rule, a -q with as many GPU
    # blocks as "Attached GPUs"): a pasted excerpt's count is no count of the node
    data["listing_complete"] = result.listing_complete
    modes = [(g.virtualization_mode or "").lower() for g in gpus if g.virtualization_mode]
    # a hypervisor named by the GPU itself (Pass-Through, VGPU): a VM, whose GPU count is the tenant's shape
    data["virtualized"] = any(mode not in ("none", "n/a") for mode in modes) if modes else None
    # the mode as written (None, Pass-Through, VGPU, Host VGPU): the tenancy signs read it (knowledge/tenancy_signs.csv)
    data["virtualization_mode"] = next((g.virtualization_mode for g in gpus if g.virtualization_mode), None)
    # Every GPU whose memory shows trouble, once each: the memory evidence of silent-corruption.
    data["memory_error_gpus"] = list(dict.fromkeys(pci for name in MEMORY_ERROR_FACTS for pci in data[name]))
    return data


# The per-GPU lists whose GPUs count as memory evidence (uncorrectable ECC, retirement or remap pending,
# remap failed): docs/sources.md, NVIDIA's GPU memory error management guide.
MEMORY_ERROR_FACTS = (
    "dram_uncorrectable_volatile_gpus",
    "retired_pages_pending_gpus",
    "remap_pending_gpus",
    "remap_failure_gpus",
)


def _sku_judgement(result: NvidiaSmiResult) -> dict[str, Any]:
    """GPU count against the SKU profile of the first named GPU (unknown SKU: cannot judge)."""
    from nightowl.collectors.gpu.sku_profiles import judge

    names = [g.name for g in result.gpus if g.name]
    if not names:
        return {"status": "cannot-judge", "sku": None, "reasons": ["no GPU name in the output"]}
    return judge(names[0], gpu_count=result.gpu_count)


def shows_nothing(text: str) -> bool:
    """An output that exited 0 but lists no GPU and no error (one line of text, an HTML error page, XML with
    zero GPUs, a table without rows) read nothing: no_data, so no runbook calls the node healthy on it."""
    result = parse(text)
    return not result.gpus and not result.errors


COLLECTOR = Collector(
    **registered(KIND),
    shows_nothing=shows_nothing,
    commands=FULL_ARGVS,
    parse=parse,
    facts=facts,
    cursor=CheapFirst(parse, facts),  # the --query-gpu CSV first where a run keeps positions (cheap.py)
)
