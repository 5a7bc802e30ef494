"""The circuit breaker under concurrency (issue 42 item 2): 12 checks on 12 nodes, each deciding alone with
only the scheduler as common ground, never leave more nodes drained (or unhealthy) than the cap, whatever the
interleaving (tests/fleet/scheduler_standin.py). The real slurmctld/slurmd: tests/fleet/test_slurm_breaker.py."""

from __future__ import annotations

import contextlib
import random
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from nightowl.fleet import actions_log, drain_record
from nightowl.fleet.breaker import Caps
from nightowl.fleet.k8s_condition import CONDITION, Timing, set_condition
from nightowl.fleet.slurm_actions import drain
from tests.fleet.scheduler_standin import WATCHDOG_S, Interleaver, KubeStandin, SlurmStandin, VirtualClock

CHECKS = [f"gpu-{i:02d}" for i in range(1, 13)]
NODES = CHECKS + [f"gpu-{i:02d}" for i in range(13, 25)]
SPEED = 10.0  # one scheduler second is a tenth of a real one
# Every order a check can act in: reverse name order is the one that beat the old breaker (each check
# ranked itself first by name among the drains of its second); the others as controls.
SCHEDULES = [
    ("at-once", []),
    ("sequential", list(reversed(CHECKS))),
    ("sequential", CHECKS),
    ("sequential", random.Random(42).sample(CHECKS, len(CHECKS))),
]
IDS = ["at-once", "reverse-names", "names", "shuffled"]


