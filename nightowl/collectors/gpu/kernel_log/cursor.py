"""Reading a host's kernel log from where the last read stopped (issue 46; docs/reference.md#incremental-reads).

Two sources keep a position the next read can prove it continues from:

* the journal: ``journalctl -k -b --show-cursor`` prints the cursor of the last entry (``-- cursor: s=..;i=..;
  b=<boot id>;..``, journalctl(1)); the next read starts *at* that entry (``--cursor=``, not ``--after-cursor=``)
  so its first entry must be the one read last: an entry the journal no longer holds (rotated out, vacuumed,
  an unknown cursor) prints another one first, and that gap is never taken as closed;
* the ring (``dmesg``, raw monotonic stamps, util-linux dmesg(1)), through a fixed script that prints the boot
  id (``/proc/sys/kernel/random/boot_id``, proc(5)), the ring's oldest record and the records from the last
  stamp read on: the first record printed must be the last one read (same stamp, same text hash); a ring that
  wrapped or was cleared, or a new boot, breaks that.

Any break means a full read, and the reason is what the bundle says (``carried.json``). What later reads need
of the log so far is ``keep``: every line a kernel-log fact can come from, with the lines around it, so
``parse(keep(A) + B)`` gives the facts ``parse(A + B)`` gives (tests/history/test_cursor_property.py holds it on
random splits of the recorded logs). Parsing never runs anything; this module only builds argvs and reads text.
"""

from __future__ import annotations

import bisect
import hashlib
import itertools
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from nightowl.collectors.gpu.kernel_log.patterns import may_start_report
from nightowl.collectors.gpu.kernel_log.splats import HINTS as SPLAT_HINTS
from nightowl.collectors.gpu.kernel_log.splats import MAX_REPORT_LINES
from nightowl.collectors.normalise import echoed_command

KIND = "kernel-log"
JOURNAL, RING = "journal", "dmesg"

CURSOR_PARAM = "kernel_log_cursor"
STAMP_PARAM = "kernel_log_after"

_JOURNAL = ("journalctl", "-k", "-b", "--no-pager", "-o", "short-iso", "--show-cursor")
JOURNAL_FULL = _JOURNAL
JOURNAL_NEXT = (*_JOURNAL, f"--cursor={{{CURSOR_PARAM}}}")
# The ring from a monotonic stamp on ($1; "0" is the whole ring), behind the boot id and the stamp of the ring's
# first record (its stamp alone: no message a reader of the output could take for an event); awk keeps a
# record's continuation lines (no stamp) with it.
_RING_SCRIPT = (
    'b=$(cat /proc/sys/kernel/random/boot_id) || exit 1; echo "-- nightowl boot $b --"; dmesg | LC_ALL=C awk'
    ' -v t="$1" \'NR == 1 { print "-- nightowl ring start: " substr($0, 1, index($0, "]")) }'
    " match($0, /^\\[ *[0-9]+\\.[0-9]+\\]/) { on = (substr($0, 2, RLENGTH - 2) + 0 >= t + 0) } on { print }'"
)
RING_READ = ("sh", "-c", _RING_SCRIPT, "kernel-log-after", f"{{{STAMP_PARAM}}}")
COMMANDS = (JOURNAL_FULL, JOURNAL_NEXT, RING_READ)  # every shape, for collectors/readonly_commands.yaml

_CURSOR_MARK = "-- cursor: "
_BOOT_MARK, _RING_MARK = "-- nightowl boot ", "-- nightowl ring start: "


@dataclass(frozen=True)
class Piece:
    """What one read gave: the new text to parse after the carried lines, the position to save, and ``gap``
    (why the read does not continue the last one, so a full read must follow) or None."""

    body: str
    state: dict[str, Any] | None
    gap: str | None = None


def _digest(lines: list[str]) -> str:
    return hashlib.sha256("\n".join(lines).encode("utf-8", "surrogateescape")).hexdigest()


def _first_block(lines: list[str]) -> list[str]:
    """The first entry: its line and the indented lines that continue it (journalctl, dmesg print them so)."""
    end = 1
    while end < len(lines) and lines[end][:1].isspace():
        end += 1
    return lines[:end]


def _last_block(lines: list[str]) -> list[str]:
    start = len(lines) - 1
    while start > 0 and lines[start][:1].isspace():
        start -= 1
    return lines[start:]


def _stamp(line: str) -> float | None:
    """A raw dmesg record's monotonic stamp (``[ 1234.567890] ...``), or None."""
    if not line.startswith("["):
        return None
    inside, found, _ = line[1:].partition("]")
    try:
        return float(inside) if found else None
    except ValueError:
        return None


