"""A PyTorch watchdog timeout a terminal wrapped inside a word (lightning/py4cast#116: "...timeout: Work" then
"NCCL(SeqNum=1890, ...)") is read as the timeout it is (the tenth field set's fault was "nothing in the logs")."""

from __future__ import annotations

import pytest

from tests.helpers import facts_of

MESSAGE = (
    "[rank2]:[E1212 17:21:29.139598465 ProcessGroupNCCL.cpp:1515] [PG 0 (default_pg) Rank 2] Process group watchdog "
    "thread terminated with exception: [Rank 2] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=1890, "
    "OpType=ALLGATHER, NumelIn=1, NumelOut=4, Timeout(ms)=1800000) ran for 1800022 milliseconds before timing out.\n"
)


@pytest.mark.parametrize("at", ["Work", "WorkNC", "WorkNCCL(SeqNum=18", "ran for 1800"])
def test_a_watchdog_timeout_wrapped_inside_a_word_is_read(at: str) -> None:
    cut = MESSAGE.index(at) + len(at)
    wrapped = MESSAGE[:cut] + "\n" + MESSAGE[cut:]
    (timeout,) = facts_of("nccl-log", wrapped)["watchdog_timeouts"]
    (whole,) = facts_of("nccl-log", MESSAGE)["watchdog_timeouts"]
    assert timeout == whole


def test_two_messages_one_wrapped_are_two_timeouts_in_order() -> None:
    other = MESSAGE.replace("Rank 2", "Rank 3").replace("rank2", "rank3")
    cut = MESSAGE.index("Work") + 4
    text = MESSAGE[:cut] + "\n" + MESSAGE[cut:] + other
    assert [t["rank"] for t in facts_of("nccl-log", text)["watchdog_timeouts"]] == [2, 3]


def test_nccl_2_2xs_nranks_spelling_gives_the_rank_count() -> None:
    line = "host:15:18 [0] NCCL INFO comm 0x11951a20 rank 0 nRanks 2 nNodes 1 localRanks 2 localRank 0 MNNVL 0\n"
    assert facts_of("nccl-log", line)["nranks"] == 2
