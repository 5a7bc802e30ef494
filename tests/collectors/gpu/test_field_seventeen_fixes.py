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
    assert facts["gpu_init_failed"] is True and facts["adapter_init_failed_gpus"] == ["unknown"]


def test_gsps_crash_report_asks_for_a_reset() -> None:
    judgement = facts_of("kernel-log", CRASHCAT)["xid_judgement"]
    assert judgement["action"] == "reset-gpu" and "gsp_crashcat_report" in judgement["reasons"][0]


@pytest.mark.parametrize("runbook", ["xid", "node-health"])
@pytest.mark.parametrize(("log", "action"), [(UNNAMED, "reboot-node"), (CRASHCAT, "reset-gpu")])
def test_both_runbooks_act_on_them(tmp_path: Path, runbook: str, log: str, action: str) -> None:
    assert replayed_action(tmp_path, runbook, {"kernel-log.out": log}, base="healthy-l40s") == action
