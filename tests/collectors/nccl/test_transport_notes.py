"""Which transport NCCL could use is a note, not trouble (the eighth field set's two false alarms): a log cut while
the communicator forms that says "NET/IB : No device found ... Using network Socket" is a cut log, not a stuck
init (NVIDIA/TensorRT-LLM#408), and a node whose only warning is "Failed to open libibverbs" is no evidence of a
hang or a slow job (facebookresearch/detectron2#4730)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers import facts_of, replayed_action

HEAD = (
    "node:398:398 [0] NCCL INFO Bootstrap : Using eth0:172.17.0.2<0>\n"
    "NCCL version 2.18.3+cuda12.2\n"
    "node:398:412 [0] NCCL INFO NET/IB : No device found.\n"
    "node:398:412 [0] NCCL INFO NET/Socket : Using [0]eth0:172.17.0.2<0>\n"
    "node:398:412 [0] NCCL INFO Using network Socket\n"
)
NO_VERBS = "node:398:398 [0] misc/ibvwrap.cc:63 NCCL WARN Failed to open libibverbs.so[.1]\n"
INIT = (
    "node:398:413 [{r}] NCCL INFO comm 0x5624253c6cb0 rank {r} nranks 2 cudaDev {r} nvmlDev {r} busId e0 "
    "commId 0xb76f387dbd6e648e - Init START\n"
)
FAILURE = "node:398:412 [0] transport/net_socket.cc:424 NCCL WARN NET/Socket : peer 10.0.0.2<40461> closed\n"


def _verdict(tmp_path: Path, log: str) -> str:
    params = ("--param", "nccl_log=/var/log/nccl.log")
    return replayed_action(tmp_path, "nccl-hang", {"nccl-log.out": log}, "nccl-healthy-ib", params)


@pytest.mark.parametrize("note", ["", NO_VERBS])
def test_a_log_cut_in_init_with_a_transport_note_ends_in_init(note: str) -> None:
    facts = facts_of("nccl-log", note + HEAD + INIT.format(r=0) + INIT.format(r=1))
    assert facts["ends_in_init"] is True
    assert facts["warnings_unexplained"] == []


def test_a_failure_before_the_end_is_trouble_still() -> None:
    facts = facts_of("nccl-log", HEAD + INIT.format(r=0) + INIT.format(r=1) + FAILURE)
    assert facts["ends_in_init"] is False


@pytest.mark.parametrize("log", [HEAD + INIT.format(r=0) + INIT.format(r=1), NO_VERBS + HEAD])
def test_transport_notes_alone_are_cannot_judge_not_an_action(tmp_path: Path, log: str) -> None:
    assert _verdict(tmp_path, log) == "cannot-judge"
