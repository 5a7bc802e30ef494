"""Regression tests for the kernel-log misses of the sixth field set (fixtures/field/gpu-6; issue "never cry
wolf"), each built on the format family the miss belongs to, in several shapes:

- an NVRM line that names a GPU fault state (NV_ERR_GPU_IN_FULLCHIP_RESET, NV_ERR_GPU_IS_LOST, GSP's
  RC_TRIGGERED event) is judged by its kernel_patterns.csv row even with no Xid line; a bare assertion is not;
- the GSP RPC debug dump (the "RPC history" tables the driver prints only with Xid 119/120) is a GSP fault
  report whatever event it follows, and the Xid 119 judgement where its line is there;
- a kernel WARNING / BUG / Oops whose task loads the nvidia module, or whose frames are the driver's, is a
  driver-load failure; one that only lists nvidia among the linked modules is not.
"""

from __future__ import annotations

import inspect
import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from nightowl.cli.main import main
from nightowl.collectors.gpu.kernel_log import parser, splats
from tests.helpers import ROOT, facts_of

HOSTS = ROOT / "fixtures" / "hosts"
FIELD = ROOT / "fixtures" / "field"


def _verdict(tmp_path: Path, runbook: str, kernel_log: str) -> dict[str, object]:
    """The verdict ``runbook`` gives ``kernel_log`` beside the healthy L40S's nvidia-smi (as bench/field.py runs it)."""
    host = tmp_path / "host"
    shutil.copytree(HOSTS / "healthy-l40s", host)
    (host / "kernel-log.out").write_text(kernel_log)
    args = ["triage", runbook, "--replay", str(host), "--format", "json", "--out", str(tmp_path / "out")]
    result = CliRunner().invoke(main, args)
    (entry,) = json.loads(result.output)["hosts"]
    return entry.get("verdict") or {"action": "cannot-judge", "error": entry.get("error")}


def _as(form: str, lines: list[str]) -> str:
    """The NVRM lines as one kernel-log form prints them."""
    if form == "dmesg":
        return "".join(f"[  84.{738325 + i:06d}] NVRM: {line}\n" for i, line in enumerate(lines))
    if form == "journal":
        return "".join(f"Jun 12 16:31:18 fedora-box kernel: NVRM: {line}\n" for line in lines)
    if form == "iso":
        return "".join(f"2025-06-12T16:31:18+0200 box kernel: NVRM: {line}\n" for line in lines)
    return "".join(f"NVRM: {line}\n" for line in lines)  # bare, as `dmesg | grep NVRM` without stamps


FORMS = ["dmesg", "journal", "iso", "bare"]

# ---- NVRM lines naming a GPU fault state ------------------------------------------------------------------

RC_TRIGGERED = (
    "GPU0 _kgspProcessRpcEvent: Failed to process received event 0x1004 (RC_TRIGGERED) from GPU0: status=0x21"
)
FULLCHIP = (
    "GPU0 nvAssertFailedNoLog: Assertion failed: (status == NV_OK) || (status == NV_ERR_GPU_IN_FULLCHIP_RESET)"
    " @ rs_client.c:844"
)
GPU_LOST = (
    "GPU1 nvAssertOkFailedNoLog: Assertion failed: GPU lost from the bus [NV_ERR_GPU_IS_LOST] (0x0000000F)"
    " returned from pRmApi->Control(pRmApi, ...) @ kern_bus_gm107.c:1290"
)
UNEXPECTED_RC = "Unexpected RPC event from GPU0: 0x1004 (RC_TRIGGERED), sequence: 1432"
BARE_ASSERT = "nvAssertFailedNoLog: Assertion failed: 0 @ osapi.c:1688"


@pytest.mark.parametrize("form", FORMS)
@pytest.mark.parametrize(
    ("lines", "action"),
    [
        ([RC_TRIGGERED, FULLCHIP], "reboot-node"),
        ([FULLCHIP], "reboot-node"),
        ([GPU_LOST], "reboot-node"),
        ([RC_TRIGGERED], "escalate"),
        ([UNEXPECTED_RC], "escalate"),
    ],
)
def test_an_nvrm_line_naming_a_fault_state_is_judged_without_an_xid(form: str, lines: list[str], action: str) -> None:
    facts = facts_of("kernel-log", _as(form, lines))
    assert facts["xid_codes"] == []
    assert facts["xid_judgement"]["action"] == action


@pytest.mark.parametrize("form", FORMS)
def test_a_bare_assertion_names_no_fault_state(form: str) -> None:
    facts = facts_of("kernel-log", _as(form, [BARE_ASSERT, "GPU0 nvCheckFailedNoLog: Check failed: x != NULL @ a.c:1"]))
    assert facts["xid_judgement"]["action"] in (None, "none")


