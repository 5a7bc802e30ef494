"""Connections a repeated sweep keeps between rounds (nightowl/transports/kept.py): reused while alive, opened
anew (through that round's opener) once lost, never kept for a transport that cannot tell it is gone."""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from typing import Any

import pytest

from nightowl.engine import session
from nightowl.transports import kept
from nightowl.transports.base import CommandResult, TransportError
from nightowl.transports.kept import KeptConnections


class Connection:
    """A transport whose connection can be lost (``alive``), counting what was asked of it."""

    def __init__(self, host: str, refuse: bool = False) -> None:
        self.host, self.refuse = host, refuse
        self.connects = self.closes = 0
        self.up = False

    def alive(self) -> bool:
        return self.up

    def connect(self) -> None:
        if self.refuse:
            raise TransportError("connection refused")
        self.connects += 1
        self.up = True

    def run(self, argv: Sequence[str], timeout: float, kind: str | None = None) -> CommandResult:
        return CommandResult(argv=tuple(argv), rc=0, stdout="ok", stderr="", started=0.0, duration=0.0)

    def close(self) -> None:
        self.closes += 1
        self.up = False


class Local(Connection):
    """A transport with nothing to keep (no ``alive``): local commands, a replay."""

    alive = None  # type: ignore[assignment]


def opener(made: list[Any], kind: type[Connection] = Connection, **options: Any) -> Any:
    def open_one() -> Any:
        made.append(kind("gpu-1", **options))
        return made[-1]

    return open_one


def one_round(keeper: KeptConnections, open_one: Any) -> Any:
    """What the engine does with a host's transport in a round: open, connect, run, close."""
    transport = keeper.openers({"gpu-1": open_one})["gpu-1"]()
    transport.connect()
    transport.run(["true"], 5.0)
    transport.close()
    return transport


def test_a_live_connection_is_taken_again_next_round() -> None:
    keeper, made = KeptConnections(), []
    one_round(keeper, opener(made))
    one_round(keeper, opener(made))
    assert len(made) == 1 and made[0].connects == 1 and made[0].closes == 0
    assert (keeper.opened, keeper.reused) == (1, 1)
    keeper.close_all()
    assert made[0].closes == 1 and keeper.count() == 0


def test_a_lost_connection_is_opened_anew_through_the_rounds_own_opener() -> None:
    keeper, made = KeptConnections(), []
    one_round(keeper, opener(made))
    made[0].up = False  # the host rebooted, or sshd dropped it
    one_round(keeper, opener(made))
    assert len(made) == 2 and made[1].connects == 1
    assert made[0].closes == 1  # the lost one is closed, not leaked
    assert (keeper.opened, keeper.reused) == (2, 0)


def test_a_transport_that_cannot_tell_it_is_gone_is_never_kept() -> None:
    keeper, made = KeptConnections(), []
    one_round(keeper, opener(made, Local))
    one_round(keeper, opener(made, Local))
    assert len(made) == 2 and keeper.count() == 0 and keeper.opened == 0


def test_a_host_that_does_not_answer_keeps_nothing() -> None:
    keeper, made = KeptConnections(), []
    transport = keeper.openers({"gpu-1": opener(made, refuse=True)})["gpu-1"]()
    with pytest.raises(TransportError):
        transport.connect()
    transport.close()
    assert keeper.count() == 0 and not keeper.alive("gpu-1")


def test_an_interrupt_ends_a_kept_connection_not_just_hands_it_back() -> None:
    keeper, made = KeptConnections(), []
    transport = keeper.openers({"gpu-1": opener(made)})["gpu-1"]()
    transport.connect()
    session._end(transport)  # what close_live_transports does on SIGINT / SIGTERM
    assert made[0].closes == 1 and keeper.count() == 0


class Silent(Connection):
    """A connection that looks open but whose commands get no exit status back (a black-holed network)."""

    def run(self, argv: Sequence[str], timeout: float, kind: str | None = None) -> CommandResult:
        return CommandResult(argv=tuple(argv), rc=None, stdout="", stderr="", started=0.0, duration=timeout)


def test_a_connection_that_stopped_answering_is_not_trusted_next_round() -> None:
    keeper, made = KeptConnections(), []
    one_round(keeper, opener(made, Silent))
    one_round(keeper, opener(made, Silent))
    assert len(made) == 2 and made[0].closes == 1 and keeper.reused == 0


