"""Stacks inside the NVIDIA driver, with or without the report header that names the task.

The kernel prints a task's frames only when it reports that task: the hung-task detector and sysrq-w
(``INFO: task X:PID blocked for more than N seconds``, ``task:X state:D``: ``driver_locks.DriverLockScan``
opens on them), a soft lockup, a WARNING, BUG or oops (``CPU: N PID: P Comm: X``, ``splats.py``), a sysrq-t
dump of every task (``task:X state:S``), or the driver's own ``os_dump_stack`` (``CPU: ... Comm:`` again). A
paste often keeps only the frames: several consecutive frames in an nvidia module (``nvidia_ioctl+0x5c/0x90
[nvidia]``, the old ``[<ffffffffc074c130>] ? nvidia_unlocked_ioctl+0x20/0x30 [nvidia]``) with no header
line before them in the window a stack spans.

Such a run is a task stuck in the driver, as the header's case is:

- under an open D-state header (a hung task, sysrq-w): the task is blocked inside the driver, lock frame or not
  (gpud PR #117, the hung_task row of kernel_patterns.csv: "if tasks are stuck in the nvidia driver, drain and
  reboot the node");
- with no header at all: the kernel printed it for a stuck or crashed task whose report line was not kept.

A run after any other header is left to its reader: a WARNING/BUG/oops or the driver's own dump_stack has a
``CPU: ... Comm:`` line (splats.py reads the driver's reports; a dump beside NVRM lines is the driver's own
diagnostic), a sysrq-t task line names a task that may be sleeping normally. ``nvidia`` listed among
``Modules linked in:`` is no frame.
"""

from __future__ import annotations

import re
from typing import Any

MIN_RUN = 3  # consecutive driver frames: one frame alone can be a stray address in a register dump
MAX_RUNS = 64
WINDOW = 80  # lines a stack spans after its header (driver_locks.MAX_STACK_LINES)
MAX_FRAMES_NAMED = 4

# A frame in an nvidia module: modern (`` ? nvidia_ioctl+0x5c/0x90 [nvidia]``) and old (``[<addr>] ? func+...``)
# forms; a name may carry a compiler suffix (``nvidia_ioctl.isra.22``), the module its build ID (5.18+,
# CONFIG_STACKTRACE_BUILD_ID: ``[nvidia 3f0c...]``, lib/vsprintf.c).
_FRAME = re.compile(
    r"(?:^|[\s>?])(?P<frame>[A-Za-z_][\w.]*)\+0x[0-9a-f]+/0x[0-9a-f]+ "
    r"\[(?:nvidia|nvidia_uvm|nvidia_modeset|nvidia_drm|nvidia_peermem)(?: [0-9a-f]+)?\]"
)
# The task lines of the reports whose stacks other readers judge (see the module docstring).
_OTHER_HEADER = re.compile(r"\bCPU: \d+ (?:UID: \d+ )?PID: \d+ Comm: |\bPid: \d+, comm: |\btask:\S.*?\bstate:")
# The RM's obfuscated functions (``_nv000731rm``) say nothing to a reader; the named ones are listed first.
_OBFUSCATED = re.compile(r"_nv\d+rm")


def may_matter(line: str) -> bool:
    """Whether the parse loop should feed this line (a driver frame or a report's task line)."""
    return "[nvidia" in line or "omm: " in line or "task:" in line


class DriverStackScan:
    """Fed the lines ``may_matter`` picks, each with its line number and the D-state task open around it
    (``DriverLockScan.current`` while its stack is being read); ``finish`` lists the tasks stuck in the driver."""

    def __init__(self) -> None:
        self.tasks: list[dict[str, Any]] = []
        self.run: list[str] = []
        self.run_owner: dict[str, Any] | None = None
        self.run_headerless = False
        self.last_line = -1
        self.last_header = -(10**9)

    def feed(self, line: str, number: int, d_state_task: dict[str, Any] | None, in_report: bool) -> None:
        """``in_report``: a WARNING/BUG/oops report (splats.py) is open around the line."""
        if in_report:
            self.last_header = number
        match = _FRAME.search(line) if "[nvidia" in line else None
        if match is None:
            if ("omm: " in line or "task:" in line) and _OTHER_HEADER.search(line):
                self._close()
                self.last_header = number
            return
        if not self.run or number != self.last_line + 1:
            self._close()
            self.run_owner = d_state_task
            self.run_headerless = d_state_task is None and number - self.last_header > WINDOW
        self.run.append(match.group("frame"))
        self.last_line = number

    def _close(self) -> None:
        run, owner, headerless = self.run, self.run_owner, self.run_headerless
        self.run, self.run_owner = [], None
        if len(run) < MIN_RUN or len(self.tasks) >= MAX_RUNS or "os_dump_stack" in run:
            return
        # ``seen``: what the log shows of the task (DriverLockScan's own tasks wait on a lock frame: "lock")
        if owner is not None:
            self.tasks.append(
                {"task": owner.get("task"), "pid": owner.get("pid"), "frames": _named(run), "seen": "blocked"}
            )
        elif headerless:
            self.tasks.append({"task": None, "pid": None, "frames": _named(run), "seen": "frames"})

    def finish(self, lock_waits: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """``lock_waits`` (DriverLockScan's tasks) with the stuck tasks this scan adds, one per task."""
        self._close()
        found = list(lock_waits)
        pids = {task.get("pid") for task in found}
        seen_headerless: set[tuple[str, ...]] = set()
        for task in self.tasks:
            if task["pid"] is not None:
                if task["pid"] in pids:
                    continue
                pids.add(task["pid"])
            else:
                key = tuple(task["frames"])
                if key in seen_headerless:  # the same stack repeated (a hung task is reported every 120 s)
                    continue
                seen_headerless.add(key)
            found.append(task)
        return found


def _named(run: list[str]) -> list[str]:
    """The run's distinct frames (innermost first), readable names before the RM's obfuscated ones."""
    names = list(dict.fromkeys(run))
    readable = [name for name in names if not _OBFUSCATED.fullmatch(name)]
    return (readable or names)[:MAX_FRAMES_NAMED]
