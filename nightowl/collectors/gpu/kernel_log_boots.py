"""`kernel-log-boots`: the kernel log of earlier boots, so one run sees "Xid 79 on this GPU before the reboot".

Needs no history store: the systemd journal keeps earlier boots (when it is persistent). One command,
read-only: ``journalctl --list-boots``, then ``journalctl -k -b -N`` for N = 1 .. ``previous_boots``
(runbook parameter, default 2, at most 10), each boot's lines after a marker line, cut on the node by
``awk`` to the lines its events can come from (``NODE_FILTER``). Recorded-host layout
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
from typing import Any

from nightowl.collectors.base import Collector, registered
from nightowl.collectors.gpu.kernel_log_boots_cursor import KernelLogBootsCursor, Listing
from nightowl.collectors.lines import newline_joined

KIND = "kernel-log-boots"
MAX_BOOTS = 10
MARKER = "-- nightowl previous boot "


def _ere_literal(text: str) -> str:
    """``text`` as a POSIX extended regular expression matching it literally."""
    return "".join(f"\\{char}" if char in "\\^$.[]|()*+?{}" else char for char in text)


def _node_words() -> str:
    """The kernel-log parser's EVENT_HINTS and AER-detail hints but "] " (NODE_BRACKET's), as one awk ERE; a
    hint holding another is left to that one. Every line an earlier boot's events or reports need holds one
    of these or matches NODE_BRACKET (tests/collectors/gpu/test_kernel_log_boots_node_filter.py)."""
    from nightowl.collectors.gpu.kernel_log import EVENT_HINTS
    from nightowl.collectors.gpu.kernel_log.patterns import _AER_DETAIL_HINTS

    hints = list(dict.fromkeys(h for h in (*EVENT_HINTS, *_AER_DETAIL_HINTS) if h != "] "))
    kept = [h for h in hints if not any(other != h and other in h for other in hints)]
    return "|".join(_ere_literal(h) for h in kept)


# The lines of an earlier boot's log that can matter, in awk's ERE (C locale): those holding a hint word
# (NODE_WORDS), and the AER detail lines whose only hint is "] " (_AER_DETAIL's bit lines ":   [ 5] RxErr" and
# "device [10de:20b0] error status"), as NODE_BRACKET, a superset of those alternatives without \s, \d or \w,
# whose Unicode meanings no C-locale class has. NODE_BRACKET is tried only on lines holding "] ": most lines
# hold a ":", where it would start (mawk: 20 ms a 0.8 MB boot log, against ~1 ms guarded).
NODE_WORDS = _node_words()
NODE_BRACKET = r":[^[]*\[[^]:]*\] |\] error status"
# What the node sends of an earlier boot's log: its first lines up to one holding a letter or digit (so a boot
# whose lines are all skipped is still "read", never "empty input"), every line that matters, and the line
# after each (it ends a pending report as the whole log would). ``candidate_lines`` of these lines are
# those of the whole log, so the events and warnings are the same
# (tests/collectors/gpu/test_kernel_log_boots_node_filter.py runs this awk against the whole-log reading),
# and a node sends kilobytes for an earlier boot, not the megabytes of its whole kernel log.
NODE_FILTER = (
    f'function matters() {{ return /{NODE_WORDS}/ || (index($0, "] ") && /{NODE_BRACKET}/) }} '
    "!seen { print; seen = /[[:alnum:]]/; after = matters(); next } "
    "matters() { print; after = 1; next } after { print } { after = 0 }"
)
# $1 is the parameter previous_boots: a non-number makes `[` fail, so no boot is read (never a command).
# A node whose awk is missing or cannot run the filter (tried once on one line) sends each log whole.
SCRIPT = (
    "journalctl --list-boots --no-pager || exit $?; "
    f"cut_boot() {{ LC_ALL=C awk '{NODE_FILTER}'; }}; "
    "printf 'x\\n' | cut_boot >/dev/null 2>&1 || cut_boot() { cat; }; n=1; "
    f'while [ "$n" -le "$1" ] && [ "$n" -le {MAX_BOOTS} ]; do '
    f'echo "{MARKER}-$n --"; journalctl -k -b "-$n" --no-pager -o short-iso | cut_boot; n=$((n+1)); done'
)

_BOOT_ROW = re.compile(r"^\s*(-?\d+)\s+([0-9a-f]{32})\s*(.*)$")
_ENTRY_TIME = re.compile(r"\w{3} \d{4}-\d\d-\d\d \d\d:\d\d:\d\d(?: [A-Z][A-Za-z0-9+-]*)?")
_MARKER_LINE = re.compile(r"^-- nightowl previous boot -(\d+) --$")
_NON_BLANK = re.compile(r"\S")  # \s is str.isspace's whitespace, what str.strip() takes off


def parse(text: str) -> dict[str, Any]:
    from nightowl.collectors.base import to_jsonable
    from nightowl.collectors.gpu.kernel_log import parse_lines

    warnings: list[str] = []
    boots: dict[int, dict[str, Any]] = {}
    joined = _joined(text)
    listing, sections = _sections(joined)
    for line in joined[:listing].split("\n") if listing else ():
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
        log = to_jsonable(parse_lines(_candidates(joined[start:end])))
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


def _joined(text: str) -> str:
    """The lines of ``text`` (as ``str.splitlines`` cuts them) joined by ``"\n"``: ``.split("\n")`` gives them
    back. Most outputs break lines at "\n" alone and are used as they are (one trailing "\n" off)."""
    joined = newline_joined(text)
    return joined[:-1] if joined is text and text.endswith("\n") else joined


def _sections(joined: str) -> tuple[int, dict[int, tuple[int, int]]]:
    """Where the boot list ends in ``joined`` (before the first marker line), and each earlier boot's lines
    as (start, end) positions of their joined text, by boot offset (-1, -2 ...): a section runs from its
    marker line to the next. Keyed in the order the markers first appear; a boot marked twice keeps the
    lines after its last marker. Marker lines are found by ``str.find`` in the whole text, not line by line."""
    markers = _marker_lines(joined)
    sections: dict[int, tuple[int, int]] = {}
    for number, (_, end, offset) in enumerate(markers):
        following = markers[number + 1][0] - 1 if number + 1 < len(markers) else len(joined)
        sections[offset] = (end + 1, following)  # empty when the next marker line follows at once
    return (max(0, markers[0][0] - 1) if markers else len(joined)), sections


def _marker_lines(joined: str) -> list[tuple[int, int, int]]:
    """(start, end, boot offset) of each marker line of ``joined``, in order."""
    markers = []
    at = joined.find(MARKER)
    while at >= 0:
        start = joined.rfind("\n", 0, at) + 1
        end = joined.find("\n", at)
        end = len(joined) if end < 0 else end
        found = _MARKER_LINE.match(joined[start:end].strip())
        if found:
            markers.append((start, end, -int(found.group(1))))
        at = joined.find(MARKER, end)
    return markers


def candidate_lines(lines: list[str]) -> list[str]:
    """The lines of one boot's log (as ``str.splitlines`` cuts them) the kernel-log parser can take events
    or warnings from, in order.

    An earlier boot's log is read for its events and warnings alone, and most of a boot log is lines the
    parser skips unread (``may_hold_message`` false while no message is pending) or reads into neither (a
    host record, a PCIe bandwidth note). Kept: every line that may hold a message making an event or a
    warning (``EVENT_HINTS``); after one that may leave a report pending (``may_start_report``, or one that
    follows such a line at once), the lines that may carry on the report (``may_continue_report``) and
    then one line more, which ends it as the whole log would; and the first non-blank line (so a log of
    skipped lines is not "empty input"). Every line dropped is one parse_lines would skip, or read into no
    event or warning, with nothing pending, so the events and warnings are those of the whole log
    (tests/collectors/gpu/test_kernel_log_boots_prefilter.py checks them against it); driver-lock stacks,
    NIC link lines, host records and bandwidth notes, which no earlier boot's result holds, are not read."""
    return _candidates("\n".join(lines))