def test_the_fullchip_reset_journal_of_the_field_set_is_a_reboot_and_the_laptop_assertion_is_healthy(
    tmp_path: Path,
) -> None:
    journal = (
        FIELD / "gpu-6" / "journal-fedora-gsp-rc-triggered-then-fullchip-reset-assertions-no-xid-line-ogkm1045.txt"
    )
    verdict = _verdict(tmp_path / "a", "xid", journal.read_text())
    assert verdict["action"] == "reboot-node"
    assert "No Xid line" in str(verdict["summary"]) and "gpu_in_fullchip_reset" in str(verdict["summary"])
    laptop = FIELD / "gpu-4" / "syslog-with-dmesg-stamp-nvassertfailednolog-osapi-acer-wmi-no-freeze-ogkm402.txt"
    assert _verdict(tmp_path / "b", "xid", laptop.read_text())["action"] == "none"


# ---- the GSP RPC debug dump ---------------------------------------------------------------------------------

DUMP = [
    "GPU6 GSP RPC buffer contains function 76 (GSP_RM_CONTROL) sequence 4124 and data 0x0 0x0.",
    "GPU6 RPC history (CPU -> GSP):",
    "    entry function                     sequence data0              data1              ts_start           "
    "ts_end             duration actively_polling",
    "     0    76   GSP_RM_CONTROL              4124 0x0000000020800a4c 0x0000000000000050 0x000655d53b47bfc0 "
    "0x0000000000000000          y",
    "GPU6 RPC event history (CPU <- GSP):",
    "    entry function                     sequence data0              data1              ts_start           "
    "ts_end             duration during_incomplete_rpc",
    "     0    4124 GSP_LOCKDOWN_NOTICE            0 0x0000000000000000 0x0000000000000000 0x000655d53b56deca "
    "0x000655d53b56deca           ",
]
XID_119 = (
    "Xid (PCI:0000:ba:00): 119, pid=2413, name=nvidia-smi, Timeout after 6s of waiting for RPC response from GPU6"
    " GSP! Expected function 76 (GSP_RM_CONTROL) sequence 4124 (0x20800a4c 0x50)."
)


@pytest.mark.parametrize("form", FORMS)
@pytest.mark.parametrize("start", [0, 1, 4])  # the whole dump, without its first line, only the event table
def test_a_gsp_rpc_dump_is_read_whatever_it_follows(form: str, start: int) -> None:
    for before in ([], ["loading NVIDIA UNIX Open Kernel Module for x86_64  570.133.20"]):
        facts = facts_of("kernel-log", _as(form, before + DUMP[start:]))
        assert facts["gsp_rpc_dump"] is True
        assert facts["gsp_rpc_dump_gpu_indexes"] == [6]
        assert facts["events"] == [e for e in facts["events"] if "history" not in str(e.get("text"))]  # no event


def test_table_rows_alone_are_no_dump() -> None:
    assert facts_of("kernel-log", _as("dmesg", [DUMP[3], DUMP[6]]))["gsp_rpc_dump"] is False


@pytest.mark.parametrize("runbook", ["xid", "node-health"])
def test_a_gsp_rpc_dump_without_its_xid_is_a_gsp_fault_report(tmp_path: Path, runbook: str) -> None:
    field = FIELD / "gpu-6" / "dmesg-gsp-rpc-history-table-gpu6-trailing-spaces-no-xid-line-ogkm1230.txt"
    verdict = _verdict(tmp_path, runbook, field.read_text())
    assert (verdict["id"], verdict["action"]) == ("gsp-fault-report", "escalate")
    assert "GPU index 6" in str(verdict["summary"])


def test_with_its_xid_line_the_dump_is_judged_as_xid_119(tmp_path: Path) -> None:
    verdict = _verdict(tmp_path, "xid", _as("dmesg", [XID_119, *DUMP]))
    assert verdict["action"] == "reset-gpu"


# ---- kernel WARNING / BUG / Oops of the driver --------------------------------------------------------------

