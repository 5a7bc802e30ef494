"""Flow control (nightowl/engine/flow.py): hosts in flight follow the reader's lag, driven here by hand.

No timing: every lag sample and its time are given, so each test says exactly what the limit must be."""

from __future__ import annotations

import threading
import types

import pytest

import nightowl.engine.flow as flow_module
from nightowl.engine.flow import AdaptiveLimit


def test_a_prompt_reader_adds_one_host_a_sample_and_a_lagging_or_busy_one_halves() -> None:
    flow = AdaptiveLimit(maximum=64, start=4, high=0.1, low=0.02, cooldown=1.0)
    working = 0.7  # this process used 70% of a core over each sample: past IDLE, under BUSY
    flow.in_flight = 4  # every slot in use
    assert flow.observe(0.0, 0.25, working) == 5
    flow.in_flight = 2  # slots left unused: more would not be used either
    assert flow.observe(0.0, 0.5, working) == 5
    flow.in_flight = 5
    assert [flow.observe(0.01, t, working) for t in (0.75, 1.0)] == [6, 6]  # a full slot each: +1, then 6 > 5
    flow.in_flight = 64
    assert [flow.observe(0.0, 1.0 + i / 4, working) for i in range(1, 5)] == [7, 8, 9, 10]
    assert flow.observe(0.3, 2.5, working) == 10  # one late wake alone (the scheduler's noise): held
    assert flow.observe(0.0, 2.75, working) == 11  # prompt again: one more
    assert flow.observe(0.3, 3.0, working) == 11  # late again, but not twice in a row: held
    assert flow.observe(0.3, 3.25, working) == 5  # late twice in a row: behind, half
    assert flow.observe(0.5, 3.5) == 5  # the same burst (within the cooldown): no second cut
    assert flow.observe(0.0, 3.75, busy=1.0) == 5  # a whole core used, still within the cooldown
    assert flow.observe(0.0, 4.3, busy=1.0) == 2  # a second on, the GIL still saturated: half again
    assert flow.observe(0.05, 4.5) == 2  # between low and high: held
    assert flow.lowest == 2


def test_the_rule_at_its_bounds() -> None:
    """A wake exactly ``high`` late is not late, a core used exactly at BUSY is not busy, a wake exactly ``low``
    late is not prompt, and a second cut exactly ``cooldown`` after the first is no longer the same burst."""
    from nightowl.engine.flow import BUSY

    flow = AdaptiveLimit(maximum=64, start=16, high=0.1, low=0.02, cooldown=1.0)
    flow.in_flight = 64
    assert [flow.observe(0.1, t) for t in (0.25, 0.5, 0.75)] == [16, 16, 16]  # at high, three in a row: held
    assert flow.observe(0.0, 1.0, busy=BUSY) == 17  # at BUSY: not behind (and past IDLE: one more)
    assert flow.observe(0.02, 1.25, busy=BUSY) == 17  # at low: not prompt, held
    assert flow.observe(0.0, 1.5, busy=1.0) == 8  # busy: half
    assert flow.observe(0.0, 2.5, busy=1.0) == 4  # exactly the cooldown later: half again
    stalled = AdaptiveLimit(maximum=64, start=16, high=0.1, stall=0.5)
    assert stalled.observe(0.5, 0.25) == 16  # once exactly at the stall: a late wake like any other, held
    assert stalled.observe(0.0, 0.5) == 16
    assert stalled.observe(0.51, 0.75) == 8  # once past it: behind at once, half


def test_one_long_stall_is_behind_and_lowers_where_the_next_round_starts() -> None:
    """A wake past ``stall`` (outputs waited that long unread, whatever held the cores) halves alone, and the
    next round starts from there; so does a lag that lasts, one sample late within the cooldown included."""
    from nightowl.engine.flow import FlowMemory

    memory = FlowMemory()
    flow = AdaptiveLimit(32, start=20, memory=memory)
    flow.in_flight = 20
    assert flow.observe(2.0, 1.0) == 10 and memory.limit == 10  # half, and the peak with it
    assert AdaptiveLimit(32, memory=memory).limit == 10
    busy_then_late = AdaptiveLimit(32, start=16, memory=FlowMemory())
    assert busy_then_late.observe(0.3, 1.0, busy=1.0) == 8  # busy and late: half, for the CPU
    assert busy_then_late.observe(0.3, 1.5, busy=0.1) == 8  # late again within the cooldown: no second cut
    assert busy_then_late.memory is not None and busy_then_late.memory.limit == 8  # but the lag lowers the peak


