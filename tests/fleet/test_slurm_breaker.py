"""The fleet circuit breaker on a real slurmctld: `nightowl slurm drain|resume` on 24 nodes.

gpu-17 runs a real slurmd; the 23 spares (tests/fleet/slurm_cluster.py) exist only in slurm.conf, and
slurmctld drains and resumes them through scontrol as it would any node. Twelve checks judge their
node fatal at the same moment, each a separate `nightowl slurm drain` process sharing a lock file.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from nightowl.fleet import actions_log
from tests.fleet.daemons import wait_for
from tests.fleet.prometheus_stack import nightowl_argv
from tests.fleet.slurm_cluster import NODE, SPARES, SlurmCluster
from tests.fleet.slurm_interleave import interleaving_bin

pytestmark = pytest.mark.integration
FATAL = SPARES[:12]
PERSONS = SPARES[19]  # drained by a person before the storm
REASON = "nightowl: nvlink-xid (reset-gpu)"


def _nightowl(cluster: SlurmCluster, *args: str, path: Path | None = None) -> subprocess.Popen[str]:
    env = {**cluster.env, "PATH": f"{path}:{cluster.env['PATH']}"} if path else cluster.env
    return subprocess.Popen(
        [*nightowl_argv(), *args], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )


def _actions(checks: list[subprocess.Popen[str]]) -> list[dict[str, Any]]:
    """Each check's one action once it exits, in order; it exits 4 exactly when held, else 0."""
    results = []
    for check in checks:
        out, err = check.communicate(timeout=120)
        (action,) = json.loads(out)["actions"]
        assert check.returncode == (4 if action["result"] == "held" else 0), (action, err)
        results.append(action)
    return results


def _clean(cluster: SlurmCluster) -> None:
    """Every spare DOWN and not drained. A spare never registers, so slurmctld refuses RESUME and UNDRAIN
    while its state is UNKNOWN; once DOWN, it drains and undrains as a real node that went down would."""
    for node in SPARES:
        state = cluster.node_state(node)
        if "drain" in state:
            cluster.scontrol("update", f"nodename={node}", "state=undrain")
        if not cluster.node_state(node).startswith("down"):
            cluster.scontrol("update", f"nodename={node}", "state=down", "reason=test: no slurmd")


def test_twelve_fatal_at_once_under_a_cap_of_five(slurm_cluster: SlurmCluster, tmp_path: Path) -> None:
    cluster = slurm_cluster
    cluster.reset()
    _clean(cluster)
    log, lock = tmp_path / "actions.jsonl", tmp_path / "drain.lock"
    cluster.scontrol("update", f"nodename={PERSONS}", "state=drain", "reason=maintenance: PSU swap")
    try:
        drain_args = ["--verdict", "nvlink-xid", "--action", "reset-gpu", "--max-drain", "5", "--window", "1h"]
        drain_args += ["--actions-log", str(log), "--format", "json"]
        preview = _nightowl(cluster, "slurm", "drain", *FATAL, *drain_args, "--dry-run")
        out, err = preview.communicate(timeout=120)
        assert preview.returncode == 4, err  # some would be held, none failed (docs/reference.md#scheduler-actions)
        assert [a["result"] for a in json.loads(out)["actions"]] == ["would-drain"] * 5 + ["would-hold"] * 7
        assert not log.exists() and not any("drain" in cluster.node_state(n) for n in FATAL)

        checks = [_nightowl(cluster, "slurm", "drain", node, *drain_args, "--lock", str(lock)) for node in FATAL]
        results = _actions(checks)
        drained = [r["node"] for r in results if r["result"] == "drained"]
        held = [r for r in results if r["result"] == "held"]
        print(f"\ncircuit breaker: {len(drained)} drained, {len(held)} held of {len(FATAL)} fatal (cap 5)")
        assert len(drained) == 5 and len(held) == 7
        assert all("circuit breaker open" in r["why"] and "--max-drain 5" in r["why"] for r in held)
        in_slurm = [n for n in FATAL if "drain" in cluster.node_state(n)]
        assert sorted(in_slurm) == sorted(drained)
        assert {cluster.reason(n) for n in in_slurm} == {REASON}
        logged = [a for a in actions_log.read(log) if a["result"] != "intended"]  # each drain's intent, then it
        assert sorted((a["node"], a["result"]) for a in logged) == sorted((r["node"], r["result"]) for r in results)
        assert actions_log.verify(log) == []

        resume = _nightowl(cluster, "slurm", "resume", *FATAL, PERSONS, "--actions-log", str(log), "--format", "json")
        out, err = resume.communicate(timeout=120)
        assert resume.returncode == 5, err  # the operator's drain stays: that resume was refused
        by_node = {a["node"]: a["result"] for a in json.loads(out)["actions"]}
        assert sorted(n for n, r in by_node.items() if r == "resumed") == sorted(drained)
        assert by_node[PERSONS] == "not-ours"
        assert not any("drain" in cluster.node_state(n) for n in FATAL)
        assert "drain" in cluster.node_state(PERSONS) and cluster.reason(PERSONS) == "maintenance: PSU swap"
        assert actions_log.verify(log) == []
    finally:
        _clean(cluster)


