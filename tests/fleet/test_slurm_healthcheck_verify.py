"""deploy/slurm/nightowl-healthcheck.sh on a real slurmd resumes nightowl's drain only through `nightowl verify`
(issue 43 item 4): a clean check is not enough; the incident's checks must pass (docs/reference.md#verify).

The stand-in node (tests/fleet/standin.py) serves recorded hosts: xid79-fallen-off-bus takes the node out; a
"repair" whose kernel log shows a new Xid 13 is a clean check (node-health: app-xids-seen, action none) that a
verify of the Xid 79 incident fails (a fault line the incident did not hold); healthy-l40s passes.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest

from nightowl.fleet import actions_log
from tests.fleet.daemons import wait_for
from tests.fleet.prometheus_stack import ROOT
from tests.fleet.slurm_cluster import SlurmCluster
from tests.fleet.test_slurm_healthcheck import HEALTHY, XID79

pytestmark = pytest.mark.integration
SLOW = 120  # seconds: a check and then a verify, each a node-health run, on a loaded machine
APP_XID = "[ 2843.439669] NVRM: Xid (PCI:0000:01:00): 13, pid=1234, name=python3, Graphics Exception\n"


def new_xid_after_repair(where: Path) -> Path:
    """healthy-l40s with an Xid 13 after the repair: clean for node-health, a new fault line for verify."""
    host = where / "repair-did-not-take"
    shutil.copytree(HEALTHY, host)
    with (host / "kernel-log.out").open("a") as handle:
        handle.write(APP_XID)
    return host


def verifies(log: Path, result: str) -> list[dict[str, Any]]:
    return [a for a in actions_log.read(log) if a["result"] == result]


def lines(log: Path) -> list[tuple[str, str]]:
    return [(a["what"], a["result"]) for a in actions_log.read(log) if a["result"] != "intended"]


def test_a_clean_check_resumes_nightowls_drain_only_when_verify_passes(
    slurm_cluster: SlurmCluster, tmp_path: Path
) -> None:
    cluster = slurm_cluster
    log = cluster.reset_logging_to(tmp_path / "actions.jsonl")
    try:
        cluster.node.switch(XID79)
        cluster.armed.touch()
        cluster.wait_state(lambda s: "drain" in s, "nightowl to drain the node", timeout=SLOW)
        assert cluster.reason() == "nightowl: gpu-fell-off-bus (reboot-node)"

        cluster.node.switch(new_xid_after_repair(tmp_path))
        # two clean checks, each verified and failed (a check that finds another in flight leaves it to that one,
        # so the checks slurmd completed are no measure: the verifies logged are)
        twice = lambda: len(verifies(log, "verify-failed")) >= 2  # noqa: E731
        wait_for("two failed verifies", twice, 120, list(cluster.daemons.values()))
        assert "drain" in cluster.state(), cluster.log.read_text()[-3000:]  # a clean check no longer resumes it
        failed = verifies(log, "verify-failed")
        assert "no-new-xid" in failed[-1]["why"] and "[gpu-fell-off-bus -> reboot-node]" in failed[-1]["why"]
        assert ("resume", "resumed") not in lines(log)

        cluster.node.switch(HEALTHY)
        cluster.wait_state(lambda s: s == "idle", "verify to pass and resume the node", timeout=SLOW)
        assert cluster.reason() == "none"
        passed = verifies(log, "verify-passed")
        drained = [a for a in actions_log.read(log) if a["result"] == "drained"]
        assert len(passed) == 1 and Path(drained[-1]["bundle"]).name in passed[0]["why"]  # the incident it cites
        assert lines(log)[-2:] == [("verify", "verify-passed"), ("resume", "resumed")]
        assert actions_log.verify(log) == []
    finally:
        cluster.reset()


def test_the_healthchecks_own_deadline_leaves_verify_time_inside_slurmds_minute() -> None:
    script = (ROOT / "deploy" / "slurm" / "nightowl-healthcheck.sh").read_text()
    assert "left=$((55 - SECONDS))" in script and 'timeout -k 5 "$((verify_timeout + 5))"' in script
