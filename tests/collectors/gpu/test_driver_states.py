"""Driver states that make every GPU unusable (issue 23.8): a D-state task on a driver lock, the open module
refusing a GPU, the module missing for the running kernel."""

from __future__ import annotations

import pytest

from nightowl.collectors import get_collector
from nightowl.collectors.gpu.driver_locks import lock_frames
from nightowl.collectors.gpu.kernel_log import facts, parse
from tests.helpers import ROOT

HOSTS = ROOT / "fixtures" / "hosts"

FRAME = "[ 3625.1123{n:02d}]  {frame}+0x35/0x50{module}"


def _stack(header: str, frames: list[tuple[str, str]]) -> str:
    lines = [f"[ 3625.112301] {header}", "[ 3625.112305] Call Trace:", "[ 3625.112307]  <TASK>"]
    lines += [FRAME.format(n=n, frame=f, module=m) for n, (f, m) in enumerate(frames)]
    lines.append("[ 3625.112399]  </TASK>")
    return "\n".join(lines) + "\n"


HEADER_514 = "task:python3         state:D stack:0     pid:9001  ppid:1      flags:0x00004002"
HUNG = "INFO: task python3:9001 blocked for more than 122 seconds."


@pytest.mark.parametrize("frame", sorted(lock_frames()))
def test_each_driver_lock_frame_is_a_deadlock(frame: str) -> None:
    text = _stack(
        HEADER_514, [("__schedule", ""), ("schedule", ""), (frame, " [nvidia]"), ("nvidia_ioctl", " [nvidia]")]
    )
    data = facts(parse(text))
    assert data["driver_deadlock"] and data["driver_deadlock_tasks"] == ["python3"]
    assert data["driver_deadlock_frames"] == [frame]


def test_hung_task_header_then_its_514_header_is_one_task() -> None:
    text = f"[ 3625.112300] {HUNG}\n" + _stack(HEADER_514, [("os_acquire_rwlock_write", " [nvidia]")])
    waits = parse(text).driver_lock_waits
    assert [w["pid"] for w in waits] == [9001]


def test_kernel_mutex_from_an_nvidia_module_counts() -> None:
    text = _stack(HEADER_514, [("__mutex_lock", ""), ("mutex_lock", ""), ("uvm_va_space_mm_retain", " [nvidia_uvm]")])
    assert facts(parse(text))["driver_deadlock"]


@pytest.mark.parametrize(
    "frames",
    [
        [("__mutex_lock", ""), ("ext4_file_write_iter", "")],  # a lock, but not the driver's
        [("schedule", ""), ("nvidia_poll", " [nvidia]")],  # the driver, but no lock
        [("io_schedule", ""), ("blk_mq_get_tag", "")],  # a task waiting on disk
    ],
)
def test_d_state_elsewhere_is_not_a_driver_deadlock(frames: list[tuple[str, str]]) -> None:
    assert not facts(parse(_stack(HEADER_514, frames)))["driver_deadlock"]


def test_a_running_task_is_not_read() -> None:
    text = _stack(HEADER_514.replace("state:D", "state:R"), [("os_acquire_rwlock_write", " [nvidia]")])
    assert not facts(parse(text))["driver_deadlock"]


def test_a_later_frame_of_another_stack_is_not_attributed() -> None:
    clean = _stack(HEADER_514, [("io_schedule", "")])
    later = "\n".join(f"[ 3700.{n:06d}] unrelated line {n}" for n in range(100))
    text = clean + later + "\n[ 3800.000001]  os_acquire_rwlock_write+0x35/0x50 [nvidia]\n"
    assert not facts(parse(text))["driver_deadlock"]


OPEN_REFUSED_ONE_LINE = (
    "Dec  1 10:00:00 gpu-3 kernel: NVRM: The NVIDIA GPU 0000:3b:00.0 (PCI ID: 10de:1db1)#012NVRM: installed in this "
    "system is not supported by open#012NVRM: nvidia.ko because it does not include the required GPU#012NVRM: "
    "System Processor (GSP).\nDec  1 10:00:00 gpu-3 kernel: NVRM: The NVIDIA probe routine failed for 1 device(s).\n"
)


def test_open_module_refusal_multi_line_and_rsyslog_flattened() -> None:
    multi = facts(parse((HOSTS / "open-module-refused-volta" / "kernel-log.out").read_text()))
    flat = facts(parse(OPEN_REFUSED_ONE_LINE))
    for data in (multi, flat):
        assert data["open_module_refused_gpus"] == ["0000:3b:00"] and data["open_module_probe_failed"]


@pytest.mark.parametrize(
    "line",
    [
        "modprobe: FATAL: Module nvidia not found in directory /lib/modules/6.8.0-49-generic",
        "Dec  1 10:00:00 gpu-3 systemd-modules-load[412]: Failed to find module 'nvidia'",
    ],
)
def test_module_missing_lines(line: str) -> None:
    assert facts(parse(line + "\n"))["driver_module_missing"]
    assert not facts(parse("modprobe: FATAL: Module nouveau not found\n"))["driver_module_missing"]


def test_nvidia_smi_says_the_driver_is_not_loaded() -> None:
    collector = get_collector("nvidia-smi")
    for host in ("driver-module-missing-kernel-upgrade", "driver-module-missing-modprobe"):
        data = collector.facts(collector.parse((HOSTS / host / "nvidia-smi.out").read_text()))
        assert data["driver_not_loaded"] and data["driver_not_loaded_messages"]
    healthy = (ROOT / "fixtures/corpus/gpu/nvsmi-unable-device-handle-unknown-error.txt").read_text()
    assert not collector.facts(collector.parse(healthy))["driver_not_loaded"]
