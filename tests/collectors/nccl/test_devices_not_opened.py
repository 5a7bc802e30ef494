"""An IB device NCCL could not open and went past (ncclIbInit warns and continues) is a note, not a failure.

Excerpt: zai-org/ImageReward#65 (NCCL in a pod given two of the node's RoCE HCAs: the others fail ibv_open_device,
then NCCL uses mlx5_1 and mlx5_18)."""

from __future__ import annotations

from nightowl.collectors import get_collector

WARNINGS = """\
pod:80744:80744 [1] misc/ibvwrap.cc:212 NCCL WARN Call to ibv_open_device failed

pod:80744:80744 [1] transport/net_ib.cc:149 NCCL WARN NET/IB : Unable to open device mlx5_58
pod:80744:80744 [1] misc/ibvwrap.cc:212 NCCL WARN Call to ibv_open_device failed

pod:80744:80744 [1] transport/net_ib.cc:149 NCCL WARN NET/IB : Unable to open device mlx5_59
"""
USING = """\
pod:80744:80744 [1] NCCL INFO NET/IB : Using [0]mlx5_1:1/RoCE [1]mlx5_18:1/RoCE ; OOB eth0:33.117.221.247<0>
pod:80744:80744 [1] NCCL INFO Using network IB
"""


def facts(text: str) -> dict:
    collector = get_collector("nccl-log")
    return collector.facts(collector.parse(text))


def test_devices_nccl_went_past_are_a_note_when_it_uses_others() -> None:
    read = facts(WARNINGS + USING)
    assert read["devices_not_opened"] == ["mlx5_58", "mlx5_59"]
    assert read["has_ib_errors"] is False and read["failure_kinds"] == [] and read["error_kinds"] == []
    assert read["warnings_unexplained"] == [] and read["init_failed"] is False


def test_a_failed_open_with_no_device_in_use_stays_a_failure() -> None:
    read = facts(WARNINGS + "pod:80744:80744 [1] NCCL INFO NET/Socket : Using [0]eth0:33.117.221.247<0>\n")
    assert read["devices_not_opened"] == []
    assert read["has_ib_errors"] is True and "ibv_failed" in read["failure_kinds"]
    assert any("Unable to open device" in w for w in read["warnings_unexplained"])


def test_another_verbs_failure_beside_the_devices_in_use_stays_a_failure() -> None:
    other = (
        "pod:80744:80744 [1] misc/ibvwrap.cc:101 NCCL WARN Call to ibv_modify_qp failed with error Invalid argument\n"
    )
    read = facts(WARNINGS + USING + other)
    assert read["has_ib_errors"] is True and "ibv_failed" in read["failure_kinds"]