def _candidates(joined: str) -> list[str]:
    """``candidate_lines`` of the lines ``joined`` by "\n". A line is named by where it ends (its "\n", or
    the end of the text): the hints are found in the whole text, and only the lines kept are cut out."""
    from nightowl.collectors.gpu.kernel_log import EVENT_HINTS, may_continue_report, may_start_report
    from nightowl.collectors.lines import hint_line_ends

    size = len(joined)
    found = set(hint_line_ends(joined, EVENT_HINTS))
    non_blank = _NON_BLANK.search(joined)
    if non_blank is not None:
        first_end = joined.find("\n", non_blank.start())
        found.add(size if first_end < 0 else first_end)
    kept: list[str] = []
    free = 0  # where the first line not kept yet starts
    waiting = False  # whether a report may be pending after the last line kept
    for end in sorted(found):  # the lines after one stop at the next line found: none is passed twice
        start = joined.rfind("\n", 0, end) + 1
        line = joined[start:end]
        kept.append(line)
        waiting = may_start_report(line) or (waiting and start == free)
        while waiting and end < size:  # the lines after it that the report may reach, up to the next line found
            start = end + 1
            next_end = joined.find("\n", start)
            next_end = size if next_end < 0 else next_end
            if next_end in found:
                break  # that line comes next, with the report maybe still pending
            line = joined[start:next_end]
            kept.append(line)
            end = next_end
            waiting = may_continue_report(line)
        free = end + 1
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
    from nightowl.collectors.lines import iter_lines

    for line in iter_lines(text):  # the list comes first: parse reads boot rows before the first marker only
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
    # Earlier boots do not change: read once per boot list where a run keeps positions (issue 46).
    cursor=KernelLogBootsCursor(Listing(KIND, SCRIPT, _BOOT_ROW, _ENTRY_TIME, _MARKER_LINE, MARKER)),
)