TDX = FIELD / "gpu-6" / "modprobe-nvidia-prompt-tdx-guest-warning-apply-retpolines-cut-here-register-dump-nvtrust72.txt"
OOPS_IN_DRIVER = """\
[ 5321.104552] BUG: kernel NULL pointer dereference, address: 0000000000000008
[ 5321.104560] #PF: supervisor read access in kernel mode
[ 5321.104571] Oops: 0000 [#1] PREEMPT SMP NOPTI
[ 5321.104577] CPU: 12 PID: 40211 Comm: python3 Tainted: P           OE      6.8.0-45-generic #45-Ubuntu
[ 5321.104585] RIP: 0010:_nv012345rm+0x1c/0x60 [nvidia]
[ 5321.104650] Call Trace:
[ 5321.104655]  <TASK>
[ 5321.104671]  ? rm_ioctl+0x7e/0x400 [nvidia]
[ 5321.104690]  nvidia_ioctl+0x1f1/0x8a0 [nvidia]
[ 5321.104703]  __x64_sys_ioctl+0x9d/0xe0
[ 5321.104720]  </TASK>
"""
WARNING_OF_ANOTHER_MODULE = """\
[   12.100000] nvidia: loading out-of-tree module taints kernel.
[   12.300000] NVRM: loading NVIDIA UNIX x86_64 Kernel Module  550.54.15  Tue Mar  5 22:23:56 UTC 2024
[   40.000000] zfs: loading out-of-tree module taints kernel.
[   40.100000] ------------[ cut here ]------------
[   40.100010] WARNING: CPU: 2 PID: 911 at mm/page_alloc.c:4412 __alloc_pages+0x2e1/0x340
[   40.100020] Modules linked in: zfs(PO+) spl(O) nvidia_uvm(POE) nvidia(POE) drm
[   40.100030] CPU: 2 PID: 911 Comm: modprobe Tainted: P           OE      6.8.0 #1
[   40.100040] RIP: 0010:__alloc_pages+0x2e1/0x340
[   40.100050] ---[ end trace 0000000000000000 ]---
"""


@pytest.mark.parametrize("form", ["as-pasted", "journal", "indented"])
def test_a_warning_in_modprobe_loading_nvidia_is_a_driver_load_failure(form: str) -> None:
    text = TDX.read_text()
    if form == "journal":
        text = "".join(
            f"Jun 01 10:00:00 tdx-guest kernel: {line.split('] ', 1)[-1]}\n" for line in text.splitlines()[1:]
        )
    elif form == "indented":
        text = "".join(f"    {line}\n" for line in text.splitlines())
    facts = facts_of("kernel-log", text)
    assert facts["driver_load_failed"] is True
    (failure,) = facts["driver_load_failures"]
    assert failure["id"] == "kernel_warning_in_nvidia_driver"
    assert failure["line"].startswith("WARNING: CPU: 3 PID: 1958 at arch/x86/kernel/alternative.c:654")


def test_an_oops_in_the_driver_frames_is_one_too() -> None:
    failures = facts_of("kernel-log", OOPS_IN_DRIVER)["driver_load_failures"]
    assert [f["id"] for f in failures] == ["kernel_bad_access_in_nvidia_driver"]


def test_a_module_marked_loading_in_the_module_list_is_the_driver() -> None:
    text = WARNING_OF_ANOTHER_MODULE.replace("zfs(PO+)", "zfs(PO)").replace(" nvidia(POE)", " nvidia(POE+)")
    assert [f["id"] for f in facts_of("kernel-log", text)["driver_load_failures"]] == [
        "kernel_warning_in_nvidia_driver"
    ]


def test_a_warning_of_another_module_listing_nvidia_is_not_the_driver() -> None:
    facts = facts_of("kernel-log", WARNING_OF_ANOTHER_MODULE)
    assert facts["driver_load_failures"] == [] and facts["driver_load_failed"] is False


def test_the_tdx_guest_warning_gets_the_driver_load_verdict(tmp_path: Path) -> None:
    verdict = _verdict(tmp_path, "xid", TDX.read_text())
    assert (verdict["id"], verdict["action"]) == ("driver-load-failed", "reconfigure")
    assert "WARNING, BUG or Oops" in str(verdict["summary"])


def test_every_splat_opener_holds_a_hint_the_parse_loop_tests() -> None:
    """The data (kernel_splats.csv) and the loop's substring tests (splats.HINTS) agree: an opener no hint finds
    would never be read."""
    samples = {
        "warning": "WARNING: CPU: 0 PID: 1 at a.c:1 f+0x1/0x2",
        "kernel_bug": "kernel BUG at mm/slub.c:4321!",
        "bad_access": "BUG: unable to handle page fault for address: ffff",
        "oops": "Oops: 0000 [#1] SMP",
        "general_protection": "general protection fault, probably for non-canonical address 0xdead: 0000 [#1]",
    }
    rows = dict(splats.openers())
    assert set(rows) == set(samples)
    loop = inspect.getsource(parser.parse_lines)
    assert all(f'"{hint}" in line' in loop for hint in splats.HINTS)
    for row_id, sample in samples.items():
        assert rows[row_id].search(sample), row_id
        assert any(hint in sample for hint in splats.HINTS), row_id
