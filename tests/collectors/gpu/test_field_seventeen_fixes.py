"""Fixes the seventeenth field set called for in the kernel-log reader (issue "Never cry wolf"): the older
drivers' "NVRM: rm_init_adapter failed", naming no GPU, and GSP's CrashCat report with no Xid after it were
"nothing wrong" (NVIDIA/open-gpu-kernel-modules kernel-open/nvidia/nv.c; src/nvidia/src/kernel/gpu/gsp/
kernel_gsp.c kgspHealthCheck)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers import facts_of, replayed_action

UNNAMED = "\tNVRM: rm_init_adapter failed\n"
CRASHCAT = (
    "NVRM: GPU0 kgspHealthCheck_TU102: ****************************** GSP-CrashCat Report "
    "*******************************\n"
    "NVRM: GPU0 kgspPrintGspBinBuildId_IMPL: GSP bin buildId: 4f09703c5c7d57baa527d6a189bb6d118bc60e49\n"
    "GSP task watchdog timeout @ pc:0x1b66396, partition:4#0, task:3, gfid: 0\n"
    "NVRM:     Reported by libos partition:4#5 kernel v3.1 [0] @ ts:47545\n"
    "NVRM:     RISC-V CSR State:\n"
)


def test_an_init_failure_naming_no_gpu_is_still_a_gpu_that_failed_to_initialise() -> None:
    facts = facts_of("kernel-log", UNNAMED)
    assert facts["gpu_init_failed"] is True and facts["adapter_init_failed_gpus"] == []  # a list of bus addresses


def test_gsps_crash_report_asks_for_a_reset() -> None:
    judgement = facts_of("kernel-log", CRASHCAT)["xid_judgement"]
    assert judgement["action"] == "reset-gpu" and "gsp_crashcat_report" in judgement["reasons"][0]


@pytest.mark.parametrize("runbook", ["xid", "node-health"])
@pytest.mark.parametrize(("log", "action"), [(UNNAMED, "reboot-node"), (CRASHCAT, "reset-gpu")])
def test_both_runbooks_act_on_them(tmp_path: Path, runbook: str, log: str, action: str) -> None:
    assert replayed_action(tmp_path, runbook, {"kernel-log.out": log}, base="healthy-l40s") == action


def test_the_verdict_says_the_log_names_no_gpu_instead_of_naming_one(tmp_path: Path) -> None:
    """`adapter_init_failed_gpus` holds bus addresses only (pcie attribution reads it as such): the verdict rests on
    `gpu_init_failed`, and its words say no GPU was named rather than call one "unknown"."""
    import json
    import shutil

    from click.testing import CliRunner

    from nightowl.cli.main import main
    from nightowl.paths import data_dir

    host = tmp_path / "host"
    shutil.copytree(data_dir("fixtures") / "hosts" / "healthy-l40s", host)
    (host / "kernel-log.out").write_text(UNNAMED)
    args = ["triage", "xid", "--replay", str(host), "--format", "json", "--out", str(tmp_path / "out")]
    verdict = json.loads(CliRunner().invoke(main, args).output)["hosts"][0]["verdict"]
    assert verdict["id"] == "gpu-failed-to-initialise"
    assert verdict["summary"].startswith("A GPU (the log names none) failed to initialise")
    assert "unknown" not in verdict["summary"]
