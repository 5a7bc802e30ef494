"""`nightowl slurm drain NODE --report -`: a check report belongs to its node (issue 43 item 2), as for
`k8s condition` (tests/fleet/test_k8s_condition.py): a report about another node is refused, exit 2 naming
both, unless --report-for-other-node, which the log records."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner

from nightowl.cli.main import main
from nightowl.fleet import actions_log
from tests.fleet.prometheus_stack import nightowl_argv
from tests.fleet.slurm_cluster import NODE, SPARES, SlurmCluster
from tests.fleet.test_breaker import FakeSlurm, _cluster

FELL_OFF = {"id": "gpu-fell-off-bus", "action": "reboot-node", "summary": "GPU 0000:a1:00 fell off the bus"}


def check_report(tmp_path: Path, host: str, verdict: dict[str, str] | None = FELL_OFF) -> str:
    bundle = tmp_path / "bundles" / f"20261206T031000Z-node-health-{host}"
    (bundle / "hosts" / host).mkdir(parents=True, exist_ok=True)
    (bundle / "manifest.json").write_text("{}")
    return json.dumps({"run_id": bundle.name, "bundle": str(bundle), "hosts": [{"host": host, "verdict": verdict}]})


@pytest.fixture
def slurm(monkeypatch: pytest.MonkeyPatch) -> FakeSlurm:
    fake = FakeSlurm(_cluster(0))
    monkeypatch.setattr("nightowl.fleet.slurm_actions.Slurm", lambda: fake)
    return fake


def drain(tmp_path: Path, node: str, report: str, *extra: str) -> tuple[int, list[dict[str, str]]]:
    args = ["slurm", "drain", node, "--report", "-", "--actions-log", str(tmp_path / "a.jsonl"), "--format", "json"]
    result = CliRunner().invoke(main, [*args, *extra], input=report)
    return result.exit_code, json.loads(result.output)["actions"] if result.output.startswith("{") else []


def test_the_report_gives_the_verdict_action_and_bundle(tmp_path: Path, slurm: FakeSlurm) -> None:
    status, (entry,) = drain(tmp_path, "n03", check_report(tmp_path, "n03"))
    assert status == 0 and entry["result"] == "drained"
    assert slurm.state["n03"].reason == "nightowl: gpu-fell-off-bus (reboot-node)"
    assert entry["bundle"].endswith("node-health-n03") and entry["bundle_sha256"]


def test_a_report_about_another_node_is_refused_unless_asked(tmp_path: Path, slurm: FakeSlurm) -> None:
    status, (entry,) = drain(tmp_path, "n03", check_report(tmp_path, "n17"))
    assert status == 2 and entry["result"] == "refused"
    assert "the report is about n17, not n03" in entry["why"] and slurm.calls == []
    assert [(e["node"], e["result"]) for e in actions_log.read(tmp_path / "a.jsonl")] == [("n03", "refused")]
    status, (entry,) = drain(tmp_path, "n03", check_report(tmp_path, "n17"), "--report-for-other-node")
    assert status == 0 and entry["result"] == "drained" and slurm.calls == [("drain", "n03")]
    logged = actions_log.read(tmp_path / "a.jsonl")[-1]
    assert "about n17, not n03: applied with --report-for-other-node" in logged["why"]


def test_a_report_whose_bundle_was_taken_on_another_node(tmp_path: Path, slurm: FakeSlurm) -> None:
    report = json.loads(check_report(tmp_path, "n03"))
    (Path(report["bundle"]) / "verdicts.json").write_text(json.dumps({"hosts": [{"host": "n17"}]}))
    status, (entry,) = drain(tmp_path, "n03", json.dumps(report))
    assert status == 2 and "about n17, not n03" in entry["why"] and slurm.calls == []


def test_a_report_without_a_verdict_is_an_input_error(tmp_path: Path, slurm: FakeSlurm) -> None:
    status, _ = drain(tmp_path, "n03", check_report(tmp_path, "n03", verdict=None))
    assert status == 2 and slurm.calls == []
    status, _ = drain(tmp_path, "n03", "{not json")
    assert status == 2 and slurm.calls == []


@pytest.mark.integration
def test_on_real_slurm_a_report_is_applied_only_to_its_node(slurm_cluster: SlurmCluster, tmp_path: Path) -> None:
    """gpu-17's report piped to `slurm drain spare-03 --report -` on the real slurmctld: refused, spare-03
    stays as it was; the same report on gpu-17's own name would drain it (shown on spare-03's own report)."""
    from tests.fleet.test_slurm_breaker import _clean

    cluster = slurm_cluster
    cluster.reset()
    _clean(cluster)
    log = tmp_path / "actions.jsonl"
    node = SPARES[2]
    try:
        args = [*nightowl_argv(), "slurm", "drain", node, "--report", "-", "--actions-log", str(log)]
        refused = subprocess.run(
            args, input=check_report(tmp_path, NODE), env=cluster.env, capture_output=True, text=True, timeout=120
        )
        assert refused.returncode == 2, refused.stderr
        assert f"the report is about {NODE}, not {node}" in refused.stdout
        assert "drain" not in cluster.node_state(node)
        own = subprocess.run(
            args, input=check_report(tmp_path, node), env=cluster.env, capture_output=True, text=True, timeout=120
        )
        assert own.returncode == 0, own.stderr
        assert cluster.reason(node) == "nightowl: gpu-fell-off-bus (reboot-node)"
        assert [(e["node"], e["result"]) for e in actions_log.read(log)] == [
            (node, "refused"),
            (node, "intended"),
            (node, "drained"),
        ]
    finally:
        _clean(cluster)
