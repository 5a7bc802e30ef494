"""``dev-shm``: size and free space of ``/dev/shm``, read-only.

Why: NCCL's SHM transport and the engines' IPC put their buffers in ``/dev/shm``; a container's
default 64 MiB shows up later as "Bus error" or NCCL shared-memory failures, never as a clear
start-up error.

``df`` output is read in any of the forms operators paste: ``df -B1 --output=size,avail`` (what
the collector runs), plain ``df -k`` / ``df -P`` and ``df -h`` (sizes such as ``64M``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from nightowl.collectors.base import Collector, registered, to_jsonable

SHM_KIND = "dev-shm"
GIB = 2**30

# Header word of the size column -> bytes per unit (GNU coreutils df: "1B-blocks" with -B1,
# "1K-blocks" by default, "1024-blocks" with -P, "Size" with -h where each value carries a suffix).
BLOCK_HEADERS: dict[str, int] = {"1b-blocks": 1, "1k-blocks": 1024, "1024-blocks": 1024, "512-blocks": 512}
# Suffixes of df -h (powers of 1024) and df -H (powers of 1000).
SUFFIX_EXPONENT = {"": 0, "K": 1, "M": 2, "G": 3, "T": 4, "P": 5}
_HUMAN = re.compile(r"^(?P<number>\d+(?:[.,]\d+)?)(?P<suffix>[KMGTP]?)(?P<si>i?B?)$", re.IGNORECASE | re.ASCII)


@dataclass(frozen=True)
class ShmSize:
    kind: str = SHM_KIND
    size_bytes: int | None = None
    avail_bytes: int | None = None
    mounted_on: str | None = None
    warnings: tuple[str, ...] = ()


def _human_bytes(text: str, unit: int | None) -> int | None:
    """A df cell -> bytes: a plain count of ``unit``-byte blocks, or a size with a suffix (df -h)."""
    if unit is not None and text.isascii() and text.isdigit():
        return int(text) * unit
    match = _HUMAN.match(text)
    if not match:
        return None
    number = float(match.group("number").replace(",", "."))
    suffix = match.group("suffix").upper()
    if unit is not None and not suffix:
        return int(number * unit)
    return int(number * 1024 ** SUFFIX_EXPONENT[suffix])


def _columns(header: str) -> tuple[int | None, int | None, int | None, int | None]:
    """Positions of (size, avail, mounted-on) columns and the block unit, from df's header."""
    words = header.lower().replace("mounted on", "mounted_on").split()
    size_at = avail_at = mount_at = unit = None
    for position, word in enumerate(words):
        if word in BLOCK_HEADERS or word == "size":
            size_at, unit = position, BLOCK_HEADERS.get(word)
        elif word in ("avail", "available"):
            avail_at = position
        elif word == "mounted_on":
            mount_at = position
    return size_at, avail_at, mount_at, unit


def parse_shm(text: str) -> ShmSize:
    """``df`` output for /dev/shm -> its size and free bytes (null when the output does not say)."""
    lines = [line for line in text.splitlines() if line.strip() and not line.lstrip().startswith("$")]
    header_index = next((i for i, line in enumerate(lines) if _columns(line)[0] is not None), None)
    if header_index is None:
        return ShmSize(warnings=("no df header line (1B-blocks / 1K-blocks / Size) found",) if text.strip() else ())
    size_at, avail_at, mount_at, unit = _columns(lines[header_index])
    rows = [line.split() for line in lines[header_index + 1 :]]
    rows = [row for row in rows if mount_at is None or len(row) > mount_at]
    if not rows:
        return ShmSize(warnings=("df printed a header but no row",))
    # df prints one row per path given; prefer the /dev/shm row when several are shown
    row = next((r for r in rows if mount_at is not None and r[mount_at] == "/dev/shm"), rows[0])
    if mount_at is None and len(row) != len(lines[header_index].split()):
        # --output=size,avail rows have exactly the header's columns
        return ShmSize(warnings=(f"unexpected df row: {' '.join(row)}",))
    size = _human_bytes(row[size_at], unit) if size_at is not None and size_at < len(row) else None
    avail = _human_bytes(row[avail_at], unit) if avail_at is not None and avail_at < len(row) else None
    warnings = () if size is not None else (f"could not read a size from: {' '.join(row)}",)
    return ShmSize(
        size_bytes=size,
        avail_bytes=avail,
        mounted_on=row[mount_at] if mount_at is not None else None,
        warnings=warnings,
    )


def shm_facts(result: ShmSize) -> dict[str, Any]:
    """Contract JSON plus ``size_gib`` and ``avail_gib`` (what runbook parameters are written in)."""
    data: dict[str, Any] = to_jsonable(result)
    data["size_gib"] = round(result.size_bytes / GIB, 3) if result.size_bytes is not None else None
    data["avail_gib"] = round(result.avail_bytes / GIB, 3) if result.avail_bytes is not None else None
    return data


COLLECTOR = Collector(
    **registered(SHM_KIND),
    commands=(("df", "-B1", "--output=size,avail", "--", "/dev/shm"), ("df", "-k", "--", "/dev/shm")),
    parse=parse_shm,
    facts=shm_facts,
)
