"""What a healthy node of a given GPU SKU looks like, as data, and a judge that compares against it.

``match_profile`` picks a profile from the nvidia-smi product name (``NVIDIA H100 80GB HBM3`` is the
SXM5 part, ``NVIDIA H100 PCIe`` and ``NVIDIA H100 NVL`` are not). ``judge`` compares what a node
shows with the profile. An unknown SKU, or a check whose expectation is not known, is never a
failure: it is ``cannot-judge`` (a wrong expectation would drain healthy nodes, as AzNHC's 18-link
check did on 12-link H100 PCIe VMs, https://github.com/Azure/azurehpc-health-checks/issues/162).

The profiles, each with its sources, live in nightowl/knowledge/sku_profiles.yaml.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from typing import Any

from nightowl import knowledge


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


def _tuple(value: Any, where: str) -> tuple[int, ...] | None:
    if value is None:
        return None
    if not isinstance(value, list) or not all(isinstance(item, int) for item in value):
        raise knowledge.KnowledgeError(f"{where}: expected a list of integers or null, got {value!r}")
    return tuple(value)


def _profile(entry: dict[str, Any], index: int) -> SkuProfile:
    where = f"sku_profiles.yaml: profiles[{index}]"
    memory, speed = entry.get("memory_gib"), entry.get("nvlink_gbps_per_link")
    return SkuProfile(
        sku=str(knowledge.field(entry, "sku", where)),
        name_patterns=tuple(str(p) for p in knowledge.field(entry, "name_patterns", where)),
        gpus_per_node=_tuple(entry.get("gpus_per_node"), f"{where}.gpus_per_node"),
        nvlink_links_per_gpu=_tuple(entry.get("nvlink_links_per_gpu"), f"{where}.nvlink_links_per_gpu"),
        pcie_gen=entry.get("pcie_gen"),
        pcie_width=entry.get("pcie_width"),
        memory_gib=float(memory) if memory is not None else None,
        nvlink_gbps_per_link=float(speed) if speed is not None else None,
        source=knowledge.sourced(entry, where, required=True),
    )


@functools.cache
def profiles() -> tuple[SkuProfile, ...]:
    """The profiles of nightowl/knowledge/sku_profiles.yaml, in file order (the first match wins)."""
    document = knowledge.read_yaml("sku_profiles.yaml") or {}
    return tuple(_profile(entry, index) for index, entry in enumerate(document.get("profiles") or []))


def __getattr__(name: str) -> Any:
    """``PROFILES``, read from nightowl/knowledge/sku_profiles.yaml on first use."""
    if name == "PROFILES":
        return profiles()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _normalise_name(gpu_name: str) -> str:
    name = " ".join(str(gpu_name).split())
    return name[:-3].rstrip() if name.endswith("...") else name


def match_profile(gpu_name: str | None) -> SkuProfile | None:
    """The profile for an nvidia-smi product name, or None when the SKU is not known."""
    if not gpu_name:
        return None
    name = _normalise_name(gpu_name)
    for profile in profiles():
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
