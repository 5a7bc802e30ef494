"""A cap per node on the NightowlGPUHealthy condition (docs/reference.md#node-cap), through `nightowl k8s
condition` and the `kubectl` stand-in of tests/fleet/test_k8s_condition.py: the fourth time one node turns False
for one verdict it is False for a hardware ticket, and no later True or Unknown replaces that."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from nightowl.cli.main import main
from nightowl.fleet import actions_log
from tests.fleet.test_k8s_condition import FELL_OFF, HEALTHY, Cluster, cluster, report  # noqa: F401 (fixture)

CAP = ("--max-node-actions", "3", "--node-actions-window", "7d")
TICKET = "hardware-ticket: gpu-fell-off-bus 4 times in 7d, node cap 3;"


def _condition(tmp_path: Path, node: str, status: int, verdict: dict[str, str], *extra: str) -> tuple[int, dict]:
    args = ["k8s", "condition", node, "--check-status", str(status), "--actions-log", str(tmp_path / "actions.jsonl")]
    result = CliRunner().invoke(main, [*args, *extra, "--format", "json"], input=report(tmp_path, node, verdict))
    (entry,) = json.loads(result.output)["actions"]
    return result.exit_code, entry


def test_the_fourth_false_of_one_verdict_is_a_ticket_no_true_replaces(
    tmp_path: Path,
    cluster: Cluster,  # noqa: F811 (the fixture imported above)
) -> None:
    for _ in range(3):
        assert _condition(tmp_path, "gpu-05", 1, FELL_OFF, *CAP)[1]["result"] == "set"
        assert _condition(tmp_path, "gpu-05", 1, FELL_OFF, *CAP)[1]["result"] == "unchanged"  # the next check
        assert _condition(tmp_path, "gpu-05", 0, HEALTHY, *CAP)[1]["result"] == "set"
        assert cluster.condition("gpu-05")["status"] == "True"  # type: ignore[index]

    status, fourth = _condition(tmp_path, "gpu-05", 1, FELL_OFF, *CAP)
    assert status == 0 and fourth["result"] == "set" and fourth["node_cap"]["count"] == 3
    assert [e["what"] for e in fourth["node_cap"]["earlier"]] == ["condition"] * 3
    now = cluster.condition("gpu-05")
    assert now is not None and now["status"] == "False" and now["message"].startswith(TICKET)
    assert now["reason"] == "gpu-fell-off-bus" and "hardware-ticket: no automatic return" in fourth["why"]
    # the next check, still failing: the ticket's words stay; a clean check, a check that cannot judge: held
    _condition(tmp_path, "gpu-05", 1, FELL_OFF, *CAP)
    assert cluster.condition("gpu-05")["message"].startswith(TICKET)  # type: ignore[index]
    for check_status, verdict in ((0, HEALTHY), (3, {})):
        status, held = _condition(tmp_path, "gpu-05", check_status, verdict, *CAP)
        assert status == 4 and held["result"] == "held" and held["why"].startswith("node cap: gpu-05")
        assert cluster.condition("gpu-05")["status"] == "False"  # type: ignore[index]
    state = actions_log.breaker_state(tmp_path / "actions.jsonl")
    assert state is not None and state["open"] is False  # a node's cap is not the fleet's breaker
    # another node counts for itself; a person, without the cap, returns the node
    assert "node_cap" not in _condition(tmp_path, "gpu-06", 1, FELL_OFF, *CAP)[1]
    assert _condition(tmp_path, "gpu-05", 0, HEALTHY)[1]["result"] == "set"
    assert cluster.condition("gpu-05")["status"] == "True"  # type: ignore[index]
    assert actions_log.verify(tmp_path / "actions.jsonl") == []
