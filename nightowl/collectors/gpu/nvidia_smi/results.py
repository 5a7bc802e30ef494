"""The result types of every ``nvidia-smi`` parser (``-q`` text, ``-q -x`` XML, the table view).

They live apart from the parsers so that each format's reader builds them without importing another
reader (no import cycle between the ``-q`` parser and the table reader).
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class EccCounts:
    dram_correctable: int | None = None
    dram_uncorrectable: int | None = None
    sram_correctable: int | None = None
    sram_uncorrectable: int | None = None


@dataclass(frozen=True)
class Ecc:
    volatile: EccCounts = field(default_factory=EccCounts)
    aggregate: EccCounts = field(default_factory=EccCounts)


@dataclass(frozen=True)
class BankHistogram:
    max: int | None
    high: int | None
    partial: int | None
    low: int | None
    none: int | None


@dataclass(frozen=True)
class RemappedRows:
    correctable: int | None
    uncorrectable: int | None
    pending: bool | None
    failure: bool | None
    bank_histogram: BankHistogram | None = None


@dataclass(frozen=True)
class RetiredPages:
    single_bit: int | None
    double_bit: int | None
    pending: bool | None


@dataclass(frozen=True)
class Pcie:
    gen_current: int | None = None
    gen_max: int | None = None
    width_current: int | None = None
    width_max: int | None = None
    replays_since_reset: int | None = None


@dataclass(frozen=True)
class MigDevice:
    """One MIG device of a GPU (its own ECC and BAR1 sections in ``-q``; ``<mig_device>`` in XML)."""

    index: int | None
    profile: str | None  # "3g.40gb", from the text block's header
    gpu_instance_id: int | None
    compute_instance_id: int | None
    sram_uncorrectable_volatile: int | None = None
    dram_uncorrectable_volatile: int | None = None
    sram_correctable_volatile: int | None = None
    memory_total_mib: int | None = None
    bar1_total_mib: int | None = None


@dataclass(frozen=True)
class Gpu:
    pci: str | None
    name: str | None = None
    uuid: str | None = None
    ecc: Ecc = field(default_factory=Ecc)
    remapped_rows: RemappedRows | None = None
    retired_pages: RetiredPages | None = None
    pcie: Pcie = field(default_factory=Pcie)
    clocks_event_reasons_active: tuple[str, ...] | None = None
    recovery_action: str | None = None
    # extras (docs/reference.md#parse-output allows extra fields)
    index: int | None = None
    serial: str | None = None
    vbios_version: str | None = None
    persistence_mode: str | None = None
    utilization_gpu: int | None = None
    temperature_gpu: int | None = None
    memory_total_mib: int | None = None
    memory_used_mib: int | None = None
    power_draw_w: float | None = None
    fan_speed_percent: int | None = None
    sram_threshold_exceeded: bool | None = None
    ecc_volatile_uncorrected_total: int | None = None  # table "Volatile Uncorr. ECC" column
    reset_required: bool | None = None
    drain_and_reset_recommended: bool | None = None
    fabric_state: str | None = None
    fabric_status: str | None = None
    clocks_event_reasons_counters_us: dict[str, int | None] | None = None
    driver_model: str | None = None  # Windows: WDDM, TCC or MCDM
    virtualization_mode: str | None = None  # None (bare metal), Pass-Through, VGPU ...
    mig_mode: str | None = None  # "Enabled" / "Disabled" (current); null where MIG does not apply
    mig_mode_pending: str | None = None
    mig_devices: tuple[MigDevice, ...] = ()
    # R590+ repair status (NVML nvmlDeviceGetRepairStatus: TPC / channel repair pending)
    channel_repair_pending: bool | None = None
    tpc_repair_pending: bool | None = None


@dataclass(frozen=True)
class GpuError:
    pci: str | None
    message: str
    field: str | None = None


@dataclass(frozen=True)
class UnplacedCounter:
    """An ECC/remap counter line seen outside any section (e.g. ``nvidia-smi -q | grep``)."""

    field: str
    value: int | None


@dataclass(frozen=True)
class NvidiaSmiResult:
    kind: str
    warnings: tuple[str, ...]
    driver_version: str | None
    cuda_version: str | None
    gpu_count: int | None
    gpus: tuple[Gpu, ...]
    errors: tuple[GpuError, ...]
    source_format: str | None = None  # "xml", "text", "table", "listing" (-L) or None
    listing_complete: bool = True  # False: the output announces more GPUs than it shows (a cut paste)
    unplaced_counters: tuple[UnplacedCounter, ...] = ()
