"""engine/shared_reads.py: an argv two kinds' readers share runs once a host and run (issue 46)."""

from __future__ import annotations

import threading
import time

import pytest

from nightowl.engine import shared_reads
from nightowl.engine.shared_reads import SharedReads
from nightowl.transports.base import CommandResult

ARGV = ("nvidia-smi", "--query-gpu=index,fabric.state", "--format=csv,nounits")


class Host:
    """Counts its runs of the argv; each answers its own count, after ``seconds``."""

    def __init__(self, seconds: float = 0.0, fail: bool = False) -> None:
        self.runs, self.seconds, self.fail = 0, seconds, fail
        self.lock = threading.Lock()
        self.started = threading.Event()  # a run has begun (so another ask finds it running)

    def __call__(self) -> CommandResult:
        with self.lock:
            self.runs += 1
            number = self.runs
        self.started.set()
        time.sleep(self.seconds)
        if self.fail:
            raise RuntimeError("the channel broke")
        return CommandResult(ARGV, 0, f"answer {number}\n", "", time.time(), self.seconds)


def test_another_kind_takes_the_answer_once_and_the_same_kind_reads_again() -> None:
    shared, host = SharedReads(), Host()
    first = shared.run("gpu-1", "nvidia-smi", ARGV, 5.0, host)
    taken = shared.run("gpu-1", "fabric", ARGV, 5.0, host)
    assert host.runs == 1 and taken.stdout == first.stdout == "answer 1\n"
    assert taken.extra == {"answer_of": "nvidia-smi"} and "answer_of" not in first.extra
    again = shared.run("gpu-1", "fabric", ARGV, 5.0, host)  # given once: a third ask is a fresh read
    assert host.runs == 2 and again.stdout == "answer 2\n" and "answer_of" not in again.extra
    same_kind = shared.run("gpu-1", "fabric", ARGV, 5.0, host)  # the same kind asking again reads again
    assert host.runs == 3 and same_kind.stdout == "answer 3\n"


def test_hosts_and_argvs_never_share() -> None:
    shared, host = SharedReads(), Host()
    shared.run("gpu-1", "nvidia-smi", ARGV, 5.0, host)
    assert shared.run("gpu-2", "fabric", ARGV, 5.0, host).stdout == "answer 2\n"
    assert shared.run("gpu-1", "fabric", ARGV[:2], 5.0, host).stdout == "answer 3\n"


def test_a_kind_that_asks_while_the_other_runs_waits_for_its_answer() -> None:
    shared, host = SharedReads(), Host(seconds=0.3)
    got: dict[str, CommandResult] = {}
    owner = threading.Thread(target=lambda: got.update(a=shared.run("gpu-1", "nvidia-smi", ARGV, 5.0, host)))
    owner.start()
    assert host.started.wait(5.0)
    got["b"] = shared.run("gpu-1", "fabric", ARGV, 5.0, host)
    owner.join()
    assert host.runs == 1 and got["b"].stdout == got["a"].stdout and got["b"].extra["answer_of"] == "nvidia-smi"


def test_a_run_stuck_well_past_its_limit_is_no_answer_and_the_other_kind_runs_its_own(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(shared_reads, "GRACE_SECONDS", 0.1)
    shared, host = SharedReads(), Host(seconds=0.6)
    owner = threading.Thread(target=shared.run, args=("gpu-1", "nvidia-smi", ARGV, 0.1, host))
    owner.start()
    assert host.started.wait(5.0)
    own = shared.run("gpu-1", "fabric", ARGV, 0.1, host)  # the limit and the grace pass first
    owner.join()
    assert host.runs == 2 and "answer_of" not in own.extra


def test_a_timeout_on_the_host_is_the_answer_for_both_kinds_under_the_same_limit() -> None:
    shared = SharedReads()
    hung = CommandResult(ARGV, None, "", "", time.time(), 30.0, timed_out=True, error="timed out after 30 s")
    shared.run("gpu-1", "nvidia-smi", ARGV, 30.0, lambda: hung)
    taken = shared.run("gpu-1", "fabric", ARGV, 30.0, Host())
    assert taken.timed_out and taken.extra["answer_of"] == "nvidia-smi"


def test_after_a_wait_no_kind_takes_an_answer_read_before_it() -> None:
    shared, host = SharedReads(), Host()
    shared.run("gpu-1", "nvidia-smi", ARGV, 5.0, host)
    shared.run("gpu-2", "nvidia-smi", ARGV, 5.0, host)
    shared.forget("gpu-1")  # the walk waited on gpu-1
    assert shared.run("gpu-1", "fabric", ARGV, 5.0, host).stdout == "answer 3\n"
    assert shared.run("gpu-2", "fabric", ARGV, 5.0, host).stdout == "answer 2\n"


def test_a_run_that_raised_is_no_answer_and_the_other_kind_runs_its_own() -> None:
    shared = SharedReads()
    with pytest.raises(RuntimeError):
        shared.run("gpu-1", "nvidia-smi", ARGV, 5.0, Host(fail=True))
    host = Host()
    assert shared.run("gpu-1", "fabric", ARGV, 5.0, host).stdout == "answer 1\n" and host.runs == 1


def test_answers_past_the_bound_are_not_kept(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(shared_reads, "KEPT_BYTES_MAX", len("answer 1\n"))
    shared, host = SharedReads(), Host()
    shared.run("gpu-1", "nvidia-smi", ARGV, 5.0, host)  # kept: exactly the bound
    shared.run("gpu-2", "nvidia-smi", ARGV, 5.0, host)  # not kept: past it
    assert shared.run("gpu-2", "fabric", ARGV, 5.0, host).stdout == "answer 3\n"
    assert shared.run("gpu-1", "fabric", ARGV, 5.0, host).stdout == "answer 1\n"  # taken: the bound frees
    shared.run("gpu-3", "nvidia-smi", ARGV, 5.0, host)
    assert shared.run("gpu-3", "fabric", ARGV, 5.0, host).extra["answer_of"] == "nvidia-smi"
