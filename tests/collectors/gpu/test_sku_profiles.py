"""SKU profiles: names map to the right part, and the judge never fails what it cannot judge."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nightowl.collectors.gpu.sku_profiles import PROFILES, judge, match_profile

# nvidia-smi product names as printed in the corpus (fixtures/corpus/gpu) and by the other SKUs.
NAMES = [
    ("NVIDIA H100 80GB HBM3", "H100-SXM"),  # nvsmi-q-h100, nvlink-e-h100
    ("NVIDIA H100 PCIe", "H100-PCIE"),
    ("NVIDIA H100 NVL", "H100-NVL"),
    ("NVIDIA H200", "H200-SXM"),  # nvsmi-q-h200
    ("NVIDIA H200 NVL", "H200-NVL"),
    ("NVIDIA B200", "B200"),
    ("NVIDIA GB200", "GB200"),  # nvlink-s-gb200
    ("NVIDIA GB300", "GB300"),  # nvlink-e-gb300
    ("NVIDIA A100-SXM4-80GB", "A100-SXM4-80GB"),  # nvsmi-table-a100-sxm4-80gb-x4
    ("NVIDIA A100-SXM4-40GB", "A100-SXM4-40GB"),
    ("NVIDIA A100 80GB PCIe", "A100-PCIE"),  # nvsmi-table-a100-80gb-pcie
    ("NVIDIA A100-PCIE-40GB", "A100-PCIE"),
    ("NVIDIA L40S", "L40S"),  # nvsmi-q-l40s
    ("NVIDIA L40", "L40"),
    ("Tesla V100-SXM2-16GB", "V100-SXM2"),  # nvsmi-table-v100-sxm2-x8
    ("Tesla V100-PCIE...", "V100-PCIE"),  # truncated table column
    ("Tesla T4", "T4"),  # nvsmi-qx-tesla-t4
    ("NVIDIA GeForce RTX 5090", None),
    ("NVIDIA GH200 480GB", None),
    ("NVIDIA RTX 4000 Ada Gene...", None),
    ("", None),
]


@pytest.mark.parametrize(("name", "sku"), NAMES)
def test_match_profile(name: str, sku: str | None) -> None:
    profile = match_profile(name)
    assert (profile.sku if profile else None) == sku


def test_every_profile_has_a_source_and_a_unique_sku() -> None:
    assert len({profile.sku for profile in PROFILES}) == len(PROFILES)
    assert all(profile.source.startswith("[") for profile in PROFILES)


def test_h100_pcie_is_not_judged_by_the_sxm_expectation() -> None:
    verdict = judge("NVIDIA H100 PCIe", 2, {"0": 12, "1": 12}, 5, 16)
    assert verdict["status"] == "ok" and verdict["sku"] == "H100-PCIE"
    assert judge("NVIDIA H100 PCIe", 4, {"0": 0}, None, None)["status"] == "ok"  # no bridge fitted


def test_degraded_cases() -> None:
    sxm = judge("NVIDIA H100 80GB HBM3", 8, {str(gpu): 18 for gpu in range(8)} | {"3": 17}, 5, 16)
    assert sxm["status"] == "degraded" and sxm["reasons"] == ["GPU 3: 17 NVLink links up, H100-SXM has 18"]
    assert judge("NVIDIA H100 80GB HBM3", 7)["status"] == "degraded"
    assert judge("NVIDIA A100-SXM4-80GB", 4, [12, 12, 12, 12])["status"] == "ok"  # 4-GPU HGX board
    assert judge("NVIDIA L40S", None, None, 4, 8)["status"] == "degraded"
    assert judge("NVIDIA GB200", 4, {"0": 18, "1": 18, "2": 18, "3": 18})["status"] == "ok"


def test_cannot_judge() -> None:
    assert judge("NVIDIA GeForce RTX 5090", 8, {"0": 0}, 1, 1) == {
        "status": "cannot-judge",
        "sku": None,
        "reasons": ["unknown SKU: 'NVIDIA GeForce RTX 5090'"],
    }
    assert judge("NVIDIA L40S", 3)["status"] == "cannot-judge"  # GPU count depends on the chassis
    assert judge("NVIDIA GB200", None, None, 3, 8)["status"] == "cannot-judge"  # no PCIe host link


@settings(max_examples=200, deadline=None)
@given(
    st.one_of(st.none(), st.text(max_size=40), st.sampled_from([name for name, _ in NAMES])),
    st.one_of(st.none(), st.integers(0, 64)),
    st.one_of(
        st.none(),
        st.integers(0, 18),
        st.dictionaries(st.text(max_size=3), st.integers(0, 18), max_size=8),
    ),
    st.one_of(st.none(), st.integers(1, 6)),
    st.one_of(st.none(), st.integers(1, 32)),
)
def test_judge_never_raises(name, count, links, gen, width) -> None:  # type: ignore[no-untyped-def]
    verdict = judge(name, count, links, gen, width)
    assert verdict["status"] in {"ok", "degraded", "cannot-judge"} and verdict["reasons"]
    if match_profile(name) is None:
        assert verdict["status"] == "cannot-judge"
