"""Processes the kernel saw crash inside NVIDIA's user-space GPU stack (knowledge/gpu_libraries.csv).

The kernel logs a user process's segfault as ``<comm>[<pid>]: segfault at <addr> ip <ip> sp <sp> error <n> in
<file>[<base>+<size>]`` (arch/x86/mm/fault.c, show_signal_msg; newer kernels add "likely on CPU ..."). A crash
inside libnccl or libcuda is the application's, its library's or a version mismatch's, not the node's hardware:
restart the application, and look at the versions if it recurs. Only a line whose message starts with the
process name counts (patterns.message_prefix: a timestamp, host and ``kernel:`` before it); the file name is the
mapped object's.
"""

from __future__ import annotations

import functools
import re

from nightowl import knowledge
from nightowl.collectors.gpu.kernel_log.patterns import lines_holding, message_prefix

MAX_CRASHES = 20  # distinct (process, library) pairs kept; a crash loop repeats the same one
_SEGFAULT = re.compile(
    r"(?<!\S)(?P<comm>[^\s\[\]]{1,64})\[(?P<pid>\d{1,10})\]: segfault at \S+ ip \S+ sp \S+ error \d+"
    r"(?: likely on CPU \d+ \(core \d+, socket \d+\))? in (?P<file>[^\s\[]{1,200})\["
)


@functools.cache
def _prefixes() -> tuple[str, ...]:
    rows = knowledge.read_csv("gpu_libraries.csv", required=("prefix", "library", "source"))
    return tuple(row["prefix"] for row in rows)


def gpu_library_crashes(text: str) -> list[dict[str, object]]:
    """``{process, pid, library, count, line}`` for each process that segfaulted in a GPU library, in log order."""
    found: dict[tuple[str, str], dict[str, object]] = {}
    for start, _position, end in lines_holding(text, "segfault at "):
        match = _SEGFAULT.search(text, start, end)
        # the kernel's own line: only a timestamp, host and "kernel:" (patterns.message_prefix) before the process
        if match is None or not message_prefix(text[start : match.start()]):
            continue
        if not match["file"].startswith(_prefixes()):
            continue
        key = (match["comm"], match["file"])
        if key in found:
            found[key]["count"] = int(str(found[key]["count"])) + 1
        elif len(found) < MAX_CRASHES:
            found[key] = {"process": match["comm"], "pid": int(match["pid"]), "library": match["file"], "count": 1,
                          "line": text[start:end].strip()[:300]}  # fmt: skip
    return list(found.values())