def test_a_prompt_reader_with_a_core_to_spare_adds_a_quarter_of_its_hosts_a_sample() -> None:
    """Under IDLE (half a core) a prompt reader's hosts mostly wait for answers: a quarter more a sample, at least
    one; at or past IDLE, one; never past the ceiling."""
    from nightowl.engine.flow import IDLE

    flow = AdaptiveLimit(maximum=40, start=4)
    flow.in_flight = 40
    assert [flow.observe(0.0, t / 4, busy=0.1) for t in range(1, 8)] == [5, 6, 7, 8, 10, 12, 15]
    assert flow.observe(0.0, 2.0, busy=IDLE) == 16
    assert [flow.observe(0.0, 2.25 + t / 4, busy=0.1) for t in range(5)] == [20, 25, 31, 38, 40]


def test_the_limit_stays_within_one_and_the_ceiling() -> None:
    flow = AdaptiveLimit(maximum=3, start=8)
    assert flow.limit == 3
    for step in range(10):
        flow.observe(5.0, step * 2.0)
    assert flow.limit == 1 and flow.lowest == 1
    flow.in_flight = 3
    for step in range(10):
        flow.observe(0.0, 100 + step)
    assert flow.limit == 3


def test_hosts_wait_for_a_slot_in_the_order_they_asked() -> None:
    """64 forks asked for at once while the reader lags: only the limit is in flight, the rest wait, in order."""
    flow = AdaptiveLimit(maximum=64, start=2)
    admitted: list[int] = []
    lock = threading.Lock()
    release = threading.Semaphore(0)

    def host(number: int) -> None:
        with flow.slot() as taken:
            assert taken
            with lock:
                admitted.append(number)
            release.acquire()

    threads = []
    for number in range(6):  # each asks only once the one before holds its ticket: a known order
        thread = threading.Thread(target=host, args=(number,), daemon=True)
        thread.start()
        threads.append(thread)
        _wait_until(lambda n=number: flow.asked == n + 1)
    _wait_until(lambda: flow.in_flight == 2)
    assert admitted == [0, 1] and flow.in_flight == 2  # the limit, not the 6 threads
    release.release()
    _wait_until(lambda: len(admitted) == 3)
    assert admitted == [0, 1, 2]
    flow.observe(0.0, 1.0)  # the reader keeps up and every slot is used: one more goes in, the next in order
    _wait_until(lambda: len(admitted) == 4)
    assert admitted == [0, 1, 2, 3] and flow.limit == 3
    flow.observe(0.0, 2.0)
    _wait_until(lambda: len(admitted) == 5)
    assert admitted == [0, 1, 2, 3, 4]
    for _ in range(6):
        release.release()
    for thread in threads:
        thread.join(5)
    assert admitted == list(range(6)) and flow.in_flight == 0


def test_a_stop_while_waiting_takes_no_slot_and_lets_the_next_in() -> None:
    flow = AdaptiveLimit(maximum=4, start=1)
    stop = threading.Event()
    assert flow.acquire()
    outcome: list[bool] = []
    waiter = threading.Thread(target=lambda: outcome.append(flow.acquire(stop)), daemon=True)
    waiter.start()
    _wait_until(lambda: flow.asked == 2)
    stop.set()
    waiter.join(5)
    assert outcome == [False] and flow.in_flight == 1
    flow.release()
    assert flow.acquire()  # the gone ticket does not block the next one
    assert flow.in_flight == 1


def test_a_waiter_whose_slot_came_as_it_gave_up_hands_the_slot_on() -> None:
    """A stop and a slot at the same moment: the waiter takes no slot, and the one it was handed goes to the
    next in line rather than being lost."""
    flow = AdaptiveLimit(maximum=4, start=1)
    assert flow.acquire()
    later: list[bool] = []
    behind = threading.Thread(target=lambda: later.append(flow.acquire()), daemon=True)
    turn = threading.Lock()
    turn.acquire()
    with flow._lock:
        flow._waiting.append(turn)  # a waiter's place, ahead of ``behind``
    behind.start()
    _wait_until(lambda: len(flow._waiting) == 2)
    flow.release()  # the slot goes to ``turn``: released, out of the queue
    assert turn.acquire(blocking=False) and flow.in_flight == 1 and later == []
    assert flow._give_up(turn) is False  # as its waiter does on finding its stop set
    behind.join(5)
    assert later == [True] and flow.in_flight == 1