def run_checks(act: Callable[[str], dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Every check in its own thread, started together; each one's outcome (a watchdog, never a hang)."""
    results: dict[str, dict[str, Any]] = {}
    errors: list[BaseException] = []

    def one(node: str) -> None:
        try:
            results[node] = act(node)
        except BaseException as exc:  # noqa: BLE001 - reported below, with the node
            errors.append(exc)

    threads = [threading.Thread(target=one, args=(n,), daemon=True) for n in CHECKS]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(WATCHDOG_S * 2)
    assert not any(t.is_alive() for t in threads), "a check never finished"
    assert not errors, errors
    return results


def assert_one_kept(results: dict[str, dict[str, Any]], kept_result: str, log: Path, exactly: bool = True) -> str:
    """At most the cap (1) kept, every other check held having undone its own action, each logged.
    ``exactly``: and one kept (Slurm's stamps are the scheduler's, so no load can make all undo theirs)."""
    by_result = {r: sorted(n for n, e in results.items() if e["result"] == r) for r in ("held", kept_result)}
    kept = len(by_result[kept_result])
    assert kept <= 1 and len(by_result["held"]) == len(CHECKS) - kept, results
    assert kept == 1 or not exactly, results
    undone = [e for e in results.values() if e["result"] == "held"]
    assert all("its own" in e["why"] and "undone" in e["why"] for e in undone), undone
    # each check logged its intent before acting and its outcome after; the chain holds
    logged = actions_log.read(log)
    assert sorted(e["node"] for e in logged if e["result"] == "intended") == sorted(
        [*CHECKS, *(e["node"] for e in undone)] if kept_result == "set" else CHECKS
    )
    assert sorted(e["node"] for e in logged if e["result"] != "intended") == sorted(CHECKS)
    assert actions_log.verify(log) == []
    return by_result[kept_result][0] if kept else ""


@pytest.mark.parametrize(("schedule", "order"), SCHEDULES, ids=IDS)
def test_twelve_slurm_checks_at_once_drain_at_most_the_cap(tmp_path: Path, schedule: str, order: list[str]) -> None:
    clock = VirtualClock(SPEED)
    slurm = SlurmStandin(NODES, clock, Interleaver(CHECKS, schedule, order))
    log = tmp_path / "actions.jsonl"

    def check(node: str) -> dict[str, Any]:
        # each check waits out the scheduler's second (1.2 s of its clock) before it confirms
        client = slurm.client(node)
        return drain(
            client, node, "gpu-fell-off-bus", "reboot-node", Caps(max_drain=1), log, now=clock.local,
            settle=clock.real(1.2),
        )  # fmt: skip

    results = run_checks(check)
    kept = assert_one_kept(results, "drained", log)
    assert [n for n, s in slurm.state.items() if s.drained] == [kept]
    assert sorted(n for _, what, n in slurm.calls if what == "resume") == sorted(set(CHECKS) - {kept})


@pytest.mark.parametrize(("schedule", "order"), SCHEDULES, ids=IDS)
def test_twelve_k8s_checks_at_once_set_at_most_the_cap_unhealthy(
    tmp_path: Path, schedule: str, order: list[str]
) -> None:
    clock = VirtualClock(SPEED)
    kube = KubeStandin(NODES, Interleaver(CHECKS, schedule, order))
    log = tmp_path / "actions.jsonl"
    timing = Timing(now=clock.utc, settle=clock.real(3.0))
    verdict = {"id": "gpu-fell-off-bus", "action": "reboot-node", "summary": "GPU 0000:a1:00 fell off the bus"}

    def check(node: str) -> dict[str, Any]:
        report = {"run_id": f"r-{node}", "hosts": [{"host": node, "status": "ok", "verdict": verdict}]}
        return set_condition(kube.client(node), node, report, 1, Caps(max_drain=1), log, timing=timing)

    results = run_checks(check)
    # a check whose patch lands late (a loaded test machine) undoes its own: at most one, maybe none
    kept = assert_one_kept(results, "set", log, exactly=False)
    unhealthy = [n for n, c in kube.conditions.items() if c and c["status"] == "False"]
    assert unhealthy == ([kept] if kept else [])
    for node in set(CHECKS) - {kept}:
        held = kube.conditions[node]
        assert held is not None and held["type"] == CONDITION and held["status"] == "Unknown"
        assert held["message"].startswith("held by nightowl: circuit breaker open")


def test_without_waiting_out_the_second_the_race_is_lost(tmp_path: Path) -> None:
    """The same adversarial order with no settle (the old breaker: confirm at once) drains more than the cap:
    the schedule really is adversarial, so the tests above would catch the old code."""
    clock = VirtualClock(0)  # every drain in the same scheduler second, as checks started together make them
    slurm = SlurmStandin(NODES, clock, Interleaver(CHECKS, "sequential", list(reversed(CHECKS))))

    def check(node: str) -> dict[str, Any]:
        return drain(
            slurm.client(node), node, "v", "reboot-node", Caps(max_drain=1), tmp_path / "a.jsonl", now=clock.local,
            settle=0,
        )  # fmt: skip

    results = run_checks(check)
    # every drain of the same scheduler second ranks the later (lower-named) check first: each keeps its own
    assert sum(e["result"] == "drained" for e in results.values()) == len(CHECKS)


def test_the_drain_record_is_a_compare_and_set(tmp_path: Path) -> None:
    lock = tmp_path / "drain.lock"
    first, second = drain_record.read(lock), drain_record.read(lock)
    assert first.version == 0
    assert drain_record.commit(first, "gpu-01", "drain", 3600)
    assert not drain_record.commit(second, "gpu-02", "drain", 3600)  # read version 0 too: it lost
    now = drain_record.read(lock)
    assert now.version == 1 and [d["node"] for d in now.drains] == ["gpu-01"]
    assert drain_record.commit(now, "gpu-02", "drain", 3600)
    assert [d["node"] for d in drain_record.read(lock).drains] == ["gpu-01", "gpu-02"]


@pytest.mark.parametrize("scheduler", ["slurm", "k8s"])
def test_with_a_lock_that_does_not_lock_the_record_still_holds_the_cap(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, scheduler: str
) -> None:
    """--lock on a file system whose flock is local to each client (Lustre's localflock): every check thinks
    it holds the lock. The compare-and-set record alone still lets one decision through per version, so the
    cap holds before any check acts, with no settle at all."""
    monkeypatch.setattr("nightowl.fleet.slurm_actions.locked", lambda lock: contextlib.nullcontext())
    clock = VirtualClock(SPEED)
    interleaver = Interleaver(CHECKS, "free")
    lock, log = tmp_path / "drain.lock", tmp_path / "actions.jsonl"
    slurm, kube = SlurmStandin(NODES, clock, interleaver), KubeStandin(NODES, interleaver)
    verdict = {"id": "gpu-fell-off-bus", "action": "reboot-node", "summary": "s"}

    def check(node: str) -> dict[str, Any]:
        if scheduler == "slurm":
            return drain(
                slurm.client(node), node, "v", "reboot-node", Caps(max_drain=1), log, lock=lock, now=clock.local,
                settle=0,
            )  # fmt: skip
        report = {"hosts": [{"host": node, "verdict": verdict}]}
        timing = Timing(now=clock.utc, settle=0)
        return set_condition(kube.client(node), node, report, 1, Caps(max_drain=1), log, lock=lock, timing=timing)

    results = run_checks(check)
    kept = [n for n, e in results.items() if e["result"] in ("drained", "set")]
    assert len(kept) == 1 and all(e["result"] == "held" for n, e in results.items() if n not in kept), results
    # the others were held before acting: no drain to undo
    assert not any("undone" in e["why"] for e in results.values())
    assert [d["node"] for d in drain_record.read(lock).drains] == kept