def test_a_command_the_host_itself_timed_out_keeps_the_connection() -> None:
    class HostTimeout(Connection):  # as transports/ssh.py reports the host's `timeout` ending a command
        def run(self, argv: Sequence[str], timeout: float, kind: str | None = None) -> CommandResult:
            return CommandResult(
                argv=tuple(argv), rc=None, stdout="", stderr="", started=0.0, duration=timeout, timed_out=True,
                error=f"timed out after {timeout:g}s (the host's timeout ended it)",
            )  # fmt: skip

    keeper, made = KeptConnections(), []
    one_round(keeper, opener(made, HostTimeout))
    one_round(keeper, opener(made, HostTimeout))
    assert len(made) == 1 and keeper.reused == 1


class Dropped(Connection):
    """A connection a NAT dropped while it idled: it still looks open, its next command finds it gone."""

    def __init__(self, host: str) -> None:
        super().__init__(host)
        self.dropped = False

    def run(self, argv: Sequence[str], timeout: float, kind: str | None = None) -> CommandResult:
        if self.dropped:
            return CommandResult(
                argv=tuple(argv), rc=None, stdout="", stderr="", started=0.0, duration=0.0,
                error="ssh error: SSHException: Unable to open channel.",
            )  # fmt: skip
        return super().run(argv, timeout, kind)


def test_a_connection_taken_again_that_is_gone_is_dialed_anew_and_the_command_run_again() -> None:
    keeper, made = KeptConnections(), []
    one_round(keeper, opener(made, Dropped))
    made[0].dropped = True
    transport = keeper.openers({"gpu-1": opener(made, Dropped)})["gpu-1"]()
    transport.connect()
    result = transport.run(["true"], 5.0)
    assert result.rc == 0 and result.stdout == "ok"  # over the new connection
    assert len(made) == 2 and made[0].closes == 1 and made[1].connects == 1
    transport.close()
    assert keeper.alive("gpu-1") and (keeper.opened, keeper.reused) == (2, 1)


def test_a_new_connection_that_fails_is_not_retried() -> None:
    keeper, made = KeptConnections(), []
    transport = keeper.openers({"gpu-1": opener(made, Dropped)})["gpu-1"]()
    transport.connect()
    made[0].dropped = True
    assert transport.run(["true"], 5.0).rc is None and len(made) == 1


def test_a_kept_connection_sends_keepalives() -> None:
    class Kept(Connection):
        interval: float | None = None

        def keep_alive(self, seconds: float) -> None:
            self.interval = seconds

    keeper, made = KeptConnections(), []
    one_round(keeper, opener(made, Kept))
    assert made[0].interval == 30.0


class Batching(Connection):
    """A connection that can send several commands in one session (``run_batch``), counting how each was run."""

    def __init__(self, host: str) -> None:
        super().__init__(host)
        self.alone: list[tuple[str, ...]] = []
        self.batches: list[list[tuple[str, ...]]] = []
        self.lanes: list[list[int]] = []  # each batch's lanes, as run_batch was asked
        self.delay = 0.0
        self.gate: threading.Event | None = None  # when set: each batch waits for it (at most 10 s)
        self.unanswered: set[str] = set()  # argv[-1] of commands a batch does not answer

    def run(self, argv: Sequence[str], timeout: float, kind: str | None = None) -> CommandResult:
        self.alone.append(tuple(argv))
        return CommandResult(argv=tuple(argv), rc=0, stdout="alone", stderr="", started=0.0, duration=0.0)

    def run_batch(
        self, commands: Sequence[tuple[Sequence[str], float]], lanes: Sequence[int] = ()
    ) -> dict[tuple[str, ...], CommandResult]:
        self.batches.append([tuple(argv) for argv, _ in commands])
        self.lanes.append(list(lanes))
        time.sleep(self.delay)
        if self.gate is not None:
            self.gate.wait(10.0)
        return {
            tuple(argv): CommandResult(argv=tuple(argv), rc=0, stdout="batched", stderr="", started=0.0, duration=0.0)
            for argv, _ in commands
            if argv[-1] not in self.unanswered
        }


def asked_round(keeper: KeptConnections, open_one: Any, asks: list[tuple[tuple[str, ...], str]]) -> dict[str, str]:
    """One round that asks each (argv, kind) in turn; what each kind's answer said."""
    transport = keeper.openers({"gpu-1": open_one})["gpu-1"]()
    transport.connect()
    answers = {kind: transport.run(argv, 5.0, kind=kind).stdout for argv, kind in asks}
    transport.close()
    return answers


