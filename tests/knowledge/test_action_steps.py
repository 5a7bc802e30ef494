"""The first action's steps by tenancy (knowledge/action_steps.csv, tenancy_signs.csv; docs/reference.md#tenancy):
a VM gets "stop and start the instance, or replace it" where bare metal is power-cycled, and every place that
prints the steps (the text report, the status update, the postmortem) reads them from the verdict."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from nightowl import knowledge
from nightowl.cli.render import text_report
from nightowl.knowledge import actions
from nightowl.library import runbooks
from nightowl.paths import data_dir
from nightowl.run import run_and_save
from nightowl.transports.replay import ReplayTransport

HOSTS = data_dir("fixtures") / "hosts"
VM = HOSTS / "vm-h200-passthrough-one-gpu"  # one H200, "Virtualization Mode : Pass-Through"
XID79 = HOSTS / "xid79-fallen-off-bus"  # an nvidia-smi that names no virtualization mode


def _run(host: Path, tmp_path: Path, params: dict[str, Any] | None = None) -> tuple[dict[str, Any], Path]:
    result = run_and_save(
        runbooks.load("node-health"),
        {host.name: lambda: ReplayTransport(host, host.name)},
        tmp_path / "out",
        params=params or {},
    )
    assert result.bundle is not None
    return result.summary, result.bundle


def test_every_row_of_both_files_loads_with_a_known_action_tenancy_and_source() -> None:
    steps = actions.steps_rows()
    assert steps and all(row.source and row.nvsentinel for row in steps.values())
    assert {tenancy for _, tenancy in steps} == set(actions.TENANCIES)
    assert len(steps) == len(knowledge.read_csv(actions.STEPS_FILE))  # no row dropped or merged
    signs = actions.tenancy_signs()
    assert signs and all(sign.tenancy in actions.TENANCIES and sign.source for sign in signs)
    assert len(signs) == len(knowledge.read_csv(actions.SIGNS_FILE))


def test_an_action_whose_steps_differ_by_tenancy_has_a_row_for_every_tenancy() -> None:
    differing = {action for action, _ in actions.steps_rows()}
    for action in differing - {"escalate"}:  # escalate keeps actions.csv's words on bare metal
        assert {t for a, t in actions.steps_rows() if a == action} == set(actions.TENANCIES), action


def test_bare_metal_steps_are_the_actions_own_first_step_unchanged() -> None:
    for (action, tenancy), row in actions.steps_rows().items():
        if tenancy == "bare-metal":
            assert row.steps == actions.first_step(action), action


def test_every_sign_reads_a_fact_its_collector_declares() -> None:
    from nightowl.collectors import get_collector

    collectors = {"nvidia_smi": "nvidia-smi", "kernel_log": "kernel-log"}
    for sign in actions.tenancy_signs():
        namespace, _, name = sign.fact.partition(".")
        assert namespace in collectors, sign.fact
        assert name in {fact.name for fact in get_collector(collectors[namespace]).produces}, sign.fact


@pytest.mark.parametrize(
    ("mode", "tenancy"),
    [("Pass-Through", "vm"), ("VGPU", "vm"), ("Host VGPU", "bare-metal"), ("None", "bare-metal"), ("N/A", None)],
)
def test_the_gpu_virtualization_mode_names_the_tenancy(mode: str, tenancy: str | None) -> None:
    assert actions.tenancy_of({"nvidia_smi": {"virtualization_mode": mode}})[0] == tenancy


def test_a_declared_tenancy_comes_before_the_facts_and_an_unknown_one_is_not_taken() -> None:
    facts = {"nvidia_smi": {"virtualization_mode": "Pass-Through"}}
    assert actions.first_steps("reboot-node", facts, "managed")["tenancy"] == "managed"
    assert actions.first_steps("reboot-node", facts, "managed")["determined_by"] == "declared"
    assert actions.first_steps("reboot-node", facts, "cloud")["tenancy"] == "vm"  # not a tenancy: the facts decide
    with pytest.raises(ValueError, match="not one of"):
        actions.tenancy_of(facts, "cloud")


def test_the_one_gpu_vm_recording_gets_vm_steps_for_reboot_node_everywhere_they_are_printed(tmp_path: Path) -> None:
    summary, bundle = _run(VM, tmp_path, {"expected_gpus": 8})
    verdict = summary["hosts"][0]["verdict"]
    assert (verdict["id"], verdict["action"]) == ("gpu-count-low", "reboot-node")
    step = verdict["first_step"]
    assert step["tenancy"] == "vm" and step["determined_by"] == 'nvidia_smi.virtualization_mode = "Pass-Through"'
    assert step["nvsentinel"] == "RESTART_VM" and "stop and start the instance" in step["steps"]
    assert "power-cycle" not in step["steps"]
    stored = json.loads((bundle / "verdicts.json").read_text())["hosts"][0]["verdict"]["first_step"]
    assert stored == step  # one record: the bundle's verdict carries what every reader prints
    steps_line = next(line for line in text_report(summary).splitlines() if line.startswith("  steps:"))
    assert 'on a VM (nvidia_smi.virtualization_mode = "Pass-Through")' in steps_line and "stop and start" in steps_line
    update = (bundle / "status-update.md").read_text()
    assert "Steps: on a VM" in update and "stop and start the instance" in update
    assert "stop and start the instance" in (bundle / "postmortem.md").read_text()
    assert "stop and start the instance" in (bundle / "postmortem.html").read_text()


def test_a_bare_metal_verdict_keeps_its_steps_and_says_the_tenancy_was_not_determined(tmp_path: Path) -> None:
    summary, bundle = _run(XID79, tmp_path)
    verdict = summary["hosts"][0]["verdict"]
    assert verdict["action"] == "reboot-node"
    step = verdict["first_step"]
    assert step["tenancy"] is None and step["steps"] == actions.first_step("reboot-node")
    assert step["note"] == actions.UNDETERMINED
    steps_line = next(line for line in text_report(summary).splitlines() if line.startswith("  steps:"))
    assert "tenancy not determined" in steps_line and "power-cycle" in steps_line


def test_a_gpu_that_says_virtualization_mode_none_is_bare_metal_with_the_same_steps(tmp_path: Path) -> None:
    host = tmp_path / "gpu-03"
    shutil.copytree(VM, host)
    for name in ("nvidia-smi.out", "fabric.out"):
        text = (host / name).read_text()
        assert "Pass-Through" in text
        (host / name).write_text(text.replace("Pass-Through", "None"))
    summary, _ = _run(host, tmp_path, {"expected_gpus": 8})
    step = summary["hosts"][0]["verdict"]["first_step"]
    assert step["tenancy"] == "bare-metal" and step["steps"] == actions.first_step("reboot-node")
    assert "note" not in step


def test_a_verdict_that_needs_no_action_prints_no_steps(tmp_path: Path) -> None:
    summary, bundle = _run(VM, tmp_path)
    assert summary["hosts"][0]["verdict"]["action"] == "none"
    assert "steps:" not in text_report(summary) and "Steps:" not in (bundle / "status-update.md").read_text()


def test_a_runbook_that_declares_a_tenancy_parameter_gets_its_steps_over_the_facts(tmp_path: Path) -> None:
    """The runner reads ``params.tenancy``: a runbook that declares it lets the operator say "managed" where
    the GPU itself says Pass-Through (a VM the provider runs for you)."""
    from nightowl.engine.validate import load_runbook

    path = tmp_path / "rb.yaml"
    path.write_text(
        'id: t\ntitle: test\nparameters:\n  tenancy: {default: null, description: "bare-metal, vm or managed"}\n'
        "entry: start\nnodes:\n  start:\n    collect: [nvidia-smi]\n    next: out\n"
        "  out:\n    verdict: {id: out, severity: critical, action: reboot-node, summary: out}\n"
    )
    loaded = load_runbook(path)
    for declared, tenancy, by in (
        (None, "vm", 'nvidia_smi.virtualization_mode = "Pass-Through"'),
        ("managed", "managed", "declared"),
    ):
        result = run_and_save(
            loaded, {"gpu-17": lambda: ReplayTransport(VM, "gpu-17")}, tmp_path, params={"tenancy": declared}
        )
        step = result.hosts[0]["verdict"]["first_step"]
        assert (step["tenancy"], step["determined_by"]) == (tenancy, by)
    assert step["steps"] == actions.steps_rows()[("reboot-node", "managed")].steps
