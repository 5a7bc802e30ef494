"""nccl-log collector: one JSON case per corpus sample, plus format variants not in the corpus."""

# ruff: noqa: E501 - log and table lines are kept verbatim, one per source line

from __future__ import annotations

import pytest

from nightowl.collectors.nccl.nccl_log import COLLECTOR, WatchdogTimeout, collective_mismatch, facts, parse
from tests.helpers import assert_subset


def facts_of(text: str) -> dict:
    return facts(parse(text))


def test_collector_declaration() -> None:
    assert COLLECTOR.kind == "nccl-log"
    assert COLLECTOR.commands == (("cat", "--", "{nccl_log}"),)
    assert not COLLECTOR.invasive


# --- NCCL formats not in the corpus ---------------------------------------------------------

NEW_INIT = """\
[2025-03-01 10:00:00] node1:100:200 [0] NCCL INFO ncclCommInitRank comm 0x55d0 rank 0 nranks 2 cudaDev 0 nvmlDev 0 busId 1b000 commId 0xabc - Init START
node1:100:200 [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/RoCE [1]mlx5_1:1/RoCE [RO]; OOB ens3:10.1.0.5<0>
node1:100:200 [0] NCCL INFO Using network AWS Libfabric
node1:100:200 [0] NCCL INFO Channel 00/0 : 1[1] -> 0[0] [receive] via NET/AWS Libfabric/0/GDRDMA
node1:100:200 [0] NCCL INFO Channel 01/0 : 0[0] -> 1[1] via P2P/direct pointer/read
node1:100:200 [0] NCCL INFO Channel 02/0 : 0[0] -> 1[1] via SHM/direct
node1:100:200 [0] NCCL INFO ncclCommInitRank comm 0x55d0 rank 0 nranks 2 cudaDev 0 nvmlDev 0 busId 1b000 commId 0xabc - Init COMPLETE
node2:300:400 [0] NCCL INFO ncclCommInitRank comm 0x77e0 rank 1 nranks 2 cudaDev 0 nvmlDev 0 busId 11a000 commId 0xabc - Init START
"""


def test_new_init_lines_rank_table_and_plugin_network() -> None:
    result = facts_of(NEW_INIT)
    assert result["network"] == "AWS Libfabric"
    assert result["transports"] == ["NET/AWS Libfabric/GDRDMA", "P2P/direct", "SHM"]
    assert result["has_gdrdma"] is True
    assert result["interfaces"] == ["ens3"]
    assert [d["link_layer"] for d in result["ib_devices"]] == ["RoCE", "RoCE"]
    assert_subset(
        result["ranks"],
        [
            {
                "rank": 0,
                "host": "node1",
                "pid": 100,
                "bus_id": "0000:1b:00",
                "comm_id": "0xabc",
                "init_complete": True,
            },
            {"rank": 1, "host": "node2", "pid": 300, "bus_id": "0001:1a:00", "init_complete": False},
        ],
    )
    assert result["init_complete_ranks"] == [0]
    assert result["missing_init_ranks"] == [1]


@pytest.mark.parametrize(
    "line,expected",
    [
        (  # NCCL 2.2x: status name and number, opcode name and number, hca
            "h:1:2 [0] transport/net_ib/p2p.cc:200 NCCL WARN NET/IB: Got completion from peer 10.0.0.2<5000> "
            "with status=IBV_WC_RETRY_EXC_ERR(12) opcode=IBV_WC_RDMA_WRITE(1) vendor_err=129  localGid ::ffff:10.0.0.1 "
            "remoteGids ::ffff:10.0.0.2 hca mlx5_3",
            {
                "status": 12,
                "status_name": "IBV_WC_RETRY_EXC_ERR",
                "opcode": 1,
                "vendor_err": 129,
                "peer": "10.0.0.2",
                "hca": "mlx5_3",
                "host": "h",
            },
        ),
        (  # NCCL 2.19-era numeric status
            "h:1:2 [0] transport/net_ib.cc:1 NCCL WARN NET/IB : Got completion from peer 10.0.0.3<1> with status=5 "
            "opcode=0 len=0 vendor err 249 (Recv) hca mlx5_0",
            {
                "status": 5,
                "status_name": "IBV_WC_WR_FLUSH_ERR",
                "opcode": 0,
                "vendor_err": 249,
                "hca": "mlx5_0",
            },
        ),
    ],
)
def test_ib_completion_formats(line: str, expected: dict) -> None:
    result = facts_of(line)
    assert_subset(result["ib_completion_errors"], [expected])
    assert result["has_ib_errors"] is True


def test_legacy_shm_and_ib_disable_socket_fallback() -> None:
    text = (
        "h:1:1 [0] NCCL INFO NCCL_IB_DISABLE set by environment to 1.\n"
        "h:1:1 [0] NCCL INFO Using network Socket\n"
        "h:1:1 [0] NCCL INFO Ring 00 : 0[0] -> 1[1] via SHM/direct/direct\n"
    )
    result = facts_of(text)
    assert result["env"] == {"NCCL_IB_DISABLE": "1"}
    assert result["transports"] == ["SHM"]
    assert_subset(result["errors"], [{"kind": "socket_fallback"}])


# --- PyTorch formats not in the corpus -----------------------------------------------------

