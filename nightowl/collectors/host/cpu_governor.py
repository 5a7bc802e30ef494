"""``cpu-governor``: the CPU frequency governor of cpu0, read-only.

Why: a governor other than ``performance`` lets cores clock down between decode steps, which shows
as scheduling jitter in the inter-token latency of small batches.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from nightowl.collectors.base import Collector, registered, to_jsonable

GOVERNOR_KIND = "cpu-governor"

# Governor names of the Linux cpufreq subsystem (Documentation/admin-guide/pm/cpufreq.rst) [M].
KNOWN_GOVERNORS = frozenset({"performance", "powersave", "ondemand", "conservative", "schedutil", "userspace"})


@dataclass(frozen=True)
class CpuGovernor:
    kind: str = GOVERNOR_KIND
    governor: str | None = None
    warnings: tuple[str, ...] = ()


def parse_governor(text: str) -> CpuGovernor:
    """``scaling_governor`` holds one word; anything else is reported, not guessed."""
    words = text.split()
    if not words:
        return CpuGovernor()
    governor = words[0].strip().lower()
    warnings: tuple[str, ...] = ()
    if governor not in KNOWN_GOVERNORS:
        warnings = (f"governor {governor!r} is not one of the kernel's cpufreq governors",)
    return CpuGovernor(governor=governor, warnings=warnings)


def governor_facts(result: CpuGovernor) -> dict[str, Any]:
    data: dict[str, Any] = to_jsonable(result)
    data["is_performance"] = result.governor == "performance" if result.governor else None
    return data


COLLECTOR = Collector(
    **registered(GOVERNOR_KIND),
    commands=(("cat", "--", "/sys/devices/system/cpu/cpu0/cpufreq/scaling_governor"),),
    parse=parse_governor,
    facts=governor_facts,
)
