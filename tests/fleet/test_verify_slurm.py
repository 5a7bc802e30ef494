"""`nightowl verify --resume slurm` on a real slurmctld (tests/fleet/slurm_cluster.py): a node nightowl drained
after Xid 79 stays drained when its repair did not take (a new Xid) and is undrained when it did, each verify a
line of actions.jsonl naming both bundles (docs/reference.md#verify)."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from nightowl.fleet import actions_log
from nightowl.library import runbooks
from nightowl.paths import data_dir
from nightowl.run import run_and_save
from nightowl.transports.replay import ReplayTransport
from tests.fleet.prometheus_stack import nightowl_argv
from tests.fleet.slurm_cluster import SPARES, SlurmCluster

pytestmark = pytest.mark.integration
HOSTS = data_dir("fixtures") / "hosts"
NODE = SPARES[21]  # a spare no other test drains (slurm.conf only: slurmctld drains and undrains it)
NEW_XID = "[ 2843.439669] NVRM: Xid (PCI:0000:a1:00): 79, pid=<unknown>, name=<unknown>, GPU has fallen off the bus.\n"


def _recording(where: Path, source: str, new_xid: bool = False) -> Path:
    host = where / NODE
    shutil.copytree(HOSTS / source, host)
    if not (host / "fabric.out").exists():
        shutil.copy(host / "nvidia-smi.out", host / "fabric.out")
    if new_xid:
        with (host / "kernel-log.out").open("a") as handle:
            handle.write(NEW_XID)
    return host


def _nightowl(cluster: SlurmCluster, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*nightowl_argv(), *args], env=cluster.env, capture_output=True, text=True, timeout=180)


def _undrained(cluster: SlurmCluster) -> None:
    """The spare DOWN and not drained (a spare that never registered refuses UNDRAIN while UNKNOWN)."""
    if "drain" in cluster.node_state(NODE):
        cluster.scontrol("update", f"nodename={NODE}", "state=undrain")
    if not cluster.node_state(NODE).startswith("down"):
        cluster.scontrol("update", f"nodename={NODE}", "state=down", "reason=test: no slurmd")


def test_verify_keeps_a_node_whose_repair_did_not_take_and_resumes_one_whose_did(
    slurm_cluster: SlurmCluster, tmp_path: Path
) -> None:
    cluster = slurm_cluster
    _undrained(cluster)
    log = tmp_path / "actions.jsonl"
    broken = _recording(tmp_path / "incident", "xid79-fallen-off-bus")
    incident = run_and_save(runbooks.load("node-health"), {NODE: lambda: ReplayTransport(broken, NODE)}, tmp_path)
    assert incident.bundle is not None
    try:
        drain = ["--verdict", "gpu-fell-off-bus", "--action", "reboot-node", "--bundle", str(incident.bundle)]
        drained = _nightowl(cluster, "slurm", "drain", NODE, *drain, "--actions-log", str(log))
        assert drained.returncode == 0, drained.stderr
        assert "drain" in cluster.node_state(NODE)
        verify = ["verify", NODE, "--incident", str(incident.bundle), "--resume", "slurm", "--format", "json"]
        verify += ["--actions-log", str(log), "--out", str(tmp_path / "verify")]

        again = _nightowl(cluster, *verify, "--replay", str(_recording(tmp_path / "again", "healthy-l40s", True)))
        assert again.returncode == 1, again.stderr
        assert json.loads(again.stdout)["result"] == "failed" and "drain" in cluster.node_state(NODE)

        fixed = _nightowl(cluster, *verify, "--replay", str(_recording(tmp_path / "fixed", "healthy-l40s")))
        assert fixed.returncode == 0, fixed.stderr
        report = json.loads(fixed.stdout)
        assert report["result"] == "passed" and report["resume"]["result"] == "resumed", report
        assert "drain" not in cluster.node_state(NODE)

        # every attempt in order ("intended" lines are the scheduler action's own write-ahead)
        lines = [(a["what"], a["result"]) for a in actions_log.read(log) if a["result"] != "intended"]
        assert lines == [
            ("drain", "drained"),
            ("verify", "verify-failed"),
            ("verify", "verify-passed"),
            ("resume", "resumed"),
        ]
        passed = [a for a in actions_log.read(log) if a["result"] == "verify-passed"][0]
        assert incident.bundle.name in passed["why"] and Path(report["bundle"]).name in passed["why"]
        assert actions_log.verify(log) == []
    finally:
        _undrained(cluster)
