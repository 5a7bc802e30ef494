"""`kernel-log-boots`: the kernel log of earlier boots, so one run sees "Xid 79 on this GPU before the reboot".

Needs no history store: the systemd journal keeps earlier boots (when it is persistent). One command,
read-only: ``journalctl --list-boots``, then ``journalctl -k -b -N`` for N = 1 .. ``previous_boots``
(runbook parameter, default 2, at most 10), each boot's lines after a marker line. Recorded-host layout
(``kernel-log-boots.out``)::

    IDX BOOT ID                          FIRST ENTRY                  LAST ENTRY
     -1 8d3c...                          Thu 2024-04-04 18:03:50 UTC  Fri 2024-04-05 21:40:02 UTC
      0 1f0e...                          Fri 2024-04-05 21:45:10 UTC  Fri 2024-04-05 23:10:00 UTC
    -- nightowl previous boot -1 --
    2024-04-05T21:29:39+0000 gpu-17 kernel: NVRM: Xid (PCI:0000:a1:00): 79, ...

Older journalctl prints the list without the header and with an em dash between the two times; both
are read. Each boot's lines go through the ``kernel-log`` parser unchanged.
"""

from __future__ import annotations

import re
from bisect import bisect_right
from itertools import accumulate
from typing import Any

from nightowl.collectors.base import Collector, registered

KIND = "kernel-log-boots"
MAX_BOOTS = 10
MARKER = "-- nightowl previous boot "
# $1 is the parameter previous_boots: a non-number makes `[` fail, so no boot is read (never a command).
SCRIPT = (
    "journalctl --list-boots --no-pager || exit $?; n=1; "
    f'while [ "$n" -le "$1" ] && [ "$n" -le {MAX_BOOTS} ]; do '
    f'echo "{MARKER}-$n --"; journalctl -k -b "-$n" --no-pager -o short-iso; n=$((n+1)); done'
)

_BOOT_ROW = re.compile(r"^\s*(-?\d+)\s+([0-9a-f]{32})\s*(.*)$")
_ENTRY_TIME = re.compile(r"\w{3} \d{4}-\d\d-\d\d \d\d:\d\d:\d\d(?: [A-Z][A-Za-z0-9+-]*)?")
_MARKER_LINE = re.compile(r"^-- nightowl previous boot -(\d+) --$")


def parse(text: str) -> dict[str, Any]:
    from nightowl.collectors.base import to_jsonable
    from nightowl.collectors.gpu.kernel_log import parse_lines

    warnings: list[str] = []
    boots: dict[int, dict[str, Any]] = {}
    lines = text.splitlines()
    listing, sections = _sections(lines)
    for line in lines[:listing]:
        row = _BOOT_ROW.match(line)
        if row:
            times = _ENTRY_TIME.findall(row.group(3))
            boots[int(row.group(1))] = {
                "offset": int(row.group(1)),
                "boot_id": row.group(2),
                "first_entry": times[0] if times else None,
                "last_entry": times[1] if len(times) > 1 else None,
            }
        elif line.strip() and not line.lstrip().startswith("IDX"):
            warnings.append(f"not a --list-boots line: {line.strip()[:120]}")
    previous = []
    for offset in sorted(sections, reverse=True):
        start, end = sections[offset]
        log = to_jsonable(parse_lines(candidate_lines(lines[start:end])))
        known = boots.get(offset, {})
        previous.append(
            {
                "offset": offset,
                "boot_id": known.get("boot_id"),
                "first_entry": known.get("first_entry"),
                "last_entry": known.get("last_entry"),
                "events": [e for e in log.get("events") or [] if e.get("kind") != "other_nvrm"],
            }
        )
        warnings += [f"boot {offset}: {w}" for w in log.get("warnings") or []]
    current_boot = boots.get(0, {}).get("boot_id")
    return {
        "kind": KIND,
        "warnings": warnings,
        "boots": [boots[k] for k in sorted(boots)],
        "current_boot_id": current_boot,
        "previous": previous,
    }


