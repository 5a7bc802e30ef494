"""Tasks stuck in D state on a lock inside the NVIDIA driver, read from the stacks the kernel prints.

The hung-task detector (``INFO: task X:PID blocked for more than N seconds``, kernel/hung_task.c) and
``echo w > /proc/sysrq-trigger`` (show-blocked-tasks) both print a task header (``task:X state:D stack:0
pid:PID ...`` since Linux 5.14, sched_show_task in kernel/sched/core.c) and its call trace. A task whose
trace waits on one of the driver's own locks (nightowl/knowledge/driver_lock_frames.csv, each frame with
the open-gpu-kernel-modules file that defines it), or on a kernel mutex/rwsem from a frame of an nvidia
module (``[nvidia]``, ``[nvidia_uvm]``, ...), is stuck in the driver: every later CUDA call and
nvidia-smi queue behind it, and only a reboot frees it. The header alone is enough: no "blocked for more
than" line is needed (a sysrq-w dump has none).
"""

from __future__ import annotations

import functools
import re
from typing import Any

from nightowl import knowledge

MAX_STACK_LINES = 80  # a trace is 20-40 frames; past this the header's stack has ended
MAX_TASKS = 64

_HUNG = re.compile(r"INFO: task (?P<name>.+?):(?P<pid>\d+) blocked for more than")
_HEADER = re.compile(r"task:(?P<name>\S.*?)\s+state:D\b.*?\bpid:\s*(?P<pid>\d+)")
# The kernel's own sleeping-lock primitives, counted only next to a frame of an nvidia module.
_KERNEL_LOCK = re.compile(r"\b(?:__)?(?:mutex_lock\w*|down_read\w*|down_write\w*|rwsem_down_\w+|down(?:_\w+)?)\+0x")
_NVIDIA_FRAME = re.compile(
    r"\b(?P<frame>\w+)\+0x[0-9a-f]+/0x[0-9a-f]+ \[(?:nvidia|nvidia_uvm|nvidia_modeset|nvidia_drm)\]"
)
_FRAME = re.compile(r"\b(?P<frame>[A-Za-z_]\w*)\+0x[0-9a-f]+/0x[0-9a-f]+")


@functools.cache
def lock_frames() -> frozenset[str]:
    """The driver's lock functions (nightowl/knowledge/driver_lock_frames.csv)."""
    return frozenset(row["frame"] for row in knowledge.read_csv("driver_lock_frames.csv", required=("frame", "source")))


class DriverLockScan:
    """Fed the lines after each D-state header; ``finish`` lists the tasks waiting on a driver lock."""

    def __init__(self) -> None:
        self.tasks: list[dict[str, Any]] = []
        self.current: dict[str, Any] | None = None
        self.lines_left = 0

    def start(self, line: str) -> bool:
        """A header line (hung-task report or ``task:... state:D``): whether a stack follows."""
        match = _HEADER.search(line) or _HUNG.search(line)
        if match is None:
            return self.current is not None
        name, pid = match.group("name"), int(match.group("pid"))
        if self.current is not None and self.current["pid"] == pid:
            return True  # the hung-task line, then the same task's "task:... state:D" header
        self._close()
        self.current = {"task": name, "pid": pid, "frames": [], "kernel_lock": False, "nvidia_frame": False}
        self.lines_left = MAX_STACK_LINES
        return True

    def feed(self, line: str) -> bool:
        """One line of the open stack; False once it has ended."""
        current = self.current
        if current is None:
            return False
        self.lines_left -= 1
        if self.lines_left <= 0 or "</TASK>" in line:
            self._close()
            return False
        for match in _FRAME.finditer(line):
            if match.group("frame") in lock_frames():
                current["frames"].append(match.group("frame"))
        if _NVIDIA_FRAME.search(line):
            current["nvidia_frame"] = True
        if _KERNEL_LOCK.search(line):
            current["kernel_lock"] = True
        return True

    def _close(self) -> None:
        current, self.current = self.current, None
        if current is None or len(self.tasks) >= MAX_TASKS:
            return
        frames = list(dict.fromkeys(current["frames"]))
        if not frames and current["kernel_lock"] and current["nvidia_frame"]:
            frames = ["kernel lock taken in an nvidia module"]
        if frames:
            self.tasks.append({"task": current["task"], "pid": current["pid"], "frames": frames})

    def finish(self) -> list[dict[str, Any]]:
        self._close()
        return self.tasks
