"""Kernel WARNING / BUG / Oops reports ("splats") that belong to the NVIDIA driver: a driver-load fault.

The kernel reports a WARN(), a BUG() or an oops as a block of lines (``------------[ cut here ]------------``,
the opener of ``nightowl/knowledge/kernel_splats.csv``, ``Modules linked in:``, ``CPU: N PID: P Comm: task``,
the registers and the call trace, ``---[ end trace ... ]---``). The block is the driver's when

- a frame of its stack, its RIP or its opener is in an nvidia module (``func+0x12/0x40 [nvidia]``), or
- the module list marks an nvidia module as being loaded (``nvidia(POE+)``: the kernel's ``+``, module.c's
  module_flags, for a module still coming up), or
- the task is a module loader (``Comm: modprobe``, ``insmod``, ``systemd-modules-load``, udev's worker, which
  loads modules in-process) and the last module the log shows being loaded before it is an nvidia one
  (``nvidia: loading out-of-tree module taints kernel``, a ``modprobe nvidia`` command line).

Only listing nvidia among ``Modules linked in:`` says nothing (every splat on a GPU host lists it). The parser
reads these alongside the module-load failures (``parser.driver_load_failures``): the driver did not load
cleanly, so its GPUs cannot be trusted, whatever their health.
"""

from __future__ import annotations

import functools
import re
from typing import Any

from nightowl import knowledge

MAX_REPORT_LINES = 80  # a splat is 20-60 lines; past this the report has ended
MAX_REPORTS = 16

# Every opener of kernel_splats.csv holds one of these, and so does the "cut here" line before a WARNING or a
# kernel BUG (the parse loop tests them on every line while no report is open).
HINTS = ("cut here", "BUG", "Oops", "protection fault", "WARNING")
# The task line: "CPU: 3 PID: 1958 Comm: modprobe" (6.13+: "CPU: 3 UID: 0 PID: ..."), 2.6's "Pid: 1958, comm: modprobe".
_COMM = re.compile(r"(?:\bCPU: \d+ (?:UID: \d+ )?PID: \d+ Comm|\bPid: \d+, comm): (?P<comm>\S+)")
_NVIDIA_FRAME = re.compile(r"\w\+0x[0-9a-f]+/0x[0-9a-f]+ \[nvidia\w*\]")
_NVIDIA_COMING = re.compile(r"(?<![\w-])nvidia[\w-]*\([A-Z]*\+\)")
# Task names of the programs that insert modules: kmod (modprobe, insmod), systemd-modules-load, and udev, whose
# kmod builtin loads a device's module inside its worker (systemd src/udev/udev-builtin-kmod.c).
_LOADERS = frozenset(("modprobe", "insmod", "systemd-modules-load", "systemd-udevd", "(udev-worker)", "udevd"))
# A line naming the module being loaded: the kernel's taint notes while loading it (kernel/module/main.c,
# signing.c) or an echoed modprobe/insmod command line.
_MODULE_LOADING = re.compile(
    r"(?P<tainted>[\w-]+): (?:loading out-of-tree module|module license '[^']*' taints|module verification failed)"
    r"|(?:^|[\s#$>])(?:modprobe|insmod)\s+(?:-\S+\s+)*(?P<command>[\w-]+)(?:\.ko)?\s*$"
)


@functools.cache
def openers() -> tuple[tuple[str, re.Pattern[str]], ...]:
    """The report openers of nightowl/knowledge/kernel_splats.csv (id, pattern)."""
    rows = knowledge.read_csv("kernel_splats.csv", required=("id", "pattern", "meaning", "source"))
    return tuple((row["id"], knowledge.compile_pattern(row["pattern"], "kernel_splats.csv")) for row in rows)


def _opener(line: str) -> tuple[str, str] | None:
    for row_id, pattern in openers():
        match = pattern.search(line)
        if match is not None:
            return row_id, line[match.start() :].strip()[:300]
    return None


class SplatScan:
    """Fed each line that may open a report (``HINTS``) and, while one is open, every line after it."""

    def __init__(self) -> None:
        self.reports: list[dict[str, Any]] = []
        self.host: list[dict[str, Any]] = []  # faults (not WARNINGs) whose task and frames are not the driver's
        self.current: dict[str, Any] | None = None
        self.lines_left = 0

    def start(self, line: str, position: int) -> bool:
        """A line holding one of ``HINTS`` while no report is open; ``position``: how many module-load lines the
        log showed before it. Whether a report is open after it."""
        if "cut here" not in line and _opener(line) is None:
            return False
        self._close()
        self.current = {"opener": None, "id": None, "comm": None, "nvidia": False, "position": position}
        self.lines_left = MAX_REPORT_LINES
        return self.feed(line)

    def feed(self, line: str) -> bool:
        """One line of the open report; False once it has ended."""
        current = self.current
        if current is None:
            return False
        self.lines_left -= 1
        if self.lines_left <= 0 or "end trace" in line:
            self._close()
            return False
        if "cut here" in line and current["opener"] is not None:  # the next report
            self._close()
            return self.start(line, current["position"])
        if current["opener"] is None:
            found = _opener(line)
            if found is not None:
                current["id"], current["opener"] = found
        comm = _COMM.search(line) if "omm: " in line else None
        if comm is not None and current["comm"] is None:
            current["comm"] = comm.group("comm")
        if "[nvidia" in line and _NVIDIA_FRAME.search(line):
            current["nvidia"] = True
        if "nvidia" in line and "+)" in line and _NVIDIA_COMING.search(line):
            current["nvidia"] = True
        return True

    def _close(self) -> None:
        """Keep the report if it may be the driver's (``finish`` decides a loader's from the module-load lines)."""
        current, self.current = self.current, None
        if current is None or current["opener"] is None or len(self.reports) >= MAX_REPORTS:
            return
        if current["nvidia"] or current["comm"] in _LOADERS:
            self.reports.append(current)
        elif current["id"] != "warning":
            self.host.append(current)

    def finish(self, load_lines: list[str]) -> list[dict[str, str]]:
        """The reports that are the NVIDIA driver's, as driver-load failures ``{id, line}`` (``load_lines``: the
        module-load lines of the log in order, which say what a loader task was loading)."""
        self._close()
        found: dict[tuple[str, str], dict[str, str]] = {}  # one per report text: a splat repeats at each load
        for report in self.reports:
            if report["nvidia"] or _last_module(load_lines[: report["position"]]).startswith("nvidia"):
                failure = {"id": f"kernel_{report['id']}_in_nvidia_driver", "line": report["opener"]}
                found.setdefault((failure["id"], failure["line"]), failure)
        return list(found.values())


    def host_faults(self, load_lines: list[str]) -> list[dict[str, str]]:
        """The kernel's own faults (BUG, Oops, bad access, general protection fault; not a WARNING, which the kernel
        survives) in reports that are not the driver's: ``{id, line}``, one per report text (call after ``finish``)."""
        found: dict[str, dict[str, str]] = {}
        for report in self.host + self.reports:
            if report["id"] == "warning" or report["nvidia"]:
                continue
            if report in self.reports and _last_module(load_lines[: report["position"]]).startswith("nvidia"):
                continue
            found.setdefault(report["opener"], {"id": f"kernel_{report['id']}", "line": report["opener"]})
        return list(found.values())


def _last_module(lines: list[str]) -> str:
    """The module the last of ``lines`` that names one was loading ("" when none does)."""
    for line in reversed(lines):
        match = _MODULE_LOADING.search(line)
        if match is not None:
            return match.group("tainted") or match.group("command") or ""
    return ""
