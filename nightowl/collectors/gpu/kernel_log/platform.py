"""The platform a kernel log's own boot lines name: a hypervisor, or a cloud's DMI system vendor.

A reboot on bare metal is a power cycle; on a cloud VM it is "stop and start the instance" (docs/reference.md
#tenancy). When nvidia-smi cannot answer (a GPU off the bus), the kernel log is what is left to tell the two
apart: ``Hypervisor detected: KVM`` and ``DMI: Amazon EC2 p5.48xlarge/...`` are printed at every boot. Only a
line whose message starts with them counts (patterns.message_prefix: a timestamp, host and ``kernel:``), never
text inside another message (a process name, a file name). The names are data: knowledge/virtual_platforms.csv.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator

from nightowl import knowledge
from nightowl.collectors.gpu.kernel_log.patterns import lines_holding, message_prefix

_MARKS = (("Hypervisor detected: ", "hypervisor"), ("DMI: ", "dmi"))


@functools.cache
def _rows() -> tuple[tuple[str, str, str], ...]:
    rows = knowledge.read_csv("virtual_platforms.csv", required=("line", "text", "platform", "source"))
    return tuple((row["line"], row["text"].lower(), row["platform"]) for row in rows)


def virtual_platform(text: str) -> str | None:
    """The platform the first boot line of a known hypervisor or cloud names; None for none (bare metal, or a
    log that no longer holds its boot lines: not known, never taken as bare metal by itself)."""
    for line, said in _boot_lines(text):
        for kind, known, platform in _rows():
            if kind == line and (said == known if line == "hypervisor" else known in said):
                return platform
    return None


def _boot_lines(text: str) -> Iterator[tuple[str, str]]:
    """(which line, its text lower-cased) for each message that starts with a mark."""
    for mark, line in _MARKS:
        for start, position, end in lines_holding(text, mark):
            if message_prefix(text[start:position]):  # the kernel's own line, not another message's words
                yield line, text[position + len(mark) : min(end, position + 300)].strip().lower()
