"""Hosts in flight share one pool of collector threads (engine/session.py ``_pools``: ``concurrency`` threads a
host in flight). A host takes at most ``concurrency`` of them at a time (runner.HostRunner._collect_shared), so
every host in flight gets its turn at once: no host's collectors hold threads while waiting for a turn of their
own, which left other hosts' reads (a kept connection's batch among them) waiting for a thread."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from types import SimpleNamespace
from typing import Any

import pytest

from nightowl.engine.runner import HostRunner

CONCURRENCY = 2


def host(started: dict[str, threading.Event], name: str, others: list[str], seen: list[tuple[str, bool]]) -> Any:
    """A stand-in HostRunner: each collector waits (at most 2 s) for every other host to have started one."""

    def collect_one(entry: str) -> Any:
        started[name].set()
        seen.append((name, all(started[other].wait(2.0) for other in others)))
        return SimpleNamespace(entry=entry)

    options = SimpleNamespace(stop=threading.Event(), concurrency=CONCURRENCY)
    return SimpleNamespace(
        options=options, _collect_one=collect_one, run=SimpleNamespace(collections={}), _check_stop=lambda: None
    )


def test_every_host_in_flight_gets_collector_threads_at_once() -> None:
    names = ["a", "b", "c"]
    started = {name: threading.Event() for name in names}
    seen: list[tuple[str, bool]] = []
    commands = [f"kind-{n}" for n in range(5)]  # more collectors than a host's turn
    runners = {name: host(started, name, [o for o in names if o != name], seen) for name in names}
    with ThreadPoolExecutor(max_workers=CONCURRENCY * len(names)) as pool, ThreadPoolExecutor(3) as hosts:
        done = [hosts.submit(HostRunner._collect_shared, runners[n], commands, pool) for n in names]
        for future in done:
            future.result(timeout=30)
    assert all(saw for _, saw in seen), seen  # no collector waited for a thread another host held
    for name in names:
        assert list(runners[name].run.collections) == commands  # all of them, in the node's order


def test_a_stop_starts_no_further_collector() -> None:
    ran: list[str] = []
    options = SimpleNamespace(stop=threading.Event(), concurrency=1)

    def collect_one(entry: str) -> Any:
        ran.append(entry)
        options.stop.set()
        return SimpleNamespace(entry=entry)

    def check_stop() -> None:
        raise KeyboardInterrupt

    runner = SimpleNamespace(
        options=options, _collect_one=collect_one, run=SimpleNamespace(collections={}), _check_stop=check_stop
    )
    with ThreadPoolExecutor(2) as pool, pytest.raises(KeyboardInterrupt):
        HostRunner._collect_shared(runner, ["one", "two", "three"], pool)  # type: ignore[arg-type]
    assert ran == ["one"] and list(runner.run.collections) == ["one"]


def test_a_collector_that_fails_stops_the_others_taking_more_and_is_raised_at_once() -> None:
    """A bug in one collector (an exception, not evidence) ends the host's collection: no other task takes a
    further collector after the walk has ended, and the failure is raised without waiting for the others."""
    ran: list[str] = []
    release = threading.Event()
    options = SimpleNamespace(stop=threading.Event(), concurrency=2)

    def collect_one(entry: str) -> Any:
        ran.append(entry)
        if entry == "fails":
            raise RuntimeError("a bug")
        release.wait(5.0)  # the other task is busy while the failure is raised
        return SimpleNamespace(entry=entry)

    runner = SimpleNamespace(
        options=options, _collect_one=collect_one, run=SimpleNamespace(collections={}), _check_stop=lambda: None
    )
    with ThreadPoolExecutor(2) as pool:
        with pytest.raises(RuntimeError, match="a bug"):
            HostRunner._collect_shared(runner, ["slow", "fails", "later", "last"], pool)  # type: ignore[arg-type]
        assert not release.is_set()  # raised while "slow" still ran
        assert runner.run.collections == {}  # what had finished by then: nothing
        release.set()
    assert ran == ["slow", "fails"]  # the busy task finished its own and took nothing more
