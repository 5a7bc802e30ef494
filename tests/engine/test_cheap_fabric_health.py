"""The fabric's cheap form judges a GPU's health fields as the fabric collector judges the full read's
(collectors/gpu/fabric.py): a value the full read calls trouble is trouble on the cheap read too, so a cheap read
never stands for a clean full read where the full form would have found the GPU degraded (never a false OK)."""

from __future__ import annotations

from pathlib import Path

import pytest

from nightowl.collectors.gpu import fabric
from nightowl.collectors.gpu.nvidia_smi import cheap_fabric
from tests.engine.cheap_csv import fabric_csv

ROOT = Path(__file__).resolve().parents[2]
TEXT = (ROOT / "fixtures" / "hosts" / "real-size-8gpu" / "nvidia-smi.out").read_text()
BANDWIDTH = "            Bandwidth                     : N/A\n"

VALUES = ["N/A", "Full", "Degraded", "None", "False", "True", "Healthy", "Unhealthy", "No", "Not Supported", "Yes"]


@pytest.mark.parametrize("value", VALUES)
def test_a_health_value_is_trouble_on_the_cheap_read_exactly_when_the_full_read_finds_the_gpu_degraded(
    value: str,
) -> None:
    assert BANDWIDTH in TEXT
    full = TEXT.replace(BANDWIDTH, BANDWIDTH.replace("N/A", value), 1)  # the first GPU's
    facts = fabric.facts(fabric.parse(full))
    first = facts["gpus"][0]["pci"]
    degraded = any(entry["gpu"] == first for entry in facts["degraded"])
    judged = cheap_fabric.judged_cheap(fabric_csv(full))
    assert isinstance(judged, dict)
    [row] = [gpu for pci, gpu in judged["gpus"].items() if pci.endswith(first.split(":", 1)[-1].lower())]
    assert row[-1] is degraded, (value, row)
    if not degraded:  # a clean full read: the cheap read of the same GPU stands for it
        assert cheap_fabric.judged_full(facts)["gpus"] == judged["gpus"]
