"""runbooks/silent-corruption.yaml: suspects named, the exposure window stated, DCGM only with the flag,
and the whole job run against loopback OpenAI-compatible replicas."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import pytest

from nightowl.engine.runner import HostRun
from nightowl.library.rehearse import rehearsal_cases
from nightowl.transports.base import CommandResult
from nightowl.transports.local import LocalTransport
from tests.collectors.test_known_answer import PROBE, replica_servers
from tests.helpers import ROOT
from tests.runbook_helpers import RecordingReplay, run_runbook_on

HOSTS = ROOT / "fixtures" / "hosts"
GOLDEN = "579d8c3f1cc9568858f388fde04a3bd7d6ab2dc512ff971bb186a06102f167d0"


class ReplicaHost(LocalTransport):
    """A replica's host: the probe (curl) really runs, against this replica's loopback server;
    every other collector finds nothing, as on a host without GPUs."""

    def __init__(self, host: str, url: str) -> None:
        super().__init__(host)
        self.url = url

    def run(self, argv: Sequence[str], timeout: float, kind: str | None = None) -> CommandResult:
        if kind != "known-answer":
            return CommandResult(tuple(argv), None, "", "", 0.0, 0.0, error=f"not on this test host: {kind}")
        return super().run([self.url if a == "http://replica/v1/completions" else a for a in argv], timeout, kind)


def run_job(transports: dict[str, Any], params: dict[str, Any], allow_invasive: bool = False) -> HostRun:
    return run_runbook_on("silent-corruption", transports, params, allow_invasive)[0]


def replayed(names: list[str], ran: list[tuple[str, ...]]) -> dict[str, Any]:
    return {h: (lambda h=h: RecordingReplay(HOSTS / h, h, ran)) for h in names}


def test_three_loopback_replicas_one_answers_differently() -> None:
    params = {
        "endpoint": "http://replica/v1/completions",
        "probe_body": json.dumps(PROBE),
        "last_passing_probe": "2024-06-12 13:00 UTC",
    }
    with replica_servers([False, True, False]) as replicas:
        names = ["replica-a", "replica-b", "replica-c"]
        pairs = list(zip(names, replicas, strict=True))
        run = run_job({n: (lambda n=n, r=r: ReplicaHost(n, r.url)) for n, r in pairs}, params)
        healthy = {n: (lambda n=n, r=r: ReplicaHost(n, r.url)) for n, r in pairs if not r.faulty}
        clean = run_job(healthy, params)
    assert run.verdict is not None and run.verdict["id"] == "sdc-suspect-replica"
    summary = run.verdict["summary"]
    assert "on replica-b:" in summary and "replica-a" not in summary and "replica-c" not in summary
    assert "since 2024-06-12 13:00 UTC" in summary
    assert "--host replica-b --param replica_drained=true --allow-invasive" in summary
    assert clean.verdict is not None and clean.verdict["id"] == "no-corruption-signal"


@pytest.mark.parametrize(
    ("fragment", "named", "not_named"),
    [
        ("one replica of three", ["on sdc-diverged:", "since 2024-06-12T13:00:00Z"], ["sdc-good-a", "sdc-good-b"]),
        ("Xid 48 and Xid 64", ["Keep sdc-dbe drained: Xid 48, 64", "passing probe (time unknown"], ["sdc-good-a"]),
        ("quality alert", ["Keep sdc-sram drained"], ["sdc-good-a"]),
        ("nccl-tests wrong values", ["on sdc-wrong:"], ["sdc-good-a"]),
        ("same wrong answer", ["All 2 replicas give the same answer"], []),
        ("GPU Memory fails on GPU 0", ["sdc-drained-fail GPU 0 (GPU Memory)"], []),
    ],
)
def test_summaries_name_the_replica_and_the_window(fragment: str, named: list[str], not_named: list[str]) -> None:
    (case,) = [c for c in rehearsal_cases("silent-corruption") if fragment in c["name"]]
    run = run_job(replayed(case["hosts"], []), case.get("params", {}), case.get("allow_invasive", False))
    assert run.verdict is not None and run.verdict["id"] == case["expect"]["verdict"]
    for text in named:
        assert text in run.verdict["summary"], f"{text!r} not in {run.verdict['summary']!r}"
    for text in not_named:
        assert text not in run.verdict["summary"]


def test_dcgm_runs_only_with_allow_invasive_and_only_on_one_drained_replica() -> None:
    params = {"probe_file": "/etc/nightowl/probe.json", "golden_digest": GOLDEN, "replica_drained": True}
    ran: list[tuple[str, ...]] = []
    run = run_job(replayed(["sdc-drained-fail"], ran), params)
    assert run.verdict is not None and run.verdict["id"] == "sdc-suspect-replica"
    assert "DCGM was skipped" in run.verdict["summary"]
    assert not any(argv[0] == "dcgmi" for argv in ran)

    ran.clear()
    run = run_job(replayed(["sdc-drained-fail"], ran), params, allow_invasive=True)
    assert run.verdict is not None and run.verdict["id"] == "sdc-confirmed-gpu"
    assert ("dcgmi", "diag", "-r", "3", "--json") in ran

    # Not drained, or several replicas: never DCGM, even with the flag.
    for hosts, drained in ((["sdc-drained-fail"], False), (["sdc-drained-fail", "sdc-good-a"], True)):
        ran.clear()
        run = run_job(replayed(hosts, ran), {**params, "replica_drained": drained}, allow_invasive=True)
        assert run.verdict is not None and run.verdict["id"] == "sdc-suspect-replica"
        assert not any(argv[0] == "dcgmi" for argv in ran)
