"""Rehearsals (after Orquesta's orquesta-rehearse): recorded hosts in, expected path and verdict out.

``fixtures/rehearsals/<runbook>.yaml`` holds a list of cases::

    - name: xid79 node from akash-network/support#209
      host: xid79-fallen-off-bus          # a folder of fixtures/hosts/
      params: {expected_gpus: 8}
      expect: {verdict: gpu-fell-off-bus, action: reboot-node, path: [collect, gpu-visible, gpu-fell-off-bus]}
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from nightowl.paths import data_dir


@dataclass(frozen=True)
class RehearsalResult:
    runbook: str
    name: str
    passed: bool
    problems: tuple[str, ...]
    verdict: str | None
    path: tuple[str, ...]


def rehearsal_cases(runbook_id: str) -> list[dict[str, Any]]:
    path = data_dir("fixtures") / "rehearsals" / f"{runbook_id}.yaml"
    if not path.exists():
        return []
    return list(yaml.safe_load(path.read_text()) or [])


def rehearse(runbook_id: str, case: dict[str, Any], out_dir: Path | None = None) -> RehearsalResult:
    from nightowl import runbooks
    from nightowl.collectors import get_collector
    from nightowl.engine.runner import RunOptions
    from nightowl.engine.session import run_runbook
    from nightowl.transports.replay import ReplayTransport

    loaded = runbooks.load(runbook_id)
    hosts = case["hosts"] if "hosts" in case else [case["host"]]
    hosts_dir = data_dir("fixtures") / "hosts"
    transports = {h: (lambda d=hosts_dir / h, n=h: ReplayTransport(d, n)) for h in hosts}
    options = RunOptions(
        params=loaded.resolve_params(case.get("params", {})), allow_invasive=case.get("allow_invasive", False)
    )
    with tempfile.TemporaryDirectory() as tmp:
        runs, _ = run_runbook(loaded, transports, get_collector, options, out_dir or Path(tmp))
    expect = case.get("expect", {})
    run = runs[0]
    verdict = run.verdict or {}
    problems = []
    if "verdict" in expect and verdict.get("id") != expect["verdict"]:
        problems.append(f"verdict {verdict.get('id')!r} != expected {expect['verdict']!r}")
    if "action" in expect and verdict.get("action") != expect["action"]:
        problems.append(f"action {verdict.get('action')!r} != expected {expect['action']!r}")
    if "path" in expect and run.path != list(expect["path"]):
        problems.append(f"path {run.path} != expected {expect['path']}")
    if "status" in expect and run.status != expect["status"]:
        problems.append(f"status {run.status!r} != expected {expect['status']!r}")
    for gpu in expect.get("gpus", []):
        if gpu not in (verdict.get("gpus") or []):
            problems.append(f"gpu {gpu} not named in verdict gpus {verdict.get('gpus')}")
    return RehearsalResult(
        runbook_id,
        case.get("name", hosts[0]),
        not problems,
        tuple(problems),
        verdict.get("id"),
        tuple(run.path),
    )
