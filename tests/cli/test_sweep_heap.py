"""`nightowl sweep --every` keeps what outlives its rounds out of the cyclic collector's passes (gc.freeze at each
round's start) and collects it in full every few rounds, so cycles that became garbage are still freed."""

from __future__ import annotations

import gc
import weakref
from collections.abc import Iterator
from typing import Any

import pytest

from nightowl.cli import sweep_every


class _Cycle:
    """An object in a reference cycle: only the cyclic collector frees it."""

    def __init__(self) -> None:
        self.me = self


@pytest.fixture(autouse=True)
def _collector_as_it_was() -> Iterator[None]:
    thresholds = gc.get_threshold()
    yield
    gc.unfreeze()
    gc.set_threshold(*thresholds)


def _garbage_cycle() -> weakref.ref[_Cycle]:
    cycle = _Cycle()
    return weakref.ref(cycle)  # the cycle is garbage once this returns; the reference does not keep it


def test_a_round_freezes_what_outlived_the_last() -> None:
    gc.collect()
    before = gc.get_freeze_count()
    kept = [[] for _ in range(1000)]  # tracked objects, alive across the round
    sweep_every.settle_heap(2)
    assert gc.get_freeze_count() >= before + 1000
    assert not any(item is kept[-1] for item in gc.get_objects())  # out of every generation the collector scans


def test_cycles_frozen_as_garbage_are_freed_at_the_next_full_collection() -> None:
    gc.collect()
    dead = _garbage_cycle()
    sweep_every.settle_heap(2)  # frozen with the rest
    gc.collect()
    assert dead() is not None  # out of the collector's sight while frozen
    for number in range(3, sweep_every.FULL_COLLECTION_ROUNDS):
        sweep_every.settle_heap(number)
        assert dead() is not None
    alive = [[] for _ in range(3)]
    sweep_every.settle_heap(sweep_every.FULL_COLLECTION_ROUNDS)
    assert dead() is None
    assert not any(item is alive[-1] for item in gc.get_objects())  # and what lives on is frozen again


def test_the_rounds_run_with_young_and_middle_passes_spaced_and_the_collector_restored_after() -> None:
    before = gc.get_threshold()
    seen: list[tuple[Any, ...]] = []

    def sweep_round(*_args: Any) -> int:
        seen.append((gc.get_threshold()[:2], gc.get_freeze_count() > 0))
        return 0

    status = sweep_every.sweep_every(sweep_every.Rounds(0.0, 3), lambda keeper: ({}, None, {}), sweep_round)
    assert status == 0
    spaced = (sweep_every.YOUNG_OBJECTS, sweep_every.MIDDLE_PASSES)
    assert seen == [(spaced, True)] * 3  # every round frozen first, young and middle passes spaced
    assert gc.get_threshold() == before
    assert gc.get_freeze_count() == 0
