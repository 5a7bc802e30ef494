"""`nightowl verify NODE --incident BUNDLE` (docs/reference.md#verify): the gate before a node returns to service.

Recorded hosts stand for the node: the incident is Xid 79 (gpu-fell-off-bus, reboot-node) on gpu-17; after the
repair the node shows a fresh boot's kernel log and every GPU, or a new Xid 79."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from nightowl.cli.main import main as cli
from nightowl.fleet import actions_log
from nightowl.fleet import verify as gate
from nightowl.history.extract import bundle_sha256
from nightowl.library import runbooks
from nightowl.paths import data_dir
from nightowl.run import run_and_save
from nightowl.transports.replay import ReplayTransport

HOSTS = data_dir("fixtures") / "hosts"
NEW_XID = "[ 2843.439669] NVRM: Xid (PCI:0000:a1:00): 79, pid=<unknown>, name=<unknown>, GPU has fallen off the bus.\n"


def _recorded(where: Path, source: str, *, fabric: bool = True) -> Path:
    """``source``'s recording under the name gpu-17 (the incident's node); ``fabric``: nvidia-smi -q answers the
    fabric collector too, as on a live host."""
    host = where / "gpu-17"
    shutil.copytree(HOSTS / source, host)
    if fabric and not (host / "fabric.out").exists():
        shutil.copy(host / "nvidia-smi.out", host / "fabric.out")
    return host


@pytest.fixture
def incident(tmp_path: Path) -> Path:
    host = _recorded(tmp_path / "incident", "xid79-fallen-off-bus", fabric=False)
    result = run_and_save(runbooks.load("node-health"), {"gpu-17": lambda: ReplayTransport(host, "gpu-17")}, tmp_path)
    assert result.bundle is not None and result.hosts[0]["verdict"]["action"] == "reboot-node"
    return result.bundle


def _verify(tmp_path: Path, incident: Path, host: Path, *extra: str) -> tuple[int, dict[str, Any], Path]:
    log = tmp_path / "actions.jsonl"
    argv = ["verify", "gpu-17", "--incident", str(incident), "--replay", str(host), "--out", str(tmp_path / "v")]
    result = CliRunner().invoke(cli, [*argv, "--actions-log", str(log), "--format", "json", *extra])
    report = json.loads(result.stdout) if result.stdout.strip().startswith("{") else {}
    return result.exit_code, report, log


def test_a_repair_that_took_passes_and_its_bundle_cites_the_incident(tmp_path: Path, incident: Path) -> None:
    repaired = _recorded(tmp_path / "after", "healthy-l40s")
    status, report, log = _verify(tmp_path, incident, repaired)
    assert status == 0, report
    assert report["result"] == "passed" and [c["check"] for c in report["checks"]] == list(gate.CHECKS)
    assert all(c["result"] == "pass" for c in report["checks"])
    cited = {"id": incident.name, "sha256": bundle_sha256(incident), "verdict": "gpu-fell-off-bus"}
    assert cited.items() <= report["incident"].items()
    bundle = Path(report["bundle"])
    manifest = json.loads((bundle / "manifest.json").read_text())
    assert manifest["verify"]["incident"] == report["incident"] and manifest["verify"]["result"] == "passed"
    assert report["bundle_sha256"] == bundle_sha256(bundle)
    (line,) = actions_log.read(log)
    assert (line["node"], line["what"], line["result"]) == ("gpu-17", "verify", "verify-passed")
    assert incident.name in line["why"] and bundle.name in line["why"] and line["bundle"] == str(bundle)


def test_a_new_xid_after_the_incident_fails_keeps_the_node_out_and_is_recorded(tmp_path: Path, incident: Path) -> None:
    again = _recorded(tmp_path / "after", "healthy-l40s")
    with (again / "kernel-log.out").open("a") as handle:
        handle.write(NEW_XID)
    status, report, log = _verify(tmp_path, incident, again, "--resume", "slurm")
    assert status == 1, report
    checks = {c["check"]: c for c in report["checks"]}
    assert checks["no-new-xid"]["result"] == "fail" and "xid 79 0000:a1:00" in checks["no-new-xid"]["why"]
    assert report["result"] == "failed" and report["resume"] is None  # --resume: never on a failed verify
    (line,) = actions_log.read(log)
    assert line["result"] == "verify-failed" and "kept out" in line["why"] and incident.name in line["why"]


def test_the_incidents_own_xid_lines_seen_again_are_not_new(tmp_path: Path, incident: Path) -> None:
    """Not rebooted yet: the same kernel log still holds the incident's Xid 79, which is no new fault."""
    same_boot = _recorded(tmp_path / "after", "healthy-l40s")
    shutil.copy(HOSTS / "xid79-fallen-off-bus" / "kernel-log.out", same_boot / "kernel-log.out")
    facts = {"kernel_log": _facts("kernel-log", same_boot / "kernel-log.out")}
    evidence = gate.Evidence("gpu-17", facts, {"id": "healthy", "action": "none"})
    (check,) = gate.judge(("no-new-xid",), evidence, gate.read_incident(incident, "gpu-17"))
    assert check["result"] == "pass", check