def test_the_health_check_holds_its_own_drain_when_the_breaker_is_open(
    slurm_cluster: SlurmCluster, tmp_path: Path
) -> None:
    """gpu-17's real health check finds a fatal Xid while five spares are already drained by nightowl."""
    from tests.fleet.test_slurm_healthcheck import XID79

    cluster = slurm_cluster
    cluster.reset()
    _clean(cluster)
    log = cluster.root / "actions.jsonl"  # where the script writes it: next to NIGHTOWL_OUT
    try:
        for node in SPARES[:5]:
            cluster.scontrol("update", f"nodename={node}", "state=drain", f"reason={REASON}")
        cluster.node.switch(XID79)
        cluster.settings.write_text("export NIGHTOWL_MAX_DRAIN=5\n")
        cluster.armed.touch()
        held = wait_for(
            "the health check to hold its drain",
            lambda: [a for a in actions_log.read(log) if a["node"] == NODE and a["result"] == "held"],
            90,
            list(cluster.daemons.values()),
        )
        assert "drain" not in cluster.state()
        assert "circuit breaker open: 5 nodes" in held[-1]["why"]
        assert held[-1]["bundle_sha256"] and Path(held[-1]["bundle"]).is_dir()
    finally:
        cluster.reset()
        _clean(cluster)


def test_a_failed_node_is_logged_and_the_list_goes_on(slurm_cluster: SlurmCluster, tmp_path: Path) -> None:
    """Issue "acting safely", item 1: scontrol failing on one node neither stops the list nor goes unlogged."""
    cluster = slurm_cluster
    cluster.reset()
    _clean(cluster)
    log = tmp_path / "actions.jsonl"
    try:
        args = ["--verdict", "nvlink-xid", "--action", "reset-gpu", "--max-drain", "5", "--actions-log", str(log)]
        drain = _nightowl(cluster, "slurm", "drain", "no-such-node", SPARES[0], *args, "--format", "json")
        out, err = drain.communicate(timeout=120)
        assert drain.returncode == 5, err  # one failed: the status says so though the other was drained
        results = [(a["node"], a["result"]) for a in json.loads(out)["actions"]]
        assert results == [("no-such-node", "failed"), (SPARES[0], "drained")]
        logged = actions_log.read(log)
        # the drain that went ahead logged its intent first; the failed one failed at sinfo, before acting
        assert [(a["node"], a["result"]) for a in logged] == [results[0], (SPARES[0], "intended"), results[1]]
        assert "no-such-node" in logged[0]["why"] and actions_log.verify(log) == []
    finally:
        _clean(cluster)


def test_three_checks_without_a_lock_drain_at_most_the_cap(slurm_cluster: SlurmCluster, tmp_path: Path) -> None:
    """Issue 42 item 2 on the real slurmctld: three `nightowl slurm drain` processes started together, no lock,
    only Slurm's state in common, under --max-drain 1, every one reading before any drains and then draining
    one at a time in reverse name order (tests/fleet/slurm_interleave.py): one node drained, the others held,
    each having undone its own drain and logged it. Three, not twelve (tests/fleet/test_breaker_race.py runs twelve
    through the stand-in scheduler): the interleaving serialises the drains, each held in its `scontrol` until the one
    before has confirmed, and a longer chain outlasted nightowl's 30 s Slurm command timeout (twelve: 1 run in 4 on a
    loaded 2-core machine; six: 1 in 3 even idle)."""
    at_once = FATAL[:3]
    cluster = slurm_cluster
    cluster.reset()
    _clean(cluster)
    wrappers = interleaving_bin(tmp_path, list(reversed(at_once)))
    try:
        args = ["--verdict", "nvlink-xid", "--action", "reset-gpu", "--max-drain", "1", "--format", "json"]
        logs = {node: tmp_path / f"{node}.jsonl" for node in at_once}  # each node its own log, as on real nodes
        checks = [
            _nightowl(cluster, "slurm", "drain", n, *args, "--actions-log", str(logs[n]), path=wrappers)
            for n in at_once
        ]
        results = _actions(checks)
        drained = [r["node"] for r in results if r["result"] == "drained"]
        undone = [r["node"] for r in results if "its own drain undone" in r["why"]]
        print(f"\nno lock, cap 1: {len(drained)} drained, {len(undone)} undone their own, of {len(at_once)} at once")
        # The cap holds: one drained; every other check held, having undone its own drain or (when its turn came
        # after the first confirmed) holding before it acted.
        held = [r["node"] for r in results if r["result"] == "held"]
        assert len(drained) == 1 and sorted(held) == sorted(set(at_once) - set(drained))
        assert [n for n in at_once if "drain" in cluster.node_state(n)] == drained
        for node in held:  # the outcome logged in each node's own log, the chain whole
            assert [a["result"] for a in actions_log.read(logs[node])][-1] == "held"
            assert actions_log.verify(logs[node]) == []
        for node in undone:  # an undone drain was an intent first
            assert [a["result"] for a in actions_log.read(logs[node])] == ["intended", "held"]
    finally:
        _clean(cluster)