class KernelLogCursor:
    """The kernel log's incremental read: argvs for a saved position, and the reading of what they print."""

    kind = KIND
    shapes = COMMANDS  # every argv template it may run (collectors/readonly_commands.yaml allows each)

    def commands(
        self, state: Mapping[str, Any] | None, params: Mapping[str, Any]
    ) -> list[tuple[tuple[str, ...], dict[str, str]]]:
        """(argv template, its parameters) to try in order: from ``state`` on, or a full read without one."""
        if state is None:
            return [(JOURNAL_FULL, {}), (RING_READ, {STAMP_PARAM: "0"})]
        if state.get("source") == JOURNAL:
            return [(JOURNAL_NEXT, {CURSOR_PARAM: str(state["cursor"])})]
        return [(RING_READ, {STAMP_PARAM: str(state["stamp"])})]

    def read(self, argv: tuple[str, ...], stdout: str, state: Mapping[str, Any] | None) -> Piece:
        """The new part of ``stdout`` and the position after it; a gap when it cannot be proven to follow."""
        lines = stdout.splitlines()
        piece = _read_journal(lines, state) if argv[:1] == ("journalctl",) else _read_ring(lines, state)
        if state is None and piece.state is not None:
            # A full read parses the output as fetched (its cursor or banner lines hold no message): the very
            # text the bundle keeps, so a reader of the bundle's output finds the run's parse of it.
            return Piece(stdout, piece.state)
        return piece

    def keep(self, text: str) -> str:
        """What later reads need of ``text`` (the log so far): see ``keep_lines``."""
        return keep_lines(text)

    def settled(self, carried: str) -> bool:
        """Whether lines after ``carried`` are never kept with it: no report or stack opened near its end reaches
        past it, and it has its first line with text already (not only a shell prompt with its command). The
        engine saves this with the position, so a quiet read is told from its new lines alone."""
        return _has_first_line(carried) and not _window_open(carried)

    def quiet(self, body: str) -> bool:
        """Whether new lines ``body`` hold no line this reader keeps by itself (no HINT)."""
        return _HINT.search(body) is None


def _read_journal(lines: list[str], state: Mapping[str, Any] | None) -> Piece:
    cursor = lines[-1][len(_CURSOR_MARK) :].strip() if lines and lines[-1].startswith(_CURSOR_MARK) else None
    body = lines[:-1] if cursor else lines
    if cursor is None:
        return Piece("\n".join(body), None, "journalctl printed no cursor")
    boot = dict(part.split("=", 1) for part in cursor.split(";") if "=" in part).get("b")
    entries = [line for line in body if not line.startswith("-- ")]  # journalctl's own banners
    new = {"source": JOURNAL, "cursor": cursor, "boot_id": boot, "last": _digest(_last_block(entries or [""]))}
    if state is None:
        return Piece("\n".join(body), new)
    if boot != state.get("boot_id"):
        return Piece("", new, "a new boot (the journal cursor names another boot id)")
    if not entries or _digest(_first_block(entries)) != state.get("last"):
        return Piece("", new, "the journal no longer starts at the entry read last (rotated, vacuumed or unknown)")
    return Piece("\n".join(entries[len(_first_block(entries)) :]), new)


def _read_ring(lines: list[str], state: Mapping[str, Any] | None) -> Piece:
    if len(lines) < 2 or not lines[0].startswith(_BOOT_MARK) or not lines[1].startswith(_RING_MARK):
        return Piece("\n".join(lines), None, "the ring read printed no boot id or no record")
    boot = lines[0][len(_BOOT_MARK) :].rstrip(" -")
    oldest = _stamp(lines[1][len(_RING_MARK) :])
    records = lines[2:]
    last = _last_block(records) if records else []
    new = {"source": RING, "boot_id": boot, "stamp": _last_stamp(records), "last": _digest(last)}
    if state is None:
        return Piece("\n".join(records), new if records else None)
    if boot != state.get("boot_id"):
        return Piece("", new, "a new boot (another boot id)")
    saved = float(state.get("stamp") or 0.0)
    if not records or (_stamp(records[0]) or 0.0) < saved:
        return Piece("", new, "the clock went backwards (no record at or after the last stamp read)")
    if _stamp(records[0]) != saved or _digest(_first_block(records)) != state.get("last"):
        why = "the ring wrapped past" if oldest is not None and oldest > saved else "the ring no longer holds"
        return Piece("", new, f"{why} the record read last")
    return Piece("\n".join(records[len(_first_block(records)) :]), new)


