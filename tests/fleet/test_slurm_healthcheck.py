"""deploy/slurm/nightowl-healthcheck.sh as the HealthCheckProgram of a real slurmd.

The node's GPU tools are stand-ins serving recorded hosts: fixtures/hosts/xid79-fallen-off-bus (a GPU
fell off the bus: reboot-node) and fixtures/hosts/healthy-l40s. slurmd runs the check every second
while a test has armed it.
"""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path

import pytest

from tests.fleet.prometheus_stack import ROOT
from tests.fleet.slurm_cluster import NODE, SlurmCluster

# Starts a Slurm cluster (slurmctld, slurmd): `pytest -m "not integration"` leaves it out.
pytestmark = pytest.mark.integration

HOSTS = ROOT / "fixtures" / "hosts"
XID79 = HOSTS / "xid79-fallen-off-bus"
HEALTHY = HOSTS / "healthy-l40s"


def test_a_fatal_xid_drains_the_node_and_recovery_resumes_it(slurm_cluster: SlurmCluster) -> None:
    cluster = slurm_cluster
    cluster.reset()
    started = time.monotonic()
    cluster.node.switch(XID79)
    cluster.armed.touch()
    cluster.wait_state(lambda s: "drain" in s, "nightowl to drain the node")
    drained_after = time.monotonic() - started
    assert cluster.reason() == "nightowl: gpu-fell-off-bus (reboot-node)"

    cluster.node.switch(HEALTHY)  # the node was power-cycled: the Xid is gone from this boot's log
    started = time.monotonic()
    cluster.wait_state(lambda s: s == "idle", "nightowl to resume the node", 120)  # a check, then verify
    resumed_after = time.monotonic() - started
    print(f"\nslurm health check: drained {drained_after:.1f} s after the Xid, resumed {resumed_after:.1f} s later")
    assert cluster.reason() == "none"
    cluster.reset()


def test_a_node_someone_else_drained_is_never_resumed_nor_relabelled(slurm_cluster: SlurmCluster) -> None:
    cluster = slurm_cluster
    cluster.reset()
    cluster.node.switch(HEALTHY)
    cluster.scontrol("update", f"nodename={NODE}", "state=drain", "reason=maintenance: PSU swap")
    cluster.armed.touch()
    cluster.wait_checks(2)  # healthy verdicts: nightowl would resume its own drain by now
    assert "drain" in cluster.state()
    assert cluster.reason() == "maintenance: PSU swap"

    cluster.node.switch(XID79)
    cluster.wait_checks(2)  # a drain verdict must not overwrite the person's reason
    assert "drain" in cluster.state()
    assert cluster.reason() == "maintenance: PSU swap"
    cluster.reset()


def test_a_hung_nvidia_smi_is_cut_by_the_checks_own_deadline(slurm_cluster: SlurmCluster, tmp_path: Path) -> None:
    """slurmd kills a HealthCheckProgram after 60 s, verdict or not; the script's deadline ends it first.

    The deadline is lowered to 5 s here (NIGHTOWL_HOST_TIMEOUT; the script's default is 40 s), below
    the collector's own 20 s command timeout, so only the host deadline can have cut the hang.
    """
    cluster = slurm_cluster
    cluster.reset()
    hung = tmp_path / "nvidia-smi-hung"
    hung.mkdir()
    (hung / "nvidia-smi.sleep").write_text("300\n")
    shutil.copy(HEALTHY / "kernel-log.out", hung / "kernel-log.out")
    cluster.node.switch(hung)
    cluster.settings.write_text("export NIGHTOWL_HOST_TIMEOUT=5\n")
    cluster.armed.touch()
    cluster.wait_state(lambda s: "drain" in s, "nightowl to drain the hung node")
    assert cluster.reason() == "nightowl: nvidia-smi-hung (reboot-node)"
    cluster.reset()

    nvidia_smi = [
        command
        for manifest in (cluster.root / "bundles").glob("*/manifest.json")
        for command in json.loads(manifest.read_text())["commands"]
        if command["argv"][0] == "nvidia-smi" and command["timed_out"]
    ]
    assert nvidia_smi and all(c["duration"] < 20 for c in nvidia_smi), nvidia_smi
    slurmd_log = (cluster.root / "log" / "slurmd.log").read_text()
    assert "health_check failed" not in slurmd_log  # never killed, never a non-zero exit
