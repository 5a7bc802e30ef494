"""What a healthy node of a given GPU SKU looks like, as data, and a judge that compares against it.

``match_profile`` picks a profile from the nvidia-smi product name (``NVIDIA H100 80GB HBM3`` is the
SXM5 part, ``NVIDIA H100 PCIe`` and ``NVIDIA H100 NVL`` are not). ``judge`` compares what a node
shows with the profile. An unknown SKU, or a check whose expectation is not known, is never a
failure: it is ``cannot-judge`` (a wrong expectation would drain healthy nodes, as AzNHC's 18-link
check did on 12-link H100 PCIe VMs, peers-gpu-health.md, AzNHC issue #162).

Sources, per row: [DS] NVIDIA product datasheet figures; [C] seen in fixtures/corpus/gpu (file named);
[P] peers-gpu-health.md / decision-trees.md; [M] unverified background, check before relying on it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class SkuProfile:
    sku: str
    name_patterns: tuple[str, ...]  # regexes searched (case-insensitive) in the nvidia-smi product name
    gpus_per_node: tuple[int, ...] | None  # allowed counts; None = depends on the chassis, not judged
    nvlink_links_per_gpu: tuple[int, ...] | None  # allowed; 0 listed = bridge optional; None = not judged
    pcie_gen: int | None  # generation of the GPU's host link; None = not PCIe-attached or unknown
    pcie_width: int | None
    memory_gib: float | None  # nominal
    nvlink_gbps_per_link: float | None  # as ``nvidia-smi nvlink -s`` prints it
    source: str


# Order matters: the first profile whose pattern matches wins, so specific names come first.
PROFILES: tuple[SkuProfile, ...] = (
    SkuProfile(
        sku="A100-SXM4-40GB",
        name_patterns=(r"A100-SXM4?-40GB",),
        gpus_per_node=(4, 8),
        nvlink_links_per_gpu=(12,),
        pcie_gen=4,
        pcie_width=16,
        memory_gib=40,
        nvlink_gbps_per_link=25.0,
        source="[DS] A100: NVLink3 12 links/600 GB/s, PCIe Gen4, HGX 4- or 8-GPU; [C] topo-m-dgx-a100 NV12",
    ),
    SkuProfile(
        sku="A100-SXM4-80GB",
        name_patterns=(r"A100-SXM4?-80GB",),
        gpus_per_node=(4, 8),
        nvlink_links_per_gpu=(12,),
        pcie_gen=4,
        pcie_width=16,
        memory_gib=80,
        nvlink_gbps_per_link=25.0,
        source="[DS] as A100-SXM4-40GB; [C] nvsmi-table-a100-sxm4-80gb-x4-555 (4-GPU board)",
    ),
    SkuProfile(
        sku="A100-PCIE",
        name_patterns=(r"A100-PCIE", r"A100 80GB PCIe"),
        gpus_per_node=None,
        nvlink_links_per_gpu=(0, 12),
        pcie_gen=4,
        pcie_width=16,
        memory_gib=None,
        nvlink_gbps_per_link=25.0,
        source=(
            "[DS] A100 PCIe: Gen4 x16, optional NVLink bridge (600 GB/s = 12 links) [M: link count]; "
            "[C] nvsmi-table-a100-80gb-pcie"
        ),
    ),
    SkuProfile(
        sku="A800-SXM4-80GB",
        name_patterns=(r"A800-SXM4?-80GB",),
        gpus_per_node=(8,),
        nvlink_links_per_gpu=(8,),
        pcie_gen=4,
        pcie_width=16,
        memory_gib=80,
        nvlink_gbps_per_link=25.0,
        source="[M] A800 SXM: NVLink limited to 400 GB/s (8 links); [C] 8x A800 in xid13 sample",
    ),
    SkuProfile(
        sku="H100-NVL",
        name_patterns=(r"H100 NVL",),
        gpus_per_node=None,
        nvlink_links_per_gpu=(0, 12),
        pcie_gen=5,
        pcie_width=16,
        memory_gib=94,
        nvlink_gbps_per_link=None,
        source=(
            "[DS] H100 NVL: Gen5 x16, 94 GB, NVLink bridge 600 GB/s [M: 12 links]; "
            "[C] dcgmi nvlink status of 2321 lists 18 slots"
        ),
    ),
    SkuProfile(
        sku="H100-PCIE",
        name_patterns=(r"H100 PCIe",),
        gpus_per_node=None,
        nvlink_links_per_gpu=(0, 12),
        pcie_gen=5,
        pcie_width=16,
        memory_gib=80,
        nvlink_gbps_per_link=None,
        source=("[DS] H100 PCIe: Gen5 x16, NVLink bridge optional; [P] AzNHC #162: NCv5 H100 PCIe uses 12 of 18 links"),
    ),
    SkuProfile(
        sku="H100-SXM",
        name_patterns=(r"H100 80GB HBM3$", r"H100[- ]SXM5?"),
        gpus_per_node=(4, 8),
        nvlink_links_per_gpu=(18,),
        pcie_gen=5,
        pcie_width=16,
        memory_gib=80,
        nvlink_gbps_per_link=26.562,
        source=(
            "[DS] H100 SXM5: NVLink4 18 links/900 GB/s (also [P] decision-trees.md 5.4), HGX 4- or 8-GPU; "
            "[C] nvlink-e-h100-18links, nvsmi-q-h100 (Gen5 x16), nvsmi-table-h100-sxm-x8; "
            "[M] 26.562 GB/s"
        ),
    ),
    SkuProfile(
        sku="H200-NVL",
        name_patterns=(r"H200 NVL",),
        gpus_per_node=None,
        nvlink_links_per_gpu=(0, 18),
        pcie_gen=5,
        pcie_width=16,
        memory_gib=141,
        nvlink_gbps_per_link=None,
        source="[M] H200 NVL: Gen5 x16, 2- or 4-way NVLink bridge 900 GB/s",
    ),
    SkuProfile(
        sku="H200-SXM",
        name_patterns=(r"H200$", r"H200[- ]SXM", r"H200 141GB"),
        gpus_per_node=(4, 8),
        nvlink_links_per_gpu=(18,),
        pcie_gen=5,
        pcie_width=16,
        memory_gib=141,
        nvlink_gbps_per_link=26.562,
        source=("[DS] H200 SXM: NVLink 900 GB/s (18 links), HGX 4- or 8-GPU; [C] nvsmi-q-h200 (Gen5 x16, 143771 MiB)"),
    ),
    SkuProfile(
        sku="B200",
        name_patterns=(r"(?<!G)B200$", r"(?<!G)B200[- ]SXM"),
        gpus_per_node=(8,),
        nvlink_links_per_gpu=(18,),
        pcie_gen=None,
        pcie_width=None,
        memory_gib=180,
        nvlink_gbps_per_link=None,
        source=("[DS] HGX B200: 8 GPUs, NVLink5 1.8 TB/s (18 links); [M] host PCIe generation and memory size"),
    ),
    SkuProfile(
        sku="GB200",
        name_patterns=(r"GB200",),
        gpus_per_node=(4,),
        nvlink_links_per_gpu=(18,),
        pcie_gen=None,
        pcie_width=None,
        memory_gib=186,
        nvlink_gbps_per_link=53.125,
        source=("[C] nvlink-s-gb200: 18 links at 53.125 GB/s; [M] 4 GPUs per NVL72 compute tray, NVLink-C2C host link"),
    ),
    SkuProfile(
        sku="GB300",
        name_patterns=(r"GB300",),
        gpus_per_node=(4,),
        nvlink_links_per_gpu=(18,),
        pcie_gen=None,
        pcie_width=None,
        memory_gib=288,
        nvlink_gbps_per_link=None,
        source="[C] nvlink-e-gb300 (name only); [M] 4 GPUs per compute tray, 18 links, 288 GB",
    ),
    SkuProfile(
        sku="L40S",
        name_patterns=(r"L40S",),
        gpus_per_node=None,
        nvlink_links_per_gpu=(0,),
        pcie_gen=4,
        pcie_width=16,
        memory_gib=48,
        nvlink_gbps_per_link=None,
        source="[DS] L40S: no NVLink, PCIe Gen4 x16, 48 GB; [C] nvsmi-q-l40s (Max Gen 4, 16x, 46068 MiB)",
    ),
    SkuProfile(
        sku="L40",
        name_patterns=(r"L40$",),
        gpus_per_node=None,
        nvlink_links_per_gpu=(0,),
        pcie_gen=4,
        pcie_width=16,
        memory_gib=48,
        nvlink_gbps_per_link=None,
        source="[M] L40: no NVLink, PCIe Gen4 x16, 48 GB",
    ),
    SkuProfile(
        sku="V100-SXM2",
        name_patterns=(r"V100-SXM2",),
        gpus_per_node=(4, 8),
        nvlink_links_per_gpu=(6,),
        pcie_gen=3,
        pcie_width=16,
        memory_gib=None,
        nvlink_gbps_per_link=25.781,
        source=(
            "[DS] V100 SXM2: NVLink2 6 links/300 GB/s, Gen3 x16; "
            "[C] nvsmi-q-v100 (Max Gen 3), table x8; [M] 25.781 GB/s"
        ),
    ),
    SkuProfile(
        sku="V100-PCIE",
        name_patterns=(r"V100-PCIE",),
        gpus_per_node=None,
        nvlink_links_per_gpu=(0,),
        pcie_gen=3,
        pcie_width=16,
        memory_gib=None,
        nvlink_gbps_per_link=None,
        source="[DS] V100 PCIe: no NVLink, Gen3 x16; [C] nvsmi-table-row-power-ERR-v100-pcie",
    ),
    SkuProfile(
        sku="T4",
        name_patterns=(r"Tesla T4",),
        gpus_per_node=None,
        nvlink_links_per_gpu=(0,),
        pcie_gen=3,
        pcie_width=16,
        memory_gib=16,
        nvlink_gbps_per_link=None,
        source="[DS] T4: Gen3 x16, 16 GB, no NVLink; [C] nvsmi-qx-tesla-t4 (x8 current in a VM)",
    ),
)


def _normalise_name(gpu_name: str) -> str:
    name = " ".join(str(gpu_name).split())
    return name[:-3].rstrip() if name.endswith("...") else name


def match_profile(gpu_name: str | None) -> SkuProfile | None:
    """The profile for an nvidia-smi product name, or None when the SKU is not known."""
    if not gpu_name:
        return None
    name = _normalise_name(gpu_name)
    for profile in PROFILES:
        if any(re.search(pattern, name, re.IGNORECASE) for pattern in profile.name_patterns):
            return profile
    return None


def _link_counts(links_up_per_gpu: Any) -> dict[str, int]:
    """Accept {gpu: n}, [n, ...] or a single n (the same for every GPU)."""
    if links_up_per_gpu is None:
        return {}
    items: list[tuple[Any, Any]]
    if isinstance(links_up_per_gpu, dict):
        items = list(links_up_per_gpu.items())
    elif isinstance(links_up_per_gpu, (list, tuple)):
        items = list(enumerate(links_up_per_gpu))
    else:
        items = [("all", links_up_per_gpu)]
    return {str(gpu): int(count) for gpu, count in items if isinstance(count, int)}


def _check_gpu_count(profile: SkuProfile, gpu_count: int | None) -> tuple[bool, str] | None:
    if profile.gpus_per_node is None or gpu_count is None:
        return None
    if gpu_count in profile.gpus_per_node:
        return True, f"{gpu_count} GPUs, as expected for {profile.sku}"
    expected = " or ".join(str(count) for count in profile.gpus_per_node)
    return False, f"{gpu_count} GPUs visible, {profile.sku} nodes have {expected}"


def _check_links(profile: SkuProfile, counts: dict[str, int]) -> list[tuple[bool, str]]:
    if profile.nvlink_links_per_gpu is None:
        return []
    allowed = profile.nvlink_links_per_gpu
    results = []
    for gpu, count in counts.items():
        if count in allowed:
            results.append((True, f"GPU {gpu}: {count} NVLink links up"))
        else:
            expected = " or ".join(str(n) for n in allowed)
            results.append((False, f"GPU {gpu}: {count} NVLink links up, {profile.sku} has {expected}"))
    return results


def _check_pcie(profile: SkuProfile, pcie_gen: int | None, pcie_width: int | None) -> list[tuple[bool, str]]:
    results = []
    if profile.pcie_gen is not None and pcie_gen is not None:
        ok = pcie_gen >= profile.pcie_gen
        note = "" if ok else " (or the host/switch is older than the GPU: compare with sibling nodes)"
        results.append((ok, f"PCIe Gen{pcie_gen}, {profile.sku} is Gen{profile.pcie_gen}{note}"))
    if profile.pcie_width is not None and pcie_width is not None:
        ok = pcie_width >= profile.pcie_width
        results.append((ok, f"PCIe x{pcie_width}, {profile.sku} is x{profile.pcie_width}"))
    return results


def judge(
    gpu_name: str | None,
    gpu_count: int | None = None,
    links_up_per_gpu: Any = None,
    pcie_gen: int | None = None,
    pcie_width: int | None = None,
) -> dict[str, Any]:
    """Compare a node with its SKU profile: {status: ok | degraded | cannot-judge, sku, reasons}.

    Pass the PCIe generation seen under load (or the negotiated maximum): an idle GPU drops to
    Gen1 to save power, which is not a fault (L40S sample in the corpus).
    """
    profile = match_profile(gpu_name)
    if profile is None:
        return {"status": "cannot-judge", "sku": None, "reasons": [f"unknown SKU: {gpu_name!r}"]}
    checks: list[tuple[bool, str]] = []
    count_check = _check_gpu_count(profile, gpu_count)
    if count_check:
        checks.append(count_check)
    checks += _check_links(profile, _link_counts(links_up_per_gpu))
    checks += _check_pcie(profile, pcie_gen, pcie_width)
    if not checks:
        reason = f"{profile.sku}: nothing to compare (no input, or no known expectation for it)"
        return {"status": "cannot-judge", "sku": profile.sku, "reasons": [reason]}
    failed = [text for ok, text in checks if not ok]
    return {
        "status": "degraded" if failed else "ok",
        "sku": profile.sku,
        "reasons": failed or [text for _, text in checks],
        "source": profile.source,
    }
