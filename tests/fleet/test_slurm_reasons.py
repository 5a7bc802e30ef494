"""`nightowl slurm reasons`: every drain's reason as facts, read from a real slurmctld's `sinfo -R`.

The cluster is tests/fleet/slurm_cluster.py (one real slurmd, the spares in slurm.conf only); a
person's maintenance drain and a drain in nightowl's form are told apart, neither is changed.
"""

from __future__ import annotations

import json
import subprocess

import pytest

from nightowl.fleet.breaker import parse_reasons
from tests.fleet.prometheus_stack import nightowl_argv
from tests.fleet.slurm_cluster import SPARES, SlurmCluster
from tests.fleet.test_slurm_breaker import _clean


@pytest.mark.integration
def test_reasons_tell_nightowls_drains_from_everyone_elses(slurm_cluster: SlurmCluster) -> None:
    cluster = slurm_cluster
    cluster.reset()
    _clean(cluster)
    person, ours = SPARES[18], SPARES[19]
    try:
        cluster.scontrol("update", f"nodename={person}", "state=drain", "reason=maintenance: PSU swap")
        cluster.scontrol("update", f"nodename={ours}", "state=drain", "reason=nightowl: nvlink-xid (reset-gpu)")
        run = subprocess.run(
            [*nightowl_argv(), "slurm", "reasons", "--format", "json"],
            env=cluster.env,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert run.returncode == 0, run.stderr
        facts = {f["node"]: f for f in json.loads(run.stdout)["reasons"]}
        assert facts[person]["reason"] == "maintenance: PSU swap" and facts[person]["ours"] is False
        assert facts[ours]["reason"] == "nightowl: nvlink-xid (reset-gpu)" and facts[ours]["ours"] is True
        assert "drain" in facts[person]["state"] and facts[person]["user"]  # who set it, as Slurm recorded
        assert facts[person]["since"]  # when, as an ISO time
        # a down node's reason is listed too (the spares never register: they are down with one)
        assert "down" in facts[SPARES[0]]["state"] and facts[SPARES[0]]["reason"]
        assert cluster.reason(person) == "maintenance: PSU swap"  # read, never changed
    finally:
        _clean(cluster)


def test_parse_reasons() -> None:
    text = (
        "gpu-01|drained|2026-12-01T23:10:00|root|maintenance: PSU swap\n"
        "gpu-02|draining|Unknown|slurm|nightowl: gpu-fell-off-bus (reboot-node)\n"
        "gpu-02|draining|Unknown|slurm|nightowl: gpu-fell-off-bus (reboot-node)\n"
        "gpu-03|down|2026-12-01T23:11:00|N/A|nightowl: spoofed | with a bar\n"
        "garbage\n"
    )
    assert parse_reasons(text) == [
        {"node": "gpu-01", "state": "drained", "since": "2026-12-01T23:10:00", "user": "root",
         "reason": "maintenance: PSU swap", "ours": False, "node_cap": None},
        {"node": "gpu-02", "state": "draining", "since": None, "user": "slurm",
         "reason": "nightowl: gpu-fell-off-bus (reboot-node)", "ours": True, "node_cap": None},
        {"node": "gpu-03", "state": "down", "since": "2026-12-01T23:11:00", "user": None,
         "reason": "nightowl: spoofed | with a bar", "ours": False, "node_cap": None},
    ]  # fmt: skip