def _last_stamp(records: list[str]) -> str:
    for line in reversed(records):
        if _stamp(line) is not None:
            return line[1:].partition("]")[0].strip()
    return "0"


# --- what later reads need of the log so far ---------------------------------------------------------------
# Every substring a line the parser reads holds: the words of its message anchor (patterns._ANCHOR) and of its
# fast path (parser.parse_lines: "NVRM", "Xid", "PCIe" ...), the D-state stack headers (driver_locks.py), NIC
# link lines (nic_links.py), module-load lines (parser.driver_module_missing / driver_load_failures), the
# platform's boot lines (platform.py) and user-space segfaults (app_crashes.py). Plain literals, found over the
# whole text at once. A new reader of the kernel log adds its words here: until it does, the property test
# (tests/history/test_cursor_property.py) finds the facts an incremental read would miss.
HINTS = (
    "NVRM", "Xid", "AER", "PCIe", "of memory", "EDAC", "Hardware Error", "INFO: task", "nouveau", "state:D",
    "blocked for more than", "Link ", "link status", "modprobe", "modules-load", "Hypervisor detected", "DMI: ",
    "segfault at ", "insmod", "modeset: ERROR",
    # driver frames and reports' task lines (driver_stacks.py); WARNING/BUG/Oops reports, module taints (splats.py)
    "[nvidia", "omm: ", "task:", *SPLAT_HINTS, "taints kernel", "module verification failed",
)  # fmt: skip
_HINT = re.compile("|".join(re.escape(hint) for hint in HINTS))
# Lines kept after a line that opens a report the parser waits on (patterns.may_start_report: AER reports,
# multi-line NVRM blocks): its detail lines and the line that ends it. After a hung task's header, its stack
# (driver_locks.MAX_STACK_LINES frames are read) and the line after it.
REPORT_AFTER = 16
STACK_AFTER = 82


def _after(line: str) -> int:
    if "state:D" in line or "blocked for more than" in line:
        return STACK_AFTER
    if any(hint in line for hint in SPLAT_HINTS):  # the report after it (splats.py)
        return MAX_REPORT_LINES
    if "omm: " in line or "task:" in line:  # a report's task line: the stack it covers (driver_stacks.WINDOW)
        return STACK_AFTER
    if "[nvidia" in line:  # the line after a driver frame: a run of frames ends where the log's did
        return 1
    return REPORT_AFTER if may_start_report(line) else 0


def _window_open(carried: str) -> bool:
    """Whether a line near the end of ``carried`` (a keep_lines text) opens a report or stack whose lines run past
    its end: the next read's first lines would be kept with it."""
    lines = carried.splitlines()
    last = len(lines)
    for index in range(max(0, last - STACK_AFTER - 1), last):
        line = lines[index]
        if _HINT.search(line) is not None and index + _after(line) >= last:
            return True
    return False


def _has_first_line(carried: str) -> bool:
    return any(line.strip() and not echoed_command(line) for line in carried.splitlines())


def keep_lines(text: str) -> str:
    """The first line with text (and, while those are shell prompts with their command, the next), each line
    holding a HINT, and the lines after one that opens a report or a
    stack (``_after``), in log order: every line the parser reads something from, and what it reads with it.

    Composes (``keep_lines(keep_lines(A) + B)`` is ``keep_lines(A + B)``): the lines after an opener are kept
    together with it, so a report cut at the end of ``A`` goes on in ``B`` the same distance from its opener."""
    lines = text.splitlines(keepends=True)
    ends = list(itertools.accumulate(map(len, lines)))
    keep = bytearray(len(lines))
    last = -1
    for match in _HINT.finditer(text):
        index = bisect.bisect_right(ends, match.start())
        if index == last or index >= len(lines):
            continue
        last = index
        stop = min(len(lines), index + 1 + _after(lines[index]))
        keep[index:stop] = b"\x01" * (stop - index)
    for first in (n for n, line in enumerate(lines) if line.strip()):
        keep[first] = 1
        if not echoed_command(lines[first]):  # a pasted log's prompt: kept, with the log's own first line
            break
    kept = [line for line, wanted in zip(lines, keep, strict=True) if wanted]
    if keep and keep[-1] and lines[-1] == lines[-1].splitlines()[0]:
        kept[-1] += "\n"  # the log's last line had no line end: the next read's lines follow it
    return "".join(kept)


KERNEL_LOG_CURSOR = KernelLogCursor()
