"""Ablation: every rehearsal replayed with each recorded output removed, then emptied (exit 0, no text).
No run may come back healthier than the full recording, and nothing may crash."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from concurrent.futures import Executor
from pathlib import Path

import pytest

from nightowl.library import runbooks
from nightowl.library.rehearse import ablate, ablate_cases, ablation_pool, rehearsal_cases

CORES = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


@pytest.fixture(scope="module")
def pool() -> Iterator[Executor]:
    """Every case's ablated runs are pure CPU and independent: spread over the cores this process may use,
    by processes started once for the module (each pays its imports and runbook loads once)."""
    with ablation_pool(min(CORES, 8)) as workers:
        yield workers


@pytest.mark.parametrize("runbook", list(runbooks.builtin_paths()))
def test_no_ablated_run_is_healthier(runbook: str, pool: Executor) -> None:
    runs, findings = ablate_cases([runbook], pool=pool)
    assert runs > 0
    assert not findings, "\n".join(f"{f.case} [{f.host}/{f.output} {f.mode}] {f.problem}" for f in findings)


def node_health_without_kernel_log_guard() -> str:
    """node-health with its kernel-log guard dropped: a healthy verdict then survives without the kernel log."""
    source = runbooks.builtin_paths()["node-health"].read_text()
    guard = (
        "status.kernel_log != 'ok' or status.xid_judgement != 'ok' or status.pcie_attribution != 'ok'"
        " or status.gpu_history != 'ok'"
    )
    assert guard in source
    # Still read (so `runbook validate`'s hidden-failure lint passes it), never true: only a run can tell.
    vacuous = (
        "status.kernel_log == 'never' and status.xid_judgement == 'never' and status.pcie_attribution == 'never'"
        " and status.gpu_history == 'never'"
    )
    return source.replace(guard, vacuous)


def test_ablation_catches_a_runbook_that_calls_absence_healthy(tmp_path: Path, monkeypatch) -> None:  # noqa: ANN001
    """The check can fail: drop the kernel-log guard from node-health and a healthy verdict survives without it."""
    folder = tmp_path / "runbooks"
    folder.mkdir()
    for name, path in runbooks.builtin_paths().items():
        shutil.copy(path, folder / f"{name}.yaml")
    shutil.copytree(runbooks.builtin_dir() / "fragments", folder / "fragments")
    (folder / "node-health.yaml").write_text(node_health_without_kernel_log_guard())
    monkeypatch.setattr(runbooks, "builtin_dir", lambda: folder)
    case = next(c for c in rehearsal_cases("node-health") if c.get("host") == "healthy-l40s")
    _, findings = ablate("node-health", case)
    assert {(f.output, f.mode) for f in findings} == {("kernel-log.out", "removed"), ("kernel-log.out", "emptied")}
