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


# Found after the fix (stackhpc/k8s-rdma-horovod README, 2020: pasted indented under Open MPI's timestamped tag): every
# device fails to open; the same shape must still read as a failure, and the survived form as a note.
def _pasted(text: str) -> str:
    return "".join(f"    Thu Jun 18 14:28:58 2020[1,0]<stdout>:{line}\n" for line in text.splitlines())


def test_the_family_reads_alike_pasted_indented_under_an_open_mpi_tag() -> None:
    survived = facts(_pasted(WARNINGS + USING))
    assert survived["devices_not_opened"] == ["mlx5_58", "mlx5_59"] and survived["failure_kinds"] == []
    none_open = facts(
        _pasted(WARNINGS) + "    Thu Jun 18 14:28:58 2020[1,0]<stdout>:pod:1:1 [0] NCCL INFO Using network Socket\n"
    )
    assert none_open["devices_not_opened"] == [] and "ibv_failed" in none_open["failure_kinds"]


def test_the_cannot_judge_answer_names_the_devices_and_the_hang_they_can_cause(tmp_path) -> None:
    from nightowl.library import runbooks
    from nightowl.run import RunSettings, run_and_save
    from nightowl.transports.replay import ReplayTransport

    host = tmp_path / "node"
    host.mkdir()
    (host / "nccl-log.out").write_text(WARNINGS + USING)
    result = run_and_save(
        runbooks.load("nccl-hang"),
        {"node": lambda: ReplayTransport(host, host="node")},
        tmp_path / "out",
        params={"nccl_log": "/var/log/nccl.log"},
        settings=RunSettings(drafts=False, status_update=False),
    )
    run = result.runs[0]
    assert run.verdict is None and "mlx5_58, mlx5_59" in str(run.error) and "NVIDIA/nccl#2428" in str(run.error)