STEADY = [(("nvidia-smi", "--query-gpu=x"), "nvidia-smi"), (("nvidia-smi", "nvlink", "-s"), "nvlink"),
          (("systemctl", "is-active", "fm"), "fabric-manager")]  # fmt: skip
# What the sweep lets a kept connection batch: its first node's read-only kinds (cli/sweep_every.batchable_kinds)
BATCHABLE = frozenset({"nvidia-smi", "nvlink", "fabric-manager", "kernel-log"})


def batching() -> KeptConnections:
    return KeptConnections(BATCHABLE)


def test_what_a_host_is_asked_every_round_comes_in_batches_from_the_second_round_of_a_kept_connection() -> None:
    keeper, made = batching(), []
    first = asked_round(keeper, opener(made, Batching), STEADY)
    assert set(first.values()) == {"alone"} and made[0].batches == []  # a new connection: nothing learned yet
    second = asked_round(keeper, opener(made, Batching), STEADY)
    assert set(second.values()) == {"batched"}
    assert sorted(argv for batch in made[0].batches for argv in batch) == sorted(argv for argv, _ in STEADY)
    assert len(made[0].batches) == 1  # one session
    assert len(made[0].alone) == len(STEADY) and keeper.batched == len(STEADY)


def test_a_read_whose_argv_follows_a_position_is_left_out_once_it_changed() -> None:
    """The kernel log's journal cursor changes as the log grows: batched once at most, then asked alone."""
    keeper, made = batching(), []
    for number in range(4):
        asked_round(keeper, opener(made, Batching), [*STEADY, (("journalctl", f"--cursor={number}"), "kernel-log")])
    batched = [argv for batch in made[0].batches for argv in batch]
    assert ("journalctl", "--cursor=0") in batched  # the first plan is last round's asks as they were
    assert not any(argv[0] == "journalctl" for batch in made[0].batches[2:] for argv in batch)
    alone = [argv for argv in made[0].alone if argv[0] == "journalctl"]
    assert alone == [("journalctl", f"--cursor={number}") for number in range(4)]


def test_a_read_whose_reader_names_the_argv_that_follows_is_batched_every_round() -> None:
    """A reader that names its next argv (``follow``: the kernel log's next journal cursor) has that argv sent in
    the next round's batch, and an ask of it takes the answer; a round whose ask is not the one named (a gap, a
    full read) runs that ask alone and leaves the batched answer untaken."""
    keeper, made = batching(), []

    def cursor_round(asked: int, named: int) -> dict[str, str]:
        transport = keeper.openers({"gpu-1": opener(made, Batching)})["gpu-1"]()
        transport.connect()
        answers = {kind: transport.run(argv, 5.0, kind=kind).stdout for argv, kind in STEADY}
        argv = ("journalctl", f"--cursor={asked}")
        answers["kernel-log"] = transport.run(argv, 5.0, kind="kernel-log").stdout
        transport.follow(argv, ("journalctl", f"--cursor={named}"))
        transport.close()
        return answers

    assert cursor_round(0, 1)["kernel-log"] == "alone"  # a new connection
    assert [cursor_round(n, n + 1)["kernel-log"] for n in (1, 2, 3)] == ["batched"] * 3
    assert cursor_round(9, 10)["kernel-log"] == "alone"  # not the argv named last round (4)
    assert ("journalctl", "--cursor=4") in made[0].batches[-1]
    assert [argv for argv in made[0].alone if argv[0] == "journalctl"] == [
        ("journalctl", "--cursor=0"), ("journalctl", "--cursor=9")
    ]  # fmt: skip


def test_an_ask_the_batch_does_not_answer_runs_alone() -> None:
    keeper, made = batching(), []
    asked_round(keeper, opener(made, Batching), STEADY)
    made[0].unanswered = {"-s"}
    answers = asked_round(keeper, opener(made, Batching), STEADY)
    assert answers == {"nvidia-smi": "batched", "nvlink": "alone", "fabric-manager": "batched"}