def test_hosts_behind_one_slot_wait_on_locks_of_their_own_and_go_in_in_order() -> None:
    """Sixteen hosts waiting behind one slot, each on its own lock (the wake-ups this saves are measured by
    bench/flow_slots.py, not here): each release lets in the next in line."""
    flow = AdaptiveLimit(maximum=32, start=1)
    assert flow.acquire()
    woken: list[int] = []
    lock = threading.Lock()

    def host(number: int) -> None:
        assert flow.acquire()
        with lock:
            woken.append(number)
        flow.release()

    threads = [threading.Thread(target=host, args=(n,), daemon=True) for n in range(16)]
    for number, thread in enumerate(threads):
        thread.start()
        _wait_until(lambda n=number: len(flow._waiting) == n + 1)
    turns = list(flow._waiting)
    flow.release()
    for thread in threads:
        thread.join(5)
    assert woken == list(range(16)) and flow.in_flight == 0
    assert len(set(map(id, turns))) == 16  # a lock of its own each, none shared


def test_a_stop_set_before_asking_takes_no_slot_even_when_one_is_free() -> None:
    flow = AdaptiveLimit(maximum=4, start=2)
    stop = threading.Event()
    stop.set()
    assert flow.acquire(stop) is False
    assert flow.in_flight == 0 and not flow._waiting


def test_an_interrupt_while_waiting_leaves_no_place_in_the_queue(monkeypatch: pytest.MonkeyPatch) -> None:
    """Ctrl-C in a thread waiting for a slot: its place goes, so the slot is not counted for a host that never
    runs (the next host gets it)."""
    flow = AdaptiveLimit(maximum=4, start=1)
    assert flow.acquire()

    class Interrupting:
        """A waiter's lock: taken as it joins the queue, then the wait for it is interrupted."""

        def __init__(self) -> None:
            self.calls = 0

        def acquire(self, blocking: bool = True, timeout: float = -1) -> bool:
            self.calls += 1
            if self.calls == 1:
                return True
            raise KeyboardInterrupt

        def release(self) -> None:
            pass

    monkeypatch.setattr(flow_module, "threading", types.SimpleNamespace(Lock=Interrupting))
    with pytest.raises(KeyboardInterrupt):
        flow.acquire()
    monkeypatch.undo()
    assert not flow._waiting
    flow.release()
    assert flow.in_flight == 0 and flow.acquire() and flow.in_flight == 1


def test_a_slot_that_comes_with_the_stop_goes_to_the_next_in_line() -> None:
    flow = AdaptiveLimit(maximum=4, start=1)
    assert flow.acquire()
    stop = threading.Event()
    outcome: dict[str, bool] = {}
    stopped = threading.Thread(target=lambda: outcome.update(stopped=flow.acquire(stop)), daemon=True)
    stopped.start()
    _wait_until(lambda: len(flow._waiting) == 1)
    behind = threading.Thread(target=lambda: outcome.update(behind=flow.acquire()), daemon=True)
    behind.start()
    _wait_until(lambda: len(flow._waiting) == 2)
    stop.set()
    flow.release()  # the slot goes to the stopped waiter (or, had it just looked, past it): either way on
    stopped.join(5)
    behind.join(5)
    assert outcome == {"stopped": False, "behind": True} and flow.in_flight == 1


def test_a_waiter_with_a_stop_not_set_waits_past_its_looks_for_its_slot() -> None:
    flow = AdaptiveLimit(maximum=4, start=1)
    assert flow.acquire()
    stop = threading.Event()
    outcome: list[bool] = []
    waiter = threading.Thread(target=lambda: outcome.append(flow.acquire(stop)), daemon=True)
    waiter.start()
    _wait_until(lambda: flow.asked == 2)
    threading.Event().wait(flow_module.STOP_LOOK * 2.5)  # it looked at the stop twice meanwhile
    assert outcome == [] and len(flow._waiting) == 1
    flow.release()
    waiter.join(5)
    assert outcome == [True] and flow.in_flight == 1


def _wait_until(condition, seconds: float = 5.0) -> None:  # type: ignore[no-untyped-def]
    event = threading.Event()
    for _ in range(int(seconds / 0.005)):
        if condition():
            return
        event.wait(0.005)
    raise AssertionError("condition not reached")


