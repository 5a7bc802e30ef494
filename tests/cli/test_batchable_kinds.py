"""Which reads `sweep --every` lets a kept connection send in a batch (cli/sweep_every.batchable_kinds): the
read-only command collectors of the runbook's first node, never an invasive one, a derived one (it runs no
command) or a read only a branch asks."""

from __future__ import annotations

from types import SimpleNamespace

from nightowl.cli.sweep_every import batchable_kinds
from nightowl.library import runbooks


def loaded_with(first: list[str], other: list[str]) -> SimpleNamespace:
    nodes = {"start": SimpleNamespace(collect=first), "branch": SimpleNamespace(collect=other)}
    return SimpleNamespace(runbook=SimpleNamespace(entry="start", nodes=nodes))


def test_only_the_first_nodes_read_only_command_collectors() -> None:
    first = ["nvidia-smi", "dcgmi-diag-drained", "xid-judgement", "nvlink:before", "no-such-kind"]
    loaded = loaded_with(first, ["fabric"])
    assert batchable_kinds(loaded) == frozenset({"nvidia-smi", "nvlink"})


def test_a_first_node_that_only_decides_batches_nothing() -> None:
    only_decides = SimpleNamespace(runbook=SimpleNamespace(entry="judge", nodes={"judge": SimpleNamespace()}))
    assert batchable_kinds(only_decides) == frozenset()


def test_node_health_batches_its_steady_reads() -> None:
    kinds = batchable_kinds(runbooks.load("node-health"))
    assert {"nvidia-smi", "fabric", "nvlink", "nvlink-errors", "kernel-log", "fabric-manager"} <= kinds
    assert not kinds & {"dcgmi-diag-drained", "nccl-tests", "xid-judgement", "gpu-history"}
