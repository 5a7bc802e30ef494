"""`nightowl k8s condition`: the NightowlGPUHealthy condition through a stand-in `kubectl` on PATH.

No API server runs here, so `kubectl` is a small program that keeps the nodes in a JSON file, answers
`get nodes -o json` from it, merges a `patch node --subresource=status --type=strategic` into it the
way a strategic merge patch merges `status.conditions` (on `type`), and records every argv it got.
The breaker therefore counts against the stand-in's state, as it would against the cluster's.
"""

from __future__ import annotations

import hashlib
import json
import sys
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from nightowl.cli.main import main
from nightowl.fleet import actions_log
from nightowl.fleet.k8s_condition import CONDITION, allowed, patch_argv

FAKE_KUBECTL = """#!{python}
import json, os, sys
state, record = os.environ["FAKE_KUBE_STATE"], os.environ["FAKE_KUBE_ARGV"]
with open(record, "a") as f:
    f.write(json.dumps(sys.argv[1:]) + "\\n")
nodes = json.load(open(state))
args = sys.argv[1:]
if args == ["get", "nodes", "-o", "json"]:
    print(json.dumps({{"kind": "List", "items": nodes}}))
    sys.exit(0)
if args[:2] == ["patch", "node"] and args[3:6] == ["--subresource=status", "--type=strategic", "-p"]:
    node = next((n for n in nodes if n["metadata"]["name"] == args[2]), None)
    if node is None:
        print('Error from server (NotFound): nodes "%s" not found' % args[2], file=sys.stderr)
        sys.exit(1)
    conditions = node.setdefault("status", {{}}).setdefault("conditions", [])
    for new in json.loads(args[6])["status"]["conditions"]:
        conditions[:] = [c for c in conditions if c["type"] != new["type"]] + [new]
    json.dump(nodes, open(state, "w"))
    print("node/%s patched" % args[2])
    sys.exit(0)
print("unexpected: " + " ".join(args), file=sys.stderr)
sys.exit(64)
"""


class Cluster:
    def __init__(self, root: Path, count: int) -> None:
        self.bin, self.state, self.argv = root / "bin", root / "nodes.json", root / "argv.jsonl"
        self.bin.mkdir()
        kubectl = self.bin / "kubectl"
        kubectl.write_text(FAKE_KUBECTL.format(python=sys.executable))
        kubectl.chmod(0o755)
        ready = {"type": "Ready", "status": "True", "reason": "KubeletReady", "message": "kubelet is posting ready"}
        nodes = [{"metadata": {"name": f"gpu-{i:02d}"}, "status": {"conditions": [ready]}} for i in range(1, count + 1)]
        self.state.write_text(json.dumps(nodes))

    def condition(self, node: str) -> dict[str, Any] | None:
        item = next(n for n in json.loads(self.state.read_text()) if n["metadata"]["name"] == node)
        return next((c for c in item["status"]["conditions"] if c["type"] == CONDITION), None)

    def set(self, node: str, condition: dict[str, Any]) -> None:
        nodes = json.loads(self.state.read_text())
        item = next(n for n in nodes if n["metadata"]["name"] == node)
        item["status"]["conditions"].append(condition)
        self.state.write_text(json.dumps(nodes))

    def calls(self) -> list[list[str]]:
        return [json.loads(line) for line in self.argv.read_text().splitlines()] if self.argv.exists() else []