def test_a_connection_held_back_past_the_grace_time_is_dialed_anew(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """A host flow control kept waiting gets a fresh connection, never sshd's closed one (LoginGraceTime)."""
    import socket

    from nightowl.transports import dial as dial_module

    server = socket.create_server(("127.0.0.1", 0))
    try:
        dialer = dial_module.Dialer({"h": ("127.0.0.1", server.getsockname()[1])}, timeout=2.0)
        a, b = socket.socketpair()
        clock = [1000.0]
        monkeypatch.setattr(dial_module.time, "monotonic", lambda: clock[0])
        dialer._ready["h"], dialer._ready_since["h"] = a, clock[0]
        clock[0] += dial_module.STALE_SECONDS + 1
        assert dialer.take("h") is None  # the transport connects by itself
        assert a.fileno() == -1  # the stale one was closed
        dialer._ready["h"], dialer._ready_since["h"] = b, clock[0]
        clock[0] += 1
        assert dialer.take("h") is b
        b.close()
    finally:
        server.close()


def test_a_repeating_caller_starts_where_its_last_run_ended() -> None:
    """sweep --every: the next round's first slots are the limit the last round reached, not the rule's START."""
    from nightowl.engine.flow import START, FlowMemory

    memory = FlowMemory()
    first = AdaptiveLimit(32, memory=memory)
    assert first.limit == START  # nothing learned yet
    for _ in range(6):  # a prompt reader, every slot in use, working: one host more per sample
        first.in_flight = first.limit
        first.observe(0.0, 0.0, busy=0.7)
    assert memory.limit == first.limit == START + 6
    second = AdaptiveLimit(32, memory=memory)
    assert second.limit == START + 6
    second.observe(0.5, 10.0)  # one late wake: held, and so is the memory
    assert memory.limit == second.limit == START + 6
    second.observe(0.5, 10.25)  # late twice in a row: behind, halved, and the memory follows
    assert memory.limit == (START + 6) // 2
    assert AdaptiveLimit(16, memory=FlowMemory(limit=99)).limit == 16  # never past this run's ceiling


def test_a_burst_of_cpu_halves_the_limit_but_the_next_round_starts_from_the_peak() -> None:
    """A round's hosts finishing at once use a whole core (``busy``) without the reader being late: the limit
    halves within the round, but the next one starts where this one peaked; a late reader lowers that too."""
    from nightowl.engine.flow import START, FlowMemory

    memory = FlowMemory()
    limit = AdaptiveLimit(32, memory=memory)
    for _ in range(6):
        limit.in_flight = limit.limit
        limit.observe(0.0, 0.0, busy=0.7)
    limit.observe(0.0, 5.0, busy=0.95)
    assert limit.limit == (START + 6) // 2 and memory.limit == START + 6
    assert AdaptiveLimit(32, memory=memory).limit == START + 6
    limit.observe(0.5, 10.0)
    limit.observe(0.5, 10.25)  # late twice in a row: the peak goes down with the limit
    assert memory.limit == limit.limit == (START + 6) // 4


def _collect_threads_alive() -> int:
    return sum(1 for thread in threading.enumerate() if thread.name.startswith(("host_", "collect_")))


def test_a_repeating_caller_runs_on_the_threads_its_last_run_left_idle(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """sweep --every: a round's host and collector threads are the last round's, kept idle (FlowMemory.pool),
    not started anew each round; a run without a memory ends its own; dropping the memory's pools ends them."""
    from pathlib import Path

    from nightowl.collectors import get_collector
    from nightowl.engine.flow import FlowMemory
    from nightowl.engine.runner import RunOptions
    from nightowl.engine.session import run_runbook
    from nightowl.library import runbooks
    from nightowl.transports.replay import ReplayTransport

    folder = Path(__file__).resolve().parents[2] / "fixtures" / "hosts" / "healthy-l40s"
    loaded = runbooks.load("node-health")
    memory = FlowMemory()

    def one_run(number: int, memory: FlowMemory | None) -> None:
        options = RunOptions(params=loaded.resolve_params({}), flow_memory=memory)
        hosts = {f"gpu-{n}": (lambda n=n: ReplayTransport(folder, f"gpu-{n}")) for n in range(3)}
        runs, _ = run_runbook(loaded, hosts, get_collector, options, tmp_path / f"run-{number}", forks=3)
        assert [run.verdict["action"] for run in runs] == ["none"] * 3

    before = _collect_threads_alive()
    one_run(1, memory)
    kept = {name: pool for name, (_, pool) in memory.pools.items()}
    assert set(kept) == {"host", "collect"} and _collect_threads_alive() > before  # idle, kept
    alive = _collect_threads_alive()
    one_run(2, memory)
    assert {name: pool for name, (_, pool) in memory.pools.items()} == kept  # the same pools
    assert _collect_threads_alive() == alive  # no thread more
    one_run(3, None)
    assert _collect_threads_alive() == alive  # its own pools ended with it
    memory.drop_pools()
    _wait_until(lambda: _collect_threads_alive() == before)
    assert memory.pools == {}
