"""A cap per node on a real slurmctld/slurmd (issue 43 item 3, docs/reference.md#node-cap): a node drained and
resumed three times for one fault family is held for a hardware ticket on the fourth.

Once through deploy/slurm/nightowl-healthcheck.sh as slurmd's HealthCheckProgram (NIGHTOWL_MAX_NODE_ACTIONS=3):
two drains and resumes by the commands, then the stand-in node turns Xid 79 and healthy again twice under the
health check (the test cluster's slurmd runs it every few seconds, so the first two cycles are the commands');
once all through the commands on a spare (`slurm drain`, `verify --resume slurm`, `slurm reasons`, `slurm
resume`). Each test has its own actions log.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from nightowl.fleet import actions_log
from nightowl.library import runbooks
from nightowl.run import run_and_save
from nightowl.transports.replay import ReplayTransport
from tests.fleet.daemons import wait_for
from tests.fleet.prometheus_stack import nightowl_argv
from tests.fleet.slurm_cluster import NODE, SPARES, SlurmCluster
from tests.fleet.test_slurm_healthcheck import HEALTHY, XID79

pytestmark = pytest.mark.integration
SLOW = 120  # seconds: a check and then a verify, each a node-health run, on a loaded machine
TICKET = "nightowl: gpu-fell-off-bus (hardware-ticket) 4 times in 7d, node cap 3"
SPARE = SPARES[22]  # a spare no other test drains


def test_the_health_check_holds_a_node_for_a_ticket_on_the_fourth_drain_of_one_fault(
    slurm_cluster: SlurmCluster, tmp_path: Path
) -> None:
    cluster = slurm_cluster
    log = cluster.reset_logging_to(tmp_path / "actions.jsonl", "NIGHTOWL_MAX_NODE_ACTIONS=3")
    try:
        for cycle in (1, 2):  # the commands, on the same node and log
            bundle = _incident(tmp_path / f"incident-{cycle}", NODE)
            drain = ["--verdict", "gpu-fell-off-bus", "--action", "reboot-node", "--bundle", str(bundle)]
            drained = _nightowl(cluster, "slurm", "drain", NODE, *drain, "--actions-log", str(log))
            assert drained.returncode == 0 and "drain" in cluster.state(), drained.stdout + drained.stderr
            resumed = _nightowl(cluster, "slurm", "resume", NODE, "--max-node-actions", "3", "--actions-log", str(log))
            assert resumed.returncode == 0 and "drain" not in cluster.state(), resumed.stdout + resumed.stderr
        cluster.node.switch(XID79)  # the third, by the health check: resumed through verify once healthy
        cluster.armed.touch()
        cluster.wait_state(lambda s: "drain" in s, "the third drain", timeout=SLOW)
        assert cluster.reason() == "nightowl: gpu-fell-off-bus (reboot-node)"
        cluster.node.switch(HEALTHY)
        cluster.wait_state(lambda s: s == "idle", "verify to resume the node after the third drain", timeout=SLOW)

        cluster.node.switch(XID79)
        cluster.wait_state(lambda s: "drain" in s, "the fourth drain", timeout=SLOW)
        assert cluster.reason() == TICKET
        cluster.node.switch(HEALTHY)
        clean = "held for a hardware ticket (" + TICKET + "); not resumed"  # a clean check found the ticket drain
        wait_for("a clean check", lambda: clean in cluster.log.read_text(), 120, list(cluster.daemons.values()))
        assert "drain" in cluster.state() and cluster.reason() == TICKET  # before the cap, verify resumed it

        entries = actions_log.read(log)
        drains = [a for a in entries if a["what"] == "drain" and a["result"] == "drained"]
        assert len(drains) == 4 and drains[-1]["why"].startswith(TICKET + ";")
        for earlier in drains[:3]:  # the ticket's line cites every earlier drain's bundle, its sha256 and date
            assert Path(earlier["bundle"]).name in drains[-1]["why"] and earlier["when"] in drains[-1]["why"]
            assert earlier["bundle_sha256"][:16] in drains[-1]["why"]
        assert [a["result"] for a in entries if a["what"] == "resume"].count("resumed") == 3
        assert [a["result"] for a in entries if a["what"] == "verify"] == ["verify-passed"]  # the health check's
        assert actions_log.verify(log) == []
    finally:
        cluster.reset()


def _nightowl(cluster: SlurmCluster, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*nightowl_argv(), *args], env=cluster.env, capture_output=True, text=True, timeout=180)


def _host(where: Path, source: Path, node: str = SPARE) -> Path:
    """A recorded host for a replay: the stand-in serves fabric from nvidia-smi.out, a replay from fabric.out."""
    host = where / node
    shutil.copytree(source, host)
    shutil.copy(host / "nvidia-smi.out", host / "fabric.out")
    return host


def _incident(where: Path, node: str = SPARE) -> Path:
    broken = _host(where, XID79, node)
    saved = run_and_save(runbooks.load("node-health"), {node: lambda: ReplayTransport(broken, node)}, where)
    assert saved.bundle is not None
    return saved.bundle


def _undrained(cluster: SlurmCluster) -> None:
    """The spare DOWN and not drained (a spare that never registered refuses UNDRAIN while UNKNOWN)."""
    if "drain" in cluster.node_state(SPARE):
        cluster.scontrol("update", f"nodename={SPARE}", "state=undrain")
    if not cluster.node_state(SPARE).startswith("down"):
        cluster.scontrol("update", f"nodename={SPARE}", "state=down", "reason=test: no slurmd")


def test_the_commands_hold_a_node_for_a_ticket_and_say_so(slurm_cluster: SlurmCluster, tmp_path: Path) -> None:
    cluster = slurm_cluster
    _undrained(cluster)
    log, cap = tmp_path / "actions.jsonl", ["--max-node-actions", "3", "--node-actions-window", "7d"]
    healthy = _host(tmp_path / "healthy", HEALTHY)
    try:
        incidents = []
        for cycle in range(1, 5):
            incidents.append(_incident(tmp_path / f"incident-{cycle}"))
            args = ["--verdict", "gpu-fell-off-bus", "--action", "reboot-node", "--bundle", str(incidents[-1])]
            drained = _nightowl(cluster, "slurm", "drain", SPARE, *args, *cap, "--actions-log", str(log), "--format",
                                "json")  # fmt: skip
            assert drained.returncode == 0, drained.stderr
            verify = ["verify", SPARE, "--incident", str(incidents[-1]), "--replay", str(healthy), "--resume", "slurm"]
            verify += ["--actions-log", str(log), "--out", str(tmp_path / "verify"), "--format", "json", *cap]
            verified = _nightowl(cluster, *verify)
            if cycle < 4:
                assert verified.returncode == 0 and "drain" not in cluster.node_state(SPARE), verified.stdout

        [ticket] = json.loads(drained.stdout)["actions"]
        assert ticket["result"] == "drained" and ticket["node_cap"]["action"] == "hardware-ticket"
        earlier = ticket["node_cap"]["earlier"]
        assert [e["bundle"] for e in earlier] == [b.name for b in incidents[:3]]
        assert all(len(e["bundle_sha256"]) == 64 and e["when"] for e in earlier)
        assert cluster.reason(SPARE) == TICKET

        assert verified.returncode == 4, verified.stderr  # every check passed; the node's cap holds the resume
        report = json.loads(verified.stdout)
        assert report["result"] == "passed" and report["resume"]["result"] == "held"
        assert report["resume"]["node_cap"]["count"] == 4 and "drain" in cluster.node_state(SPARE)

        reasons = _nightowl(cluster, "slurm", "reasons", "--format", "json")
        [fact] = [f for f in json.loads(reasons.stdout)["reasons"] if f["node"] == SPARE]
        assert fact["ours"] and fact["node_cap"] == {"count": 4, "window": "7d", "max_node_actions": 3}
        assert "held for a hardware ticket" in _nightowl(cluster, "slurm", "reasons").stdout

        held = _nightowl(cluster, "slurm", "resume", SPARE, *cap, "--actions-log", str(log))
        assert held.returncode == 4 and "drain" in cluster.node_state(SPARE), held.stdout
        person = _nightowl(cluster, "slurm", "resume", SPARE, "--actions-log", str(log))  # after the repair
        assert person.returncode == 0 and "drain" not in cluster.node_state(SPARE), person.stdout
        assert actions_log.verify(log) == []
    finally:
        _undrained(cluster)