def test_a_batch_held_up_past_its_patience_leaves_the_asks_alone_and_its_connection_is_not_taken_while_it_runs(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A command that hangs in a batch holds up the ones after it: each ask waits its patience, then runs alone;
    the connection whose batch is still running when the next round starts is dropped, and a new one opened."""
    monkeypatch.setattr(kept, "BATCH_PATIENCE_SECONDS", 0.05)
    keeper, made = batching(), []
    asked_round(keeper, opener(made, Batching), STEADY)
    made[0].gate = threading.Event()  # the batch hangs until the gate opens
    try:
        assert set(asked_round(keeper, opener(made, Batching), STEADY).values()) == {"alone"}
        assert made[0].closes == 0  # kept while its batch runs: the next round decides
        assert not keeper.alive("gpu-1")  # what a round's start asks (cli/sweep_every.py kept_hosts)
        assert made[0].closes == 1
        asked_round(keeper, opener(made, Batching), STEADY)
        assert len(made) == 2 and made[1].connects == 1
    finally:
        made[0].gate.set()


def test_a_batch_that_ended_before_the_next_round_leaves_its_connection_to_be_taken_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A batch held up past its patience (a busy client, slow to read it), but over before the next round, costs
    that host no handshake."""
    monkeypatch.setattr(kept, "BATCH_PATIENCE_SECONDS", 0.05)
    keeper, made = batching(), []
    asked_round(keeper, opener(made, Batching), STEADY)
    made[0].gate = threading.Event()
    assert set(asked_round(keeper, opener(made, Batching), STEADY).values()) == {"alone"}
    ended = keeper._busy["gpu-1"][1]
    time.sleep(0.7)  # the batch takes at least this long
    made[0].gate.set()
    assert ended.wait(10.0)
    assert keeper.patience("gpu-1") >= 3 * 0.7  # timed before it ended: the next round waits for it as long
    assert keeper.alive("gpu-1")
    assert set(asked_round(keeper, opener(made, Batching), STEADY).values()) == {"batched"}
    assert len(made) == 1 and made[0].closes == 0 and keeper.reused == 2


def test_a_batch_whose_session_ended_is_not_running_though_its_thread_has_yet_to_return() -> None:
    """What keeps a connection is its session, not the thread that handed its answers over (on a busy client that
    thread may not have returned when the host's walk ends)."""
    transport = second_round()
    batch = transport._batch
    release = threading.Event()
    batch.thread = threading.Thread(target=release.wait, daemon=True)
    batch.thread.start()
    try:
        assert batch.running()
        batch.ended.set()
        assert batch.thread.is_alive() and not batch.running()
    finally:
        release.set()


def test_a_connection_without_batches_runs_every_ask_alone() -> None:
    keeper, made = KeptConnections(), []
    for _ in range(3):
        assert set(asked_round(keeper, opener(made), STEADY).values()) == {"ok"}
    assert keeper.batched == 0


def test_only_the_kinds_the_sweep_names_batchable_are_ever_batched() -> None:
    """An invasive diagnostic, or a read only a branch asks, is never sent unasked in a later round's batch."""
    diagnostic = (("dcgmi", "diag", "-r", "2"), "dcgm-diag")
    keeper, made = batching(), []
    for _ in range(3):
        asked_round(keeper, opener(made, Batching), [*STEADY, diagnostic])
    assert all(argv[0] != "dcgmi" for batch in made[0].batches for argv in batch)
    assert made[0].alone.count(diagnostic[0]) == 3


def second_round(delay: float = 0.0) -> Any:
    """A batching connection's second round, opened and connected: its asks may come from a batch."""
    keeper, made = batching(), []
    asked_round(keeper, opener(made, Batching), STEADY)
    made[0].delay = delay
    transport = keeper.openers({"gpu-1": opener(made, Batching)})["gpu-1"]()
    transport.connect()
    return transport


def test_an_ask_that_gave_up_on_its_batch_never_gets_its_late_answer_later(monkeypatch: pytest.MonkeyPatch) -> None:
    """The batch's read of an argv whose ask ran alone is not handed to a later ask of it: that ask reads anew."""
    monkeypatch.setattr(kept, "BATCH_PATIENCE_SECONDS", 0.05)
    transport = second_round(delay=0.3)
    argv, kind = STEADY[0]
    assert transport.run(argv, 5.0, kind=kind).stdout == "alone"  # gave up after its patience
    time.sleep(0.5)  # the batch has answered meanwhile
    assert transport.run(argv, 5.0, kind=kind).stdout == "alone"
    transport.close()


def test_after_a_wait_no_ask_takes_what_the_batch_read_before_it() -> None:
    transport = second_round()
    (first, first_kind), (second, second_kind) = STEADY[0], STEADY[2]  # dealt to the same session
    assert transport.run(first, 5.0, kind=first_kind).stdout == "batched"
    transport.forget_batched()  # the walk waits (engine/runner.py)
    assert transport.run(second, 5.0, kind=second_kind).stdout == "alone"
    transport.close()


def test_an_ask_whose_timeout_differs_from_the_batchs_runs_alone() -> None:
    """The host's own `timeout` ends a command at its ask's limit: a read made under another limit is not it."""
    transport = second_round()
    argv, kind = STEADY[0]
    assert transport.run(argv, 2.0, kind=kind).stdout == "alone"  # the batch ran it under 5 s
    assert transport.run(STEADY[1][0], 5.0, kind=STEADY[1][1]).stdout == "batched"
    transport.close()


def test_a_timeout_with_the_same_whole_seconds_is_the_same_limit_on_the_host() -> None:
    """The host's `timeout` takes whole seconds (transports/ssh.py remote_command): 4.2 s is the 5 s it ran
    under, 5.1 s is not."""
    transport = second_round()
    assert transport.run(STEADY[0][0], 4.2, kind=STEADY[0][1]).stdout == "batched"
    assert transport.run(STEADY[1][0], 5.1, kind=STEADY[1][1]).stdout == "alone"
    transport.close()


def test_a_read_whose_timeout_changed_since_the_round_before_is_not_planned() -> None:
    keeper, made = batching(), []
    asked_round(keeper, opener(made, Batching), STEADY)
    transport = keeper.openers({"gpu-1": opener(made, Batching)})["gpu-1"]()
    transport.connect()
    for number, (argv, kind) in enumerate(STEADY):
        transport.run(argv, 3.0 if number == 0 else 5.0, kind=kind)  # the host's deadline was nearer
    transport.close()
    assert STEADY[0][0] not in keeper.plan("gpu-1") and STEADY[1][0] in keeper.plan("gpu-1")


def test_an_argv_two_kinds_share_stays_planned_whichever_kind_asked_it_first() -> None:
    """The query the nvidia-smi and fabric readers share (engine/shared_reads.py) reaches the connection from
    whichever of them asks first, a different one from round to round."""
    shared = ("nvidia-smi", "--query-gpu=index,fabric.state")
    keeper, made = KeptConnections(BATCHABLE | {"fabric"}), []
    for kind in ("nvidia-smi", "fabric", "nvidia-smi", "fabric"):
        asked_round(keeper, opener(made, Batching), [(shared, kind)])
        assert shared in keeper.plan("gpu-1")
    assert made[0].batches[-1] == [shared]


def test_a_read_with_a_big_answer_is_never_batched() -> None:
    """A full read (a whole boot's log, `-q -x`) is asked alone: a batch carries the small steady answers."""

    class Big(Batching):
        def run(self, argv: Sequence[str], timeout: float, kind: str | None = None) -> CommandResult:
            big = "x" * (kept.BATCH_ANSWER_BYTES + 1) if kind == "nvidia-smi" else "small"
            return CommandResult(argv=tuple(argv), rc=0, stdout=big, stderr="", started=0.0, duration=0.0)

    keeper, made = batching(), []
    for _ in range(3):
        asked_round(keeper, opener(made, Big), STEADY)
    batched = {argv for batch in made[0].batches for argv in batch}
    assert STEADY[0][0] not in batched and STEADY[1][0] in batched


def test_forgetting_wakes_an_ask_that_waits_for_its_batch(monkeypatch: pytest.MonkeyPatch) -> None:
    import threading

    monkeypatch.setattr(kept, "BATCH_PATIENCE_SECONDS", 5.0)
    transport = second_round(delay=2.0)
    answered: list[str] = []
    ask = threading.Thread(target=lambda: answered.append(transport.run(STEADY[0][0], 5.0, kind="nvidia-smi").stdout))
    started = time.monotonic()
    ask.start()
    time.sleep(0.2)
    transport.forget_batched()
    ask.join(5)
    assert answered == ["alone"] and time.monotonic() - started < 1.5
    transport.close()


def planned(*seconds: float | None) -> kept.Asked:
    return {("read", str(n)): (5.0, "nvidia-smi", 10, took) for n, took in enumerate(seconds)}


def lane_times(plan: kept.Asked) -> list[float]:
    return sorted(sum(plan[argv][3] or 0.0 for argv in group) for group in kept.lanes(plan))


@pytest.mark.parametrize(
    ("seconds", "times"),
    [
        ((0.02, 0.01, 0.05, None), [0.08]),  # all within the slack of the longest: one lane
        ((0.2, 0.05, 0.05, 0.04, 0.03), [0.17, 0.2]),  # nvidia-smi's query beside the short reads
        ((0.5, 0.02, 0.01), [0.53]),  # the short ones after a long read within the slack: one lane
        ((0.5, 0.08, 0.07), [0.15, 0.5]),  # past it: the long read in a lane of its own, the short ones beside it
        ((0.6, 0.6, 0.04), [0.6, 0.64]),  # two long reads apart; the short one within the slack of the longest
        ((0.6, 0.6, 0.11), [0.11, 0.6, 0.6]),  # past the slack in two lanes: three
        ((0.6, 0.6, 0.6, 0.6), [1.2, 1.2]),  # a third lane would bring the last answer no sooner
        ((0.6, 0.6, 0.6, 0.6, 0.6, 0.6, 0.6), [1.2, 1.2, 1.8]),  # never more than three lanes
        ((0.5, None, None), [0.5]),  # a read of unknown time counts as none: within the slack
        ((0.5, 0.2, None), [0.2, 0.5]),  # and goes to the lane with the least time
        ((None, None, None), [0.0]),  # nothing timed (every read alone last round): one lane
    ],
)
def test_a_batch_runs_in_lanes_where_one_after_the_other_would_wait_on_a_long_read(
    seconds: tuple[float | None, ...], times: list[float]
) -> None:
    plan = planned(*seconds)
    assert lane_times(plan) == pytest.approx(times)
    assert sorted(argv for group in kept.lanes(plan) for argv in group) == sorted(plan)  # each read once


def test_one_lane_keeps_the_order_the_reads_were_asked_in() -> None:
    plan = planned(0.01, 0.05, 0.02)
    assert kept.lanes(plan) == [list(plan)]


class Timed(Batching):
    """Each batched read reports its own time on the host (``host_seconds``, as transports/batch.py writes it)."""

    took = {"--query-gpu=x": 0.8, "-s": 0.8, "fm": 0.01}

    def run_batch(
        self, commands: Sequence[tuple[Sequence[str], float]], lanes: Sequence[int] = ()
    ) -> dict[tuple[str, ...], CommandResult]:
        answers = super().run_batch(commands, lanes)
        for argv, answer in answers.items():
            answer.extra["host_seconds"] = str(self.took[argv[-1]])  # as transports/batch.py writes it
        return answers

    def run(self, argv: Sequence[str], timeout: float, kind: str | None = None) -> CommandResult:
        result = super().run(argv, timeout, kind)
        return CommandResult(result.argv, 0, "alone", "", 0.0, self.took[argv[-1]])  # the client's wall: not known


def test_reads_that_took_long_on_the_host_are_sent_in_lanes_side_by_side() -> None:
    """Two reads of 0.8 s on the host (nvidia-smi's NVML start) are not made to wait for each other in one batch
    once the host's clock said so: the round after sends them in one session, in two lanes side by side
    (transports/batch.py runs them), and each ask takes its answer. A read run alone says nothing of its time on
    the host (its wall is the client's: a channel, the network, a busy client), so the first batch is one lane."""
    keeper, made = batching(), []
    asked_round(keeper, opener(made, Timed), STEADY)  # alone: nothing learned of the host's time
    assert set(asked_round(keeper, opener(made, Timed), STEADY).values()) == {"batched"}
    assert made[0].lanes == [[3]]  # one lane; the host's clock timed each read
    answers = asked_round(keeper, opener(made, Timed), STEADY)
    assert set(answers.values()) == {"batched"}
    assert len(made[0].batches) == 2 and sorted(made[0].lanes[1]) == [1, 2]  # one session, two lanes
    first_lane = made[0].lanes[1][0]
    lanes = [made[0].batches[1][:first_lane], made[0].batches[1][first_lane:]]
    assert all(len({argv[-1] for argv in lane} & {"--query-gpu=x", "-s"}) == 1 for lane in lanes)  # apart
    asked_round(keeper, opener(made, Timed), STEADY)  # learned again from the batches' host_seconds
    assert sorted(made[0].lanes[2]) == [1, 2]