def _sections(lines: list[str]) -> tuple[int, dict[int, tuple[int, int]]]:
    """Where the boot list ends (the first marker line), and each earlier boot's lines as (first, end)
    indexes into ``lines``, by boot offset (-1, -2 ...): a section runs from its marker line to the next.
    Keyed in the order the markers first appear; a boot marked twice keeps the lines after its last
    marker. Marker lines are found by one substring test a line, and sections cut by slicing."""
    markers = [
        (index, -int(found.group(1)))
        for index in [index for index, line in enumerate(lines) if MARKER in line]
        if (found := _MARKER_LINE.match(lines[index].strip()))
    ]
    sections: dict[int, tuple[int, int]] = {}
    for number, (index, offset) in enumerate(markers):
        sections[offset] = (index + 1, markers[number + 1][0] if number + 1 < len(markers) else len(lines))
    return (markers[0][0] if markers else len(lines)), sections


def candidate_lines(lines: list[str]) -> list[str]:
    """The lines of one boot's log the kernel-log parser can take events or warnings from, in order.

    An earlier boot's log is read for its events alone, and most of a boot log is lines the parser skips
    unread (``may_hold_message`` false while no message is pending). Kept: every line that may hold a
    message; after it, the lines that may carry on its report (``may_continue_report``) and then one line
    more, which ends it as the whole log would; and the first non-blank line (so a log of skipped lines
    is not "empty input"). Every line dropped is one parse_lines would skip with nothing pending, so the
    events and warnings are those of the whole log (tests/collectors/gpu/test_kernel_log_boots_prefilter.py
    checks them against it); driver-lock stacks and NIC link lines, which no earlier boot's result holds,
    are not read."""
    from nightowl.collectors.gpu.kernel_log import MESSAGE_HINTS, may_continue_report

    # Found in the joined text, at memory speed, not line by line (no hint holds a line break).
    text = "\n".join(lines)
    starts = list(accumulate((len(line) + 1 for line in lines), initial=0))
    found: set[int] = set()
    for hint in MESSAGE_HINTS:
        at = text.find(hint)
        while at >= 0:
            index = bisect_right(starts, at) - 1
            found.add(index)
            at = text.find(hint, starts[index + 1])
    first = next((i for i, line in enumerate(lines) if line.strip()), None)
    if first is not None:
        found.add(first)
    kept: list[str] = []
    free = 0  # the first line not kept yet
    for index in sorted(found):
        if index < free:
            continue
        kept.append(lines[index])
        after = index + 1
        while after < len(lines) and after not in found:
            kept.append(lines[after])
            after += 1
            if not may_continue_report(lines[after - 1]):
                break
        free = after
    return kept


def facts(result: dict[str, Any]) -> dict[str, Any]:
    earlier: dict[str, set[int]] = {}
    fallen: set[str] = set()
    for boot in result.get("previous") or []:
        for event in boot["events"]:
            pci = event.get("pci") or "unknown"
            if event.get("kind") == "xid" and isinstance(event.get("code"), int):
                earlier.setdefault(pci, set()).add(int(event["code"]))
            if event.get("kind") == "fallen_off_bus" or (event.get("kind") == "xid" and event.get("code") == 79):
                fallen.add(pci)
    return {
        **result,
        "reboots_listed": max(0, len(result.get("boots") or []) - 1),
        "previous_boots_read": len(result.get("previous") or []),
        "earlier_xids_by_gpu": {pci: sorted(codes) for pci, codes in sorted(earlier.items())},
        "earlier_fallen_off_bus_gpus": sorted(fallen),
    }


def shows_nothing(text: str) -> bool:
    """No boot listed at all (a volatile journal, a container): nothing was read, never "no earlier Xid"."""
    for line in text.splitlines():  # the list comes first: parse reads boot rows before the first marker only
        if MARKER in line and _MARKER_LINE.match(line.strip()):
            return True
        if _BOOT_ROW.match(line):
            return False
    return True


COLLECTOR = Collector(
    **registered(KIND),
    commands=(
        ("sh", "-c", SCRIPT, KIND, "{previous_boots}"),
        ("sh", "-c", SCRIPT, KIND, "2"),
    ),
    parse=parse,
    facts=facts,
    shows_nothing=shows_nothing,
)
