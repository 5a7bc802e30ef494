"""Fixes the eighth field set called for in the kernel log (issue "Never cry wolf"): insmod failing to insert an
nvidia module (a driver container's log, BugRoger/coreos-nvidia-driver#4) was read as a healthy log, and the
lines the newer readers judge (insmod, nvidia-modeset ERROR) must survive an incremental read's carrying."""

from __future__ import annotations

import pytest

from nightowl.collectors.gpu.kernel_log.cursor import KERNEL_LOG_CURSOR
from tests.helpers import facts_of

INSMOD = (
    "insmod: ERROR: could not insert module /root/opt/nvidia/390.77/1967.3.0/lib64/modules/4.14.88-coreos/kernel/"
    "drivers/video/nvidia/nvidia.ko: {why}"
)
MODESET = "nvidia-modeset: ERROR: GPU:0: Failed to query display engine channel state: 0x0000ca7e:0:0:0x00000062"
QUIET = "".join(f"[{n:6d}.000000] systemd[1]: Started session {n}.\n" for n in range(50))


@pytest.mark.parametrize("why", ["Unknown symbol in module", "Invalid module format", "Key was rejected by service"])
@pytest.mark.parametrize("prefix", ["", "[INFO    2019-01-20 06:04:33 UTC] Loading Driver\n"])
def test_insmod_failing_on_an_nvidia_module_is_a_driver_load_failure(why: str, prefix: str) -> None:
    facts = facts_of("kernel-log", prefix + INSMOD.format(why=why) + "\n")
    assert [f["id"] for f in facts["driver_load_failures"]] == ["insmod_insert_failed"]


def test_insmod_failing_on_another_module_is_not_the_driver() -> None:
    line = "insmod: ERROR: could not insert module /lib/modules/6.1/kernel/drivers/net/e1000e.ko: File exists\n"
    assert facts_of("kernel-log", line)["driver_load_failures"] == []


@pytest.mark.parametrize("line", [INSMOD.format(why="Unknown symbol in module"), MODESET])
def test_an_incremental_read_carries_the_lines_the_new_readers_judge(line: str) -> None:
    kept = KERNEL_LOG_CURSOR.keep(QUIET + f"[  99.000000] {line}\n" + QUIET)
    assert line in kept
    assert facts_of("kernel-log", kept + QUIET) | {"coverage": None, "lines_read": None} == facts_of(
        "kernel-log", QUIET + f"[  99.000000] {line}\n" + QUIET + QUIET
    ) | {"coverage": None, "lines_read": None}
