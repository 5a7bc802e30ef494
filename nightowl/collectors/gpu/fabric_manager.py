"""``fabric-manager``: whether NVIDIA Fabric Manager runs on this host (``systemctl is-active``), read-only.

On HGX boards with NVSwitch (A100/H100/H200/B200 8-GPU) the host's Fabric Manager configures the
switches; without it the GPUs stay out of the fabric and CUDA fails to start (NVIDIA Fabric Manager
User Guide, https://docs.nvidia.com/datacenter/tesla/fabric-manager-user-guide/index.html).
``systemctl is-active`` prints one word (active, inactive, failed, activating, ...) and exits 3 when
the unit is not active; a unit that is not installed also reads ``inactive``, so the runbook judges
this only where Fabric Manager is expected.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from nightowl.collectors.base import Collector, registered, to_jsonable

KIND = "fabric-manager"
UNIT = "nvidia-fabricmanager"
# systemctl(1) is-active states (ActiveState of systemd.unit).
STATES = frozenset(
    {"active", "reloading", "inactive", "failed", "activating", "deactivating", "maintenance", "refreshing"}
)


@dataclass(frozen=True)
class FabricManagerState:
    kind: str
    warnings: tuple[str, ...]
    unit: str
    state: str | None
    active: bool | None


def parse(text: str) -> FabricManagerState:
    """The first word systemctl printed; unknown words are a warning and leave ``active`` null."""
    words = [line.strip() for line in str(text).splitlines() if line.strip()]
    word = words[0].lower() if words else None
    if word in STATES:
        return FabricManagerState(KIND, (), UNIT, word, word in ("active", "reloading"))
    warning = f"not a systemctl state: {word[:80]}" if word else "systemctl printed nothing"
    return FabricManagerState(KIND, (warning,), UNIT, None, None)


def facts(result: FabricManagerState) -> dict[str, Any]:
    data: dict[str, Any] = to_jsonable(result)
    return data


COLLECTOR = Collector(**registered(KIND), commands=(("systemctl", "is-active", UNIT),), parse=parse, facts=facts)
