"""A PyTorch watchdog timeout pasted without its rank tag (InstructGLM#3) is a timeout of an unknown rank, not
"nothing in the logs" (the eleventh field set)."""

from __future__ import annotations

from tests.helpers import facts_of

BARE = (
    "Watchdog caught collective operation timeout: WorkNCCL(SeqNum=49, OpType=ALLREDUCE, Timeout(ms)=18000000) "
    "ran for 18005607 milliseconds before timing out.\n"
)


def test_a_watchdog_timeout_without_its_rank_tag_is_read_with_its_rank_unknown() -> None:
    (timeout,) = facts_of("nccl-log", BARE)["watchdog_timeouts"]
    assert (timeout["rank"], timeout["seq"], timeout["op"], timeout["ran_ms"]) == (None, 49, "ALLREDUCE", 18005607)


def test_with_its_rank_tag_the_rank_is_read() -> None:
    (timeout,) = facts_of("nccl-log", "[Rank 4] " + BARE)["watchdog_timeouts"]
    assert timeout["rank"] == 4
