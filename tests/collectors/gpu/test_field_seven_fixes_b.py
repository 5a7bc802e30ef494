"""Regression tests for the kernel-log miss of the seventh field set (fixtures/field/gpu-7; issue "never cry
wolf", item 4: "stacks inside the NVIDIA module with or without the hung-task header"), on the format family:

- a run of consecutive frames in an nvidia module, in the old (``[<addr>] ? func+0x../0x.. [nvidia]``, RHEL 7) or
  the modern (`` func+0x../0x.. [nvidia_uvm]``) form, under any line prefix, with no report header before it, is a
  task stuck in the driver (driver_deadlock: driver-deadlock, reboot-node);
- under a hung-task header it is that task, lock frame or not;
- frames after another report's task line (the driver's own dump_stack, a sysrq-t dump of a sleeping task), two
  stray frames, and nvidia listed among ``Modules linked in:`` are not.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from nightowl.cli.main import main
from tests.helpers import ROOT, facts_of

HOSTS = ROOT / "fixtures" / "hosts"

# source: https://github.com/ollama/ollama/issues/4342 (fixtures/field/gpu-7, the syslog's frames, in order)
OLD_FRAMES = [
    "[<ffffffff85fc539a>] ? system_call_fastpath+0x25/0x2a",
    "[<ffffffff85a71c21>] ? SyS_ioctl+0x81/0xa0",
    "[<ffffffff85a71988>] ? do_vfs_ioctl+0x3a8/0x5c0",
    "[<ffffffffc074c130>] ? nvidia_unlocked_ioctl+0x20/0x30 [nvidia]",
    "[<ffffffffc074bf28>] ? nvidia_ioctl.isra.22+0x728/0x910 [nvidia]",
    "[<ffffffffc1237e38>] ? rm_ioctl+0x58/0xb0 [nvidia]",
    "[<ffffffffc1230abb>] ? _nv000731rm+0x16b/0xeb0 [nvidia]",
    "[<ffffffffc07f8f9d>] ? _nv000577rm+0x5d/0x70 [nvidia]",
]
# source: https://github.com/rwth-i6/returnn/issues/1480 (fixtures/field/gpu-6): the frames after the
# "task:python3.11 state:D" line, which this excerpt leaves out
MODERN_FRAMES = [
    " ? __kmalloc+0x179/0x330",
    " uvm_page_table_range_vec_init+0x191/0x260 [nvidia_uvm]",
    " uvm_page_table_range_vec_create+0x65/0xb0 [nvidia_uvm]",
    " mem_map_gpu+0x68/0x210 [nvidia_uvm]",
    " uvm_mem_map_gpu_kernel+0xcc/0x1a0 [nvidia_uvm]",
    " uvm_api_alloc_semaphore_pool+0x19c/0x2f0 [nvidia_uvm]",
    " uvm_ioctl+0x13e0/0x16f0 [nvidia_uvm]",
    " ? __mod_lruvec_page_state+0x6b/0xb0",
]


def _as(form: str, lines: list[str]) -> str:
    if form == "syslog":
        return "".join(f"May 11 10:54:31 localhost kernel: {line}\n" for line in lines)
    if form == "dmesg":
        return "".join(f"[ 4122.{100000 + i:06d}] {line}\n" for i, line in enumerate(lines))
    if form == "relative":
        return "".join(f"[  +0.000042] {line}\n" for line in lines)
    return "".join(f"{line}\n" for line in lines)  # bare, as pasted from `dmesg` without stamps


FORMS = ["syslog", "dmesg", "relative", "bare"]


def _verdict(tmp_path: Path, kernel_log: str) -> dict[str, object]:
    """The xid runbook's verdict on ``kernel_log`` beside the healthy L40S's nvidia-smi (as bench/field.py runs it)."""
    host = tmp_path / "host"
    shutil.copytree(HOSTS / "healthy-l40s", host)
    (host / "kernel-log.out").write_text(kernel_log)
    args = ["triage", "xid", "--replay", str(host), "--format", "json", "--out", str(tmp_path / "out")]
    (entry,) = json.loads(CliRunner().invoke(main, args).output)["hosts"]
    return entry.get("verdict") or {"action": "cannot-judge"}


# The modern frames as a 5.18+ kernel built with CONFIG_STACKTRACE_BUILD_ID prints them (the module's build ID)
BUILD_ID_FRAMES = [line.replace("[nvidia_uvm]", "[nvidia_uvm 8d0f5a2c41e3b7f9]") for line in MODERN_FRAMES]


@pytest.mark.parametrize("form", FORMS)
@pytest.mark.parametrize("frames", [OLD_FRAMES, MODERN_FRAMES, BUILD_ID_FRAMES], ids=["old", "modern", "build-id"])
def test_frames_in_the_driver_without_a_header_are_a_task_stuck_in_it(form: str, frames: list[str]) -> None:
    facts = facts_of("kernel-log", _as(form, frames))
    assert facts["driver_deadlock"] is True
    named = facts["driver_deadlock_frames"]
    assert named and all(frame.split("+")[0] in " ".join(frames) for frame in named)
    assert facts["driver_deadlock_seen"] == "frames"


def test_the_field_stack_gets_the_header_cases_verdict(tmp_path: Path) -> None:
    (path,) = (ROOT / "fixtures/field/gpu-7").glob("*-kernel-stack-only-nvidia-ioctl-*")
    verdict = _verdict(tmp_path, path.read_text())
    assert (verdict["id"], verdict["action"]) == ("driver-deadlock", "reboot-node")
    # the prose claims only what was read: frames without a header, neither a D state nor a lock
    assert "without their report header" in verdict["summary"]
    assert "D state" not in verdict["summary"] and "on a lock" not in verdict["summary"]


def test_what_the_log_shows_of_the_stuck_task_is_told_the_strongest_first() -> None:
    assert facts_of("kernel-log", _as("syslog", OLD_FRAMES))["driver_deadlock_seen"] == "frames"
    blocked = _as("syslog", [HUNG_HEADERS[0], "Call Trace:", *OLD_FRAMES])
    assert facts_of("kernel-log", blocked)["driver_deadlock_seen"] == "blocked"
    assert facts_of("kernel-log", "")["driver_deadlock_seen"] is None


HUNG_HEADERS = [
    "INFO: task ollama_llama_se:4342 blocked for more than 120 seconds.",  # kernel/hung_task.c
    "task:ollama_llama_se state:D stack:0     pid:4342  ppid:1      flags:0x00000002",  # sched_show_task, 5.14+
]


@pytest.mark.parametrize("header", HUNG_HEADERS)
def test_under_a_hung_task_header_the_task_is_named_lock_frame_or_not(header: str) -> None:
    """The old frames hold no lock frame (driver_lock_frames.csv): the task is stuck in the driver all the same."""
    facts = facts_of("kernel-log", _as("syslog", [header, "Call Trace:", *OLD_FRAMES]))
    assert facts["driver_deadlock_tasks"] == ["ollama_llama_se"]
    assert "rm_ioctl" in facts["driver_deadlock_frames"] and facts["driver_deadlock_seen"] == "blocked"
    assert not any("header" in frame for frame in facts["driver_deadlock_frames"])


def test_a_repeated_report_counts_once() -> None:
    text = _as("syslog", OLD_FRAMES) + _as("syslog", ["Call Trace:"]) + _as("syslog", OLD_FRAMES)
    assert len(facts_of("kernel-log", text)["driver_deadlock_frames"]) == 3


# source: https://github.com/leptonai/gpud/blob/4092c3f14dbd639b67b813c604c879c25bc5cc7c/components/accelerator/
# nvidia/error/xid/testdata/dmesg-with-xid-119.log (fixtures/field/kernel-log-2): the driver's own dump_stack
DRIVER_DUMP = [
    "CPU: 17 PID: 2024380 Comm: nvidia-smi Tainted: P           OE     5.15.0-112-generic #122-Ubuntu",
    "Call Trace:",
    " <TASK>",
    " dump_stack_lvl+0x4a/0x63",
    " dump_stack+0x10/0x16",
    " os_dump_stack+0xe/0x14 [nvidia]",
    " _nv012454rm+0x437/0x4b0 [nvidia]",
    " ? _nv012470rm+0x1d/0x30 [nvidia]",
    " ? _nv012379rm+0x52/0x70 [nvidia]",
]


@pytest.mark.parametrize(
    "lines",
    [
        DRIVER_DUMP,
        [*DRIVER_DUMP[:3], *DRIVER_DUMP[6:]],  # the report's task line, its frames without os_dump_stack
        ["task:nvidia-persiste state:S stack:0     pid:1814  ppid:1      flags:0x00000002", *OLD_FRAMES],
        OLD_FRAMES[3:5],  # two frames
        ["Modules linked in: nvidia_uvm(POE) nvidia_drm(POE) nvidia_modeset(POE) nvidia(POE) drm_kms_helper"],
    ],
    ids=["driver-dump-stack", "after-a-dump-header", "sysrq-t-sleeping-task", "two-frames", "module-list"],
)
def test_frames_after_another_reports_header_or_too_few_are_no_stuck_task(lines: list[str]) -> None:
    assert facts_of("kernel-log", _as("dmesg", lines))["driver_deadlock"] is False


# ---- incremental reads (the kernel-log cursor carries only the lines a reader needs) --------------------------


def _incremental(first: str, then: str) -> dict[str, object]:
    from nightowl.collectors.gpu.kernel_log.cursor import keep_lines

    return facts_of("kernel-log", keep_lines(first) + then)


@pytest.mark.parametrize("cut", [2, 3, 5])
def test_an_incremental_read_keeps_a_headerless_run_and_its_end(cut: int) -> None:
    """The frames of the first read are carried (a run cut between reads still counts), and so is the line that
    ended a run: two short runs do not join into one."""
    text = _as("syslog", ["Call Trace:", *OLD_FRAMES]).splitlines(keepends=True)
    whole = facts_of("kernel-log", "".join(text))
    carried = _incremental("".join(text[:cut]), "".join(text[cut:]))
    assert carried["driver_deadlock_frames"] == whole["driver_deadlock_frames"]
    runs_apart = _as("syslog", ["Call Trace:", *OLD_FRAMES[3:5], "Call Trace:", OLD_FRAMES[5]])
    assert _incremental(runs_apart, "")["driver_deadlock"] is False


@pytest.mark.parametrize("cut", [2, 4, 7])
def test_an_incremental_read_keeps_the_dump_header_before_its_frames(cut: int) -> None:
    """The driver's dump_stack cut between reads: its task line is carried, so the frames after it in the next
    read are not taken for a headerless stack."""
    lines = ["usb 1-1: new high-speed USB device number 2 using xhci_hcd", *DRIVER_DUMP[:3], *DRIVER_DUMP[6:]]
    text = _as("dmesg", lines).splitlines(keepends=True)
    assert _incremental("".join(text[:cut]), "".join(text[cut:]))["driver_deadlock"] is False