def test_an_incident_bundle_that_is_not_the_nodes_is_refused(tmp_path: Path, incident: Path) -> None:
    repaired = _recorded(tmp_path / "after", "healthy-l40s")
    argv = ["verify", "gpu-03", "--incident", str(incident), "--replay", str(repaired), "--out", str(tmp_path / "v")]
    result = CliRunner().invoke(cli, [*argv, "--actions-log", str(tmp_path / "a.jsonl")])
    assert result.exit_code == 2 and "no host 'gpu-03'" in result.output and "gpu-17" in result.output
    assert not (tmp_path / "a.jsonl").exists() and not (tmp_path / "v").exists()


def test_a_gpu_count_incident_cannot_be_judged_without_the_expected_count(tmp_path: Path) -> None:
    vm = _recorded(tmp_path / "incident", "vm-h200-passthrough-one-gpu")
    run = run_and_save(
        runbooks.load("node-health"),
        {"gpu-17": lambda: ReplayTransport(vm, "gpu-17")},
        tmp_path,
        params={"expected_gpus": 8},
    )
    assert run.bundle is not None and run.hosts[0]["verdict"]["id"] == "gpu-count-low"
    status, report, _ = _verify(tmp_path, run.bundle, vm)
    assert status == 3 and report["result"] == "cannot-judge", report
    status, report, _ = _verify(tmp_path, run.bundle, vm, "--expected-gpus", "8")
    gpus = next(c for c in report["checks"] if c["check"] == "gpus-present")
    assert status == 1 and gpus["result"] == "fail" and "8 expected" in gpus["why"]
    status, report, _ = _verify(tmp_path, run.bundle, vm, "--expected-gpus", "1")
    assert status == 0, report


def test_every_action_has_its_checks_and_every_check_is_known() -> None:
    from nightowl.knowledge import actions

    table = gate.checks_by_action()
    assert set(table) <= set(actions.names())  # an action without a row gets every check (below)
    assert table["reboot-node"] == gate.CHECKS and table["none"] == ("health-pass",)
    assert gate.checks_for({"action": "no-such-action"}) == gate.CHECKS and gate.checks_for(None) == gate.CHECKS