THROWN = """\
[rank2]:[E ProcessGroupNCCL.cpp:1182] [PG 0 Rank 2] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=12, OpType=ALLREDUCE, NumelIn=4, NumelOut=4, Timeout(ms)=60000) ran for 60001 milliseconds before timing out.
terminate called after throwing an instance of 'c10::DistBackendError'
  what():  [PG 0 Rank 2] Process group watchdog thread terminated with exception: [Rank 2] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=12, OpType=ALLREDUCE, NumelIn=4, NumelOut=4, Timeout(ms)=60000) ran for 60001 milliseconds before timing out.
"""


def test_exception_repeating_the_watchdog_line_counts_once() -> None:
    result = facts_of(THROWN)
    assert_subset(result["watchdog_timeouts"], [{"rank": 2, "seq": 12, "pg": 0, "ran_ms": 60001}])
    assert_subset(result["dist_backend_errors"], [{"rank": 2, "exception": "c10::DistBackendError"}])
    assert [e["kind"] for e in result["errors"]] == ["timeout"]


def test_pytorch_1x_watchdog_without_seqnum() -> None:
    line = (
        "[E ProcessGroupNCCL.cpp:587] [Rank 1] Watchdog caught collective operation timeout: "
        "WorkNCCL(OpType=ALLREDUCE, TensorShape=[1024, 768], Timeout(ms)=1800000) ran for 1800327 milliseconds "
        "before timing out."
    )
    assert_subset(
        facts_of(line)["watchdog_timeouts"],
        [{"rank": 1, "seq": None, "op": "ALLREDUCE", "timeout_ms": 1800000, "ran_ms": 1800327}],
    )


def test_lowest_last_enqueued_is_the_straggler() -> None:
    lines = [
        f"[PG 0 Rank {rank}] Exception (either an error or timeout) detected by watchdog at work: 12, "
        f"last enqueued NCCL work: {enqueued}, last completed NCCL work: {completed}."
        for rank, enqueued, completed in ((0, 12, 11), (1, 12, 11), (2, 10, 10))
    ]
    result = facts_of("\n".join(lines))
    assert result["straggler_ranks"] == [2]
    assert result["completed_lag_ranks"] == []
    assert result["last_enqueued"] == {"0": 12, "1": 12, "2": 10}


def test_all_enqueued_but_one_lags_in_completion() -> None:
    lines = [
        f"[PG 0 Rank {rank}] Timeout at NCCL work: 12, last enqueued NCCL work: 12, last completed NCCL work: {done}."
        for rank, done in ((0, 12), (1, 11), (2, 12))
    ]
    result = facts_of("\n".join(lines))
    assert result["straggler_ranks"] == []
    assert result["completed_lag_ranks"] == [1]
    assert result["timeout_ranks"] == [0, 1, 2]


def test_mismatch_is_only_judged_within_one_process_group() -> None:
    a = WatchdogTimeout(rank=0, seq=5, op="ALLREDUCE", timeout_ms=1, ran_ms=2, pg=0)
    b = WatchdogTimeout(rank=1, seq=9, op="BROADCAST", timeout_ms=1, ran_ms=2, pg=1)
    assert collective_mismatch([a, b]) is None
    c = WatchdogTimeout(rank=1, seq=5, op="ALLREDUCE", timeout_ms=1, ran_ms=2, pg=0)
    assert collective_mismatch([a, b, c]) is False


def test_truncated_watchdog_line_is_a_warning() -> None:
    result = facts_of("[Rank 0] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=3, OpTy")
    assert result["watchdog_timeouts"] == []
    assert len(result["warnings"]) == 1


def test_empty_and_unrelated_text() -> None:
    assert facts_of("")["warnings"] == []
    assert facts_of("hello world\n")["warnings"] == ["no NCCL or ProcessGroupNCCL lines recognised"]
    assert facts_of("")["missing_init_ranks"] is None


def test_stragglers_are_compared_within_one_process_group_only() -> None:
    """SeqNums count one process group's collectives: a rank far 'behind' in another group is not late."""
    from nightowl.collectors.nccl import nccl_log

    def line(pg: int, rank: int, enqueued: int, completed: int) -> str:
        return (
            f"[rank{rank}]:[E626 06:24:44.906457629 ProcessGroupNCCL.cpp:1785] [PG ID {pg} PG GUID {pg}(pg{pg}) "
            f"Rank {rank}] Exception (either an error or timeout) detected by watchdog at work: {completed + 1}, "
            f"last enqueued NCCL work: {enqueued}, last completed NCCL work: {completed}."
        )

    log = "\n".join([line(0, 0, 900, 899), line(0, 1, 899, 898), line(1, 2, 40, 39), line(1, 3, 40, 39)])
    facts = nccl_log.facts(nccl_log.parse(log))
    assert facts["straggler_ranks"] == [1]  # not 2 and 3, whose group is at 40 of its own count
    level = "\n".join([line(0, 0, 900, 899), line(0, 1, 900, 897), line(1, 2, 40, 10), line(1, 3, 41, 39)])
    facts = nccl_log.facts(nccl_log.parse(level))
    assert facts["straggler_ranks"] == [2]
    assert facts["completed_lag_ranks"] == [1]  # PG 1 enqueued unevenly: its completions are not compared
