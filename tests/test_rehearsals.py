"""Every rehearsal in fixtures/rehearsals/ reaches its expected path and verdict."""

from __future__ import annotations

import pytest

from nightowl import runbooks
from nightowl.rehearse import rehearsal_cases, rehearse

CASES = [(name, case) for name in runbooks.builtin_paths() for case in rehearsal_cases(name)]


@pytest.mark.parametrize(("runbook", "case"), CASES, ids=[f"{n}:{c.get('name', c.get('host'))[:60]}" for n, c in CASES])
def test_rehearsal(runbook: str, case: dict) -> None:
    result = rehearse(runbook, case)
    assert result.passed, f"{result.name}: {'; '.join(result.problems)} (path {result.path})"


# Verdicts no public report in the corpus shows; listed so a gap is a decision, not an accident.
NOT_IN_CORPUS = {
    "xid": {
        "recovery-node-reboot",
        "recovery-drain-and-reset",
        "row-remap-failed",
        "sram-threshold-exceeded",
        "uncorrectable-ecc-dbe",
        "uncontained-memory-error",
        "suspect-gpu",
        "unknown-xid",
        "xid-requires-reboot",
        "xid-check-mechanicals",
        "xid-report-to-vendor",
        "thermal-or-power-slowdown",
        "pcie-link-degraded",
        "not-enough-evidence",
    },
    "oom": {
        "cudagraph-capture-oom",
        "gpu-occupied-at-start",
        "gpu-oom-unplaced",
        "host-oom-during-load",
        "not-enough-evidence",
        "runtime-activation-oom",
    },
    "p99-regression": {
        "admission-cap",
        "batch-growth",
        "kv-capacity",
        "output-length-shift",
        "preemption",
        "prefix-cache-miss",
        "server-overhead",
    },
    "nccl-hang": {"gdr-not-used", "rail-below-baseline"},
    "preflight": {"tp-group-without-nvlink", "cpu-governor-not-performance"},
    "engine-start": {
        "driver-older-than-runtime",
        "hub-unreachable",
        "architecture-not-supported",
        "port-in-use",
        "shm-bus-error",
        "host-oom-killed",
    },
    "node-health": {
        "no-evidence",
        "app-xids-seen",
        "xid-reboot-node",
        "xid-hardware-check",
        "xid-escalate",
        "row-remap-failed",
        "hw-slowdown",
        "pcie-degraded",
    },
}


@pytest.mark.parametrize("runbook", sorted(runbooks.builtin_paths()))
def test_every_verdict_is_rehearsed_or_listed(runbook: str) -> None:
    loaded = runbooks.load(runbook)
    verdicts = {n.verdict.id for n in loaded.runbook.nodes.values() if n.verdict}
    rehearsed = {c["expect"].get("verdict") for c in rehearsal_cases(runbook)}
    assert verdicts - rehearsed - NOT_IN_CORPUS.get(runbook, set()) == set()
    assert NOT_IN_CORPUS.get(runbook, set()) & rehearsed == set(), "now rehearsed: drop it from NOT_IN_CORPUS"