@pytest.fixture
def cluster(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Cluster:
    # one check at a time here: no race to wait out (the race itself: tests/fleet/test_breaker_race.py)
    monkeypatch.setattr("nightowl.fleet.k8s_condition.SETTLE_S", 0.0)
    fake = Cluster(tmp_path, 20)
    monkeypatch.setenv("PATH", f"{fake.bin}:/usr/bin:/bin")
    monkeypatch.setenv("FAKE_KUBE_STATE", str(fake.state))
    monkeypatch.setenv("FAKE_KUBE_ARGV", str(fake.argv))
    return fake


def report(tmp_path: Path, node: str, verdict: dict[str, Any] | None) -> str:
    bundle = tmp_path / "bundles" / f"20261201T233000Z-node-health-{node}"
    bundle.mkdir(parents=True, exist_ok=True)
    (bundle / "manifest.json").write_text(json.dumps({"host": node}))
    return json.dumps(
        {"run_id": bundle.name, "bundle": str(bundle), "hosts": [{"host": node, "status": "ok", "verdict": verdict}]}
    )


FELL_OFF = {"id": "gpu-fell-off-bus", "action": "reboot-node", "summary": "GPU 0000:a1:00 fell off the bus"}
HEALTHY = {"id": "healthy", "action": "none", "summary": "no GPU problem found"}


def condition(tmp_path: Path, node: str, status: int, verdict: dict[str, Any] | None, *extra: str) -> dict[str, Any]:
    args = ["k8s", "condition", node, "--check-status", str(status), "--actions-log", str(tmp_path / "actions.jsonl")]
    result = CliRunner().invoke(main, [*args, *extra, "--format", "json"], input=report(tmp_path, node, verdict))
    (entry,) = json.loads(result.output)["actions"]
    # 0 done (or already so), 4 held by the breaker (docs/reference.md#scheduler-actions)
    assert result.exit_code == (4 if entry["result"] in ("held", "would-hold") else 0), result.output
    return entry


def test_12_nodes_turning_unhealthy_at_once_under_a_cap_of_5(tmp_path: Path, cluster: Cluster) -> None:
    failing = [f"gpu-{i:02d}" for i in range(1, 13)]
    results = [condition(tmp_path, n, 1, FELL_OFF, "--max-drain", "5")["result"] for n in failing]
    assert results == ["set"] * 5 + ["held"] * 7
    states = {n: cluster.condition(n) for n in failing}
    assert [n for n, c in states.items() if c and c["status"] == "False"] == failing[:5]
    held = [n for n, c in states.items() if c and c["status"] == "Unknown"]
    assert held == failing[5:]
    assert states["gpu-06"]["message"].startswith("held by nightowl: circuit breaker open: 5 nodes already")
    assert cluster.condition("gpu-13") is None  # nodes nobody checked are untouched
    first = states["gpu-01"]
    assert (first["reason"], first["message"]) == (
        "gpu-fell-off-bus",
        "GPU 0000:a1:00 fell off the bus [bundle 20261201T233000Z-node-health-gpu-01]",
    )
    # the intent before each patch, the outcome after (docs/reference.md#scheduler-actions-actionsjsonl)
    log = [e for e in actions_log.read(tmp_path / "actions.jsonl") if e["result"] != "intended"]
    assert [(e["node"], e["result"]) for e in log] == [(n, r) for n, r in zip(failing, results, strict=True)]
    assert actions_log.verify(tmp_path / "actions.jsonl") == []
    manifest = tmp_path / "bundles" / "20261201T233000Z-node-health-gpu-01" / "manifest.json"
    assert log[0]["bundle_sha256"] == hashlib.sha256(manifest.read_bytes()).hexdigest()
    assert "circuit breaker open" in log[5]["why"]
    # kubectl ran exactly the allowed lines: a read before each decision, one patch per node
    calls = cluster.calls()
    assert {tuple(c[:2]) for c in calls} == {("get", "nodes"), ("patch", "node")}
    patches = [c for c in calls if c[0] == "patch"]
    assert len(patches) == 12 and all(["kubectl", *c] == patch_argv(c[2], _body(c)) for c in patches)


def _body(call: list[str]) -> dict[str, Any]:
    (cond,) = json.loads(call[6])["status"]["conditions"]
    return cond


def test_a_drain_outside_the_window_does_not_count_and_inside_it_does(tmp_path: Path, cluster: Cluster) -> None:
    old = (datetime.now(timezone.utc) - timedelta(hours=2)).strftime("%Y-%m-%dT%H:%M:%SZ")
    recent = (datetime.now(timezone.utc) - timedelta(minutes=5)).strftime("%Y-%m-%dT%H:%M:%SZ")
    for node, when in (("gpu-18", old), ("gpu-19", recent), ("gpu-20", recent)):
        cluster.set(
            node, {"type": CONDITION, "status": "False", "reason": "x", "message": "m", "lastTransitionTime": when}
        )
    assert condition(tmp_path, "gpu-01", 1, FELL_OFF, "--max-drain", "3", "--window", "1h")["result"] == "set"
    assert condition(tmp_path, "gpu-02", 1, FELL_OFF, "--max-drain", "3", "--window", "1h")["result"] == "held"
    # 10 percent of 20 nodes is 2, lower than --max-drain 3: the lower bound holds
    entry = condition(tmp_path, "gpu-03", 1, FELL_OFF, "--max-drain", "3", "--max-drain-percent", "10")
    assert entry["result"] == "held" and "--max-drain-percent 10 of 20 nodes" in entry["why"]


def test_healthy_unchanged_and_cannot_judge(tmp_path: Path, cluster: Cluster) -> None:
    assert condition(tmp_path, "gpu-01", 0, HEALTHY)["result"] == "set"
    set_at = cluster.condition("gpu-01")
    assert (set_at["status"], set_at["reason"]) == ("True", "healthy")
    patches = len([c for c in cluster.calls() if c[0] == "patch"])
    assert condition(tmp_path, "gpu-01", 0, HEALTHY)["result"] == "unchanged"
    assert len([c for c in cluster.calls() if c[0] == "patch"]) == patches  # nothing patched again
    assert condition(tmp_path, "gpu-01", 3, None)["result"] == "set"  # no verdict: Unknown, never True
    unknown = cluster.condition("gpu-01")
    assert (unknown["status"], unknown["reason"]) == ("Unknown", "cannot-judge")
    assert unknown["message"].startswith("no verdict (exit 3)")
    # a verdict with a check status that is neither 0 nor 1 is still Unknown
    assert condition(tmp_path, "gpu-02", 70, FELL_OFF)["result"] == "set"
    assert cluster.condition("gpu-02")["status"] == "Unknown"


def test_dry_run_patches_and_logs_nothing(tmp_path: Path, cluster: Cluster) -> None:
    entry = condition(tmp_path, "gpu-01", 1, FELL_OFF, "--max-drain", "0", "--dry-run")
    assert entry["result"] == "would-hold" and "circuit breaker open" in entry["why"]
    assert condition(tmp_path, "gpu-02", 1, FELL_OFF, "--max-drain", "1", "--dry-run")["result"] == "would-set"
    assert [c for c in cluster.calls() if c[0] == "patch"] == []
    assert not (tmp_path / "actions.jsonl").exists()


def test_an_unknown_node_and_an_unreadable_report(tmp_path: Path, cluster: Cluster) -> None:
    args = ["k8s", "condition", "gpu-99", "--check-status", "1", "--actions-log", str(tmp_path / "a.jsonl")]
    result = CliRunner().invoke(main, args, input=report(tmp_path, "gpu-99", FELL_OFF))
    # a failed attempt: exit 5, and logged with the scheduler's error (issue "acting safely", item 1)
    assert result.exit_code == 5 and "does not list node 'gpu-99'" in result.output
    assert [(e["node"], e["result"]) for e in actions_log.read(tmp_path / "a.jsonl")] == [("gpu-99", "failed")]
    args[2] = "gpu-01"
    result = CliRunner().invoke(main, [*args, "--format", "json"], input="{not json")
    assert result.exit_code == 0
    assert cluster.condition("gpu-01")["status"] == "Unknown"


def test_a_report_about_another_node_is_refused(tmp_path: Path, cluster: Cluster) -> None:
    """gpu-17's check report piped to `k8s condition gpu-03` never sets gpu-03's condition (issue 43 item 2):
    exit 2 naming both, logged as refused; --report-for-other-node applies it, and the log says so."""
    args = ["k8s", "condition", "gpu-03", "--check-status", "1", "--actions-log", str(tmp_path / "a.jsonl")]
    result = CliRunner().invoke(main, [*args, "--format", "json"], input=report(tmp_path, "gpu-17", FELL_OFF))
    assert result.exit_code == 2
    (entry,) = json.loads(result.output)["actions"]
    assert entry["result"] == "refused" and "about gpu-17, not gpu-03" in entry["why"]
    assert cluster.condition("gpu-03") is None and not [c for c in cluster.calls() if c[0] == "patch"]
    assert [(e["node"], e["result"]) for e in actions_log.read(tmp_path / "a.jsonl")] == [("gpu-03", "refused")]
    forced = [*args, "--report-for-other-node", "--format", "json"]
    result = CliRunner().invoke(main, forced, input=report(tmp_path, "gpu-17", FELL_OFF))
    assert result.exit_code == 0, result.output
    assert cluster.condition("gpu-03")["status"] == "False"
    last = actions_log.read(tmp_path / "a.jsonl")[-1]
    assert last["result"] == "set" and "about gpu-17, not gpu-03: applied with --report-for-other-node" in last["why"]


@pytest.mark.parametrize(
    ("names", "refused"),
    [
        ({"host": "gpu-03"}, False),
        ({"host": "GPU-03.cluster.example"}, False),  # host names compare without case; a short name its FQDN
        ({"host": "gpu-03", "node": "gpu-17"}, True),  # a report carrying NODE_NAME of another node
        ({"host": "gpu-03", "hostname": "gpu-17"}, True),
        ({"host": "gpu-03", "bundle_host": "gpu-17"}, True),  # its bundle was taken on gpu-17
    ],
)
def test_every_name_a_report_claims_is_the_node(
    tmp_path: Path, cluster: Cluster, names: dict[str, str], refused: bool
) -> None:
    body = json.loads(report(tmp_path, names["host"], FELL_OFF))
    body["hosts"][0].update({k: v for k, v in names.items() if k in ("node", "hostname")})
    if "bundle_host" in names:
        (Path(body["bundle"]) / "hosts" / names["bundle_host"]).mkdir(parents=True)
    args = ["k8s", "condition", "gpu-03", "--check-status", "1", "--actions-log", str(tmp_path / "a.jsonl")]
    result = CliRunner().invoke(main, args, input=json.dumps(body))
    assert result.exit_code == (2 if refused else 0), result.output
    assert ("not gpu-03" in result.output) == refused
    assert (cluster.condition("gpu-03") is None) == refused


def test_the_allow_list() -> None:
    good = {"type": CONDITION, "status": "False", "reason": "r", "message": "m"}
    assert allowed(["kubectl", "get", "nodes", "-o", "json"])
    assert allowed(patch_argv("gpu-01.example.com", good))
    assert not allowed(patch_argv("../gpu-01", good))
    assert not allowed(patch_argv("GPU_01", good))
    assert not allowed(patch_argv("gpu-01", {**good, "type": "Ready"}))
    assert not allowed(["kubectl", "delete", "node", "gpu-01"])
    assert not allowed(["kubectl", "get", "secrets", "-o", "json"])
    two = json.dumps({"status": {"conditions": [good, good]}})
    meta = json.dumps({"status": {"conditions": [good]}, "metadata": {"labels": {"a": "b"}}})
    for body in (two, meta, "not json"):
        assert not allowed(
            ["kubectl", "patch", "node", "gpu-01", "--subresource=status", "--type=strategic", "-p", body]
        )