def test_resume_k8s_sets_the_condition_true_naming_both_bundles_only_on_a_pass(
    tmp_path: Path, incident: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from nightowl.fleet.k8s_condition import CONDITION
    from tests.fleet.test_k8s_condition import Cluster

    fake = Cluster(tmp_path, 20)
    monkeypatch.setenv("PATH", f"{fake.bin}:/usr/bin:/bin")
    monkeypatch.setenv("FAKE_KUBE_STATE", str(fake.state))
    monkeypatch.setenv("FAKE_KUBE_ARGV", str(fake.argv))
    out = {"type": CONDITION, "status": "False", "reason": "gpu-fell-off-bus", "message": "fell off the bus"}
    fake.set("gpu-17", {**out, "lastTransitionTime": "2026-12-01T23:30:00Z"})
    again = _recorded(tmp_path / "again", "healthy-l40s")
    with (again / "kernel-log.out").open("a") as handle:
        handle.write(NEW_XID)
    status, report, _ = _verify(tmp_path, incident, again, "--resume", "k8s")
    assert status == 1 and fake.calls() == []  # a failed verify never touches the node
    repaired = _recorded(tmp_path / "after", "healthy-l40s")
    status, report, log = _verify(tmp_path, incident, repaired, "--resume", "k8s")
    assert status == 0 and report["resume"]["result"] == "set", report
    condition = fake.condition("gpu-17")
    assert condition is not None and (condition["status"], condition["reason"]) == ("True", "verified")
    assert incident.name in condition["message"] and Path(report["bundle"]).name in condition["message"]
    assert [a["result"] for a in actions_log.read(log)][-1] == "set"


def test_an_incident_bundle_edited_after_it_was_written_is_refused(tmp_path: Path, incident: Path) -> None:
    (incident / "hosts" / "gpu-17" / "kernel-log.out").write_text("nothing happened\n")
    status, report, log = _verify(tmp_path, incident, _recorded(tmp_path / "after", "healthy-l40s"))
    assert status == 2 and report == {} and not log.exists()


def _facts(kind: str, path: Path) -> dict[str, Any]:
    from nightowl.collectors import get_collector

    collector = get_collector(kind)
    return collector.facts(collector.parse(path.read_text()))


@pytest.mark.parametrize(
    ("check", "kind", "recording", "why"),
    [
        ("memory-clear", "nvidia-smi", "remap-pending-a100", "remap_pending_gpus"),
        ("fabric-complete", "fabric", "fabric-in-progress-580", "not Completed/Success"),
    ],
)
def test_a_pending_remap_or_an_unfinished_fabric_registration_fails_its_check(
    incident: Path, check: str, kind: str, recording: str, why: str
) -> None:
    facts = {kind.replace("-", "_"): _facts(kind, HOSTS / recording / f"{kind}.out")}
    evidence = gate.Evidence("gpu-17", facts, {"id": "healthy", "action": "none"})
    (result,) = gate.judge((check,), evidence, gate.read_incident(incident, "gpu-17"))
    assert result["result"] == "fail" and why in result["why"], result


def test_a_pass_whose_resume_fails_exits_5_and_logs_the_schedulers_error(
    tmp_path: Path, incident: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    empty = tmp_path / "bin"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))  # no sinfo, no scontrol: the resume cannot be made
    status, report, log = _verify(
        tmp_path, incident, _recorded(tmp_path / "after", "healthy-l40s"), "--resume", "slurm"
    )
    assert status == 5 and report["result"] == "passed" and report["resume"]["result"] == "failed", report
    assert [(a["what"], a["result"]) for a in actions_log.read(log)] == [
        ("verify", "verify-passed"),
        ("resume", "failed"),
    ]


def _with_diag(tmp_path: Path, diag_host: str) -> Path:
    """The repaired node's recording plus the DCGM diagnostics output of ``diag_host`` (what `dcgmi diag -r 2` said)."""
    repaired = _recorded(tmp_path / "after", "healthy-l40s")
    shutil.copy(HOSTS / diag_host / "dcgmi-diag-drained.out", repaired / "dcgmi-diag-drained.out")
    return repaired


def test_allow_invasive_runs_dcgm_diagnostics_first_and_cites_their_bundle(tmp_path: Path, incident: Path) -> None:
    repaired = _with_diag(tmp_path, "gpu-diag-r2-pass-a10g")
    status, report, _log = _verify(tmp_path, incident, repaired, "--allow-invasive")
    assert status == 0, report
    (diag,) = [c for c in report["checks"] if c["check"] == "dcgm-diag"]
    assert diag["result"] == "pass" and report["diag"]["verdict"] == "diag-passed" and report["diag"]["level"] == 2
    assert report["diag"]["sha256"] == bundle_sha256(Path(report["diag"]["bundle"]))
    manifest = json.loads((Path(report["bundle"]) / "manifest.json").read_text())
    assert manifest["verify"]["diag"]["id"] == report["diag"]["id"]


def test_a_failed_diagnostic_fails_the_verify_and_no_result_cannot_judge(tmp_path: Path, incident: Path) -> None:
    status, report, _log = _verify(tmp_path, incident, _with_diag(tmp_path, "sdc-drained-fail"), "--allow-invasive")
    assert status == 1 and report["result"] == "failed"
    assert [c["result"] for c in report["checks"] if c["check"] == "dcgm-diag"] == ["fail"]
    status, report, _log = _verify(tmp_path / "cut", incident, _with_diag(tmp_path / "cut", "sdc-drained-transient"),
                                   "--allow-invasive")  # fmt: skip
    assert status == 3 and [c["result"] for c in report["checks"] if c["check"] == "dcgm-diag"] == ["cannot-judge"]


def test_without_allow_invasive_no_diagnostic_runs(tmp_path: Path, incident: Path) -> None:
    status, report, _log = _verify(tmp_path, incident, _with_diag(tmp_path, "sdc-drained-fail"))
    assert status == 0 and "diag" not in report
    assert all(c["check"] != "dcgm-diag" for c in report["checks"])
