"""The streaming kernel-log parser: ``parse_lines`` (an open file works) and ``parse``.

The parser keeps one event per distinct message: a burst of identical lines (same kind, code, GPU, pid,
process and text) becomes one event with ``count``, ``first_time`` and ``last_time``, so memory grows
with distinct events, not with lines."""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from nightowl.collectors.gpu.driver_locks import DriverLockScan
from nightowl.collectors.gpu.kernel_log.app_crashes import gpu_library_crashes
from nightowl.collectors.gpu.kernel_log.classification import _Classified, classify
from nightowl.collectors.gpu.kernel_log.driver_stacks import DriverStackScan, may_matter
from nightowl.collectors.gpu.kernel_log.patterns import (
    _ADDRESS_FIRST,
    _AER_RECEIVED,
    _ANCHOR,
    _BLOCK_CONTINUATION,
    _BLOCK_OPENER,
    _DEVICE_TAIL,
    _NVSWITCH_DEVICE,
    _OOM_CGROUP,
    _PCIE_BUS_ERROR,
    _STAMP,
    GSP_RPC_DUMP,
    aer_detail_in,
    message_prefix,
)
from nightowl.collectors.gpu.kernel_log.platform import virtual_platform
from nightowl.collectors.gpu.kernel_log.results import KernelLogResult
from nightowl.collectors.gpu.kernel_log.splats import SplatScan
from nightowl.collectors.gpu.kernel_log.timestamps import parse_time, seconds_of
from nightowl.collectors.network.nic_links import LinkScan

MAX_DISTINCT_EVENTS = 20_000  # a safety cap; a real log has tens to hundreds
MAX_LINES_PER_EVENT = 32  # continuation lines kept per (collapsed) event
MAX_WARNINGS = 20
_CACHE_LIMIT = 8192  # classified messages remembered (bursts repeat the same message)
_SEEN_LIMIT = 4 * MAX_DISTINCT_EVENTS  # line texts remembered for the burst fast path
MAX_HOST_RECORDS = 1000  # host errors and hung tasks kept (a storm repeats; counts go on)


# --- the streaming parser -----------------------------------------------------------------------------
# Most lines of a long log repeat a message seen before (a burst, an AER storm) behind a new timestamp.
# Whatever the parser derives from a line's text alone is therefore computed once per distinct text and
# looked up afterwards; only what depends on the order of lines (drafts, preludes, counts) runs per line:
#   _Parser.seen_*   the text after "NVRM: " / "SXid (" -> its event or note (parse_lines' fast path)
#   _Parser.shapes   the rest of a line behind its time stamp (_STAMP) -> how it splits (_Shape)
#   _Parser.messages a message -> what joining lines needs to know about it (_Message)
#   _Parser.cache    a message and its continuation lines -> their classification
# Each memo holds at most _CACHE_LIMIT entries (it is emptied when full), so memory stays bounded.
@dataclass(frozen=True, slots=True)
class _Message:
    """What the line-joining logic needs to know about one message (computed once per distinct text)."""

    text: str  # the message as kept: device name in front for AER/OOM lines, trailing blanks off
    nvrm_body: str | None  # text after "NVRM: " of a non-Xid NVRM message: what it adds as a continuation
    continues_block: bool  # carries on a multi-line NVRM block ("(PCI ID: ...", "nvidia-bug-report.sh ...")
    opens_block: bool  # a pending message holding this may be continued by `continues_block` lines
    waits: bool  # starts a draft that later lines may continue (an AER report, an NVRM block opener)
    is_aer: bool
    aer_detail: bool  # a line of an AER report other than its "error received" line
    found: _Classified  # what the message is on its own (no continuation lines)


def _message(text: str) -> _Message:
    nvrm = text.startswith("NVRM: ")
    body = text[6:].strip() if nvrm and not text.startswith("NVRM: Xid") else None
    opens_block = _BLOCK_OPENER.search(text) is not None
    is_aer = ("AER: " in text or "PCIe Bus Error" in text) and not text.startswith("NVRM")
    return _Message(
        text=text,
        nvrm_body=body,
        continues_block=body is not None and _BLOCK_CONTINUATION.match(body) is not None,
        opens_block=opens_block,
        waits=is_aer or (nvrm and opens_block),
        is_aer=is_aer,
        aer_detail=aer_detail_in(text) and _AER_RECEIVED.search(text) is None,
        found=classify(text),
    )


def _split(line: str) -> tuple[str, str, str] | None:
    """(prefix, message, tail) of a line holding a message we read, else None.

    ``tail`` is the line from the anchor on, as read; ``message`` is it without trailing blanks and,
    for AER/bandwidth/OOM messages, with the device ("pcieport 0000:00:02.0: ") taken from the prefix.
    """
    match = _ANCHOR.search(line)
    if match is None:
        return None
    start = match.start()
    prefix, tail = line[:start], line[start:]
    if tail.startswith(("NVRM", "SXid", "Xid (", "nvidia-modeset")) and not message_prefix(prefix):
        return None  # the driver's words inside another message (a file name, a product string): not the driver's
    message = tail.rstrip()
    if message.endswith('"') and prefix.endswith('"'):  # a tool quoting the line: [XID found] (...) "NVRM: ..."
        message = message[:-1]
    if not message.startswith(("NVRM", "SXid", "Xid", "nvidia-modeset")):
        device = _DEVICE_TAIL.search(prefix) or _OOM_CGROUP.search(prefix)
        if device is not None:
            prefix, message = prefix[: device.start()], prefix[device.start() :] + message
    return prefix, message, tail


def _aer_detail(line: str) -> str | None:
    """The detail a line without a message adds to a pending AER report, None if it is not one."""
    if not aer_detail_in(line):
        return None
    device = _DEVICE_TAIL.search(line)
    return (line[device.start() :] if device else line).strip()


@dataclass(frozen=True, slots=True)
class _Shape:
    """How a line splits, read from the rest of the line behind its ``_STAMP`` (the stamp adds only time).

    Exact, not a heuristic: a stamp holds blanks, digits, brackets, ``.,:+-TZ`` (a ``:`` only before a
    digit) and 3-letter words followed by a blank, and no pattern ``_split`` or ``_aer_detail`` uses can
    start on such text; every stamp ends in a blank, so a word boundary or the lookbehind of
    ``_DEVICE_TAIL`` judges the rest's first character as it would in the whole line; and
    ``_DEVICE_TAIL`` could only reach into the stamp through a rest that opens with a PCI address:
    such a rest gets ``_NO_SHAPE`` and its line the general path. The property test
    ``test_memoized_paths_read_like_the_general_path`` checks the equivalence.
    """

    message: _Message | None  # None: no message we read (a possible AER detail line)
    prefix: str = ""  # the prefix after the stamp
    tail: str = ""  # the line from the message on, as read (what the fast path of parse_lines keys)
    blank_prefix: bool = False  # the prefix after the stamp is empty or blank
    is_aer_detail: bool = False  # (no message) an AER detail line
    detail: str | None = None  # its detail text, None when it is the whole line stripped (stamp included)


_NO_SHAPE = _Shape(None)  # memo value of a rest that opens with a PCI address


@dataclass(slots=True)
class _Draft:
    """A message that more lines may continue (a block opener or an AER report)."""

    prefix: str
    message: str
    continuation: list[str] = field(default_factory=list)
    details: list[str] = field(default_factory=list)  # AER detail lines (kept as `lines`)
    is_aer: bool = False
    opens_block: bool = False


_NOTE_ROLES = frozenset(
    ("prelude", "board_serial", "gpu_serial", "sxid_detail", "detail")
    + ("host_error", "ghes_detail", "hung_task", "nouveau")
)


def _remember(memo: dict[Any, Any], key: Any, value: Any) -> None:
    if len(memo) >= _CACHE_LIMIT:
        memo.clear()
    memo[key] = value


class _Parser:
    """Line-by-line state. Most messages are emitted at once; only a message that more lines may
    continue (a block opener, an AER report) waits in ``pending`` for the next line."""

    def __init__(self) -> None:
        self.events: dict[tuple[Any, ...], dict[str, Any]] = {}
        # The text after "NVRM: " / "SXid (" -> its event, or what else it was (prelude, serial).
        # parse_lines looks repeats up here instead of parsing them again.
        self.seen_nvrm: dict[str, dict[str, Any] | _Classified] = {}
        self.seen_sxid: dict[str, dict[str, Any] | _Classified] = {}
        self.shapes: dict[str, _Shape] = {}
        self.messages: dict[str, _Message] = {}
        self.pending: _Draft | None = None
        self.cache: dict[tuple[str, ...], _Classified] = {}
        self.prelude: dict[str, Any] | None = None
        self.last_event: dict[str, Any] | None = None
        self.sxid_last: dict[tuple[str | None, int | None], dict[str, Any]] = {}
        self.bandwidth: dict[str, dict[str, Any]] = {}
        self.driver_version: str | None = None
        self.warnings: list[str] = []
        self.extra_warnings = 0
        self.dropped_events = 0
        self.lines_read = 0
        self.saw_text = False
        self.host_errors: list[dict[str, Any]] = []
        self.host_keys: dict[tuple[Any, ...], dict[str, Any]] = {}
        self.last_ghes: dict[str, Any] | None = None
        self.hung_tasks: list[dict[str, Any]] = []
        self.nouveau: dict[str, None] = {}
        self.xid_codes_seen: dict[str | None, set[int]] = {}
        self.xid79: list[dict[str, Any]] = []  # Xid 79 events (fallen-off-the-bus lines join them)
        self.gsp_rpc_dumps: list[str] = []  # titles of GSP RPC debug dumps (GSP_RPC_DUMP)

    def feed(self, line: str) -> None:
        """The general path for one line (``parse_lines`` short-cuts repeats of known messages)."""
        if not self.saw_text:
            self.saw_text = bool(line) and not line.isspace()
        cut = _STAMP.match(line)  # (always matches, maybe empty)
        if cut is not None and cut.end():
            end = cut.end()
            shape = self.shapes.get(line[end:])
            if shape is None:
                shape = self._new_shape(line[end:])
            message = shape.message
            if message is not None:
                # Blanks alone in front (no time): a continuation line if the whole prefix is blank.
                indented = cut.lastgroup is None and shape.blank_prefix
                self._feed_message(line[:end] + shape.prefix, message, shape.tail, indented)
                return
            if shape is not _NO_SHAPE:  # no message: _feed_plain, inlined (AER storms repeat these lines)
                pending = self.pending
                if pending is not None:
                    if not (pending.is_aer and shape.is_aer_detail):
                        self._flush()
                    elif len(pending.details) < MAX_LINES_PER_EVENT:
                        pending.details.append(shape.detail if shape.detail is not None else line.strip())
                return
        split = _split(line)
        if split is None:
            pending = self.pending
            self._feed_plain(_aer_detail(line) if pending is not None and pending.is_aer else None)
            return
        prefix, text, tail = split
        self._feed_message(prefix, self._message(text), tail, indented=bool(prefix) and prefix.isspace())

    def _new_shape(self, rest: str) -> _Shape:
        if _ADDRESS_FIRST.match(rest):
            shape = _NO_SHAPE
        else:
            split = _split(rest)
            if split is not None:
                prefix, text, tail = split
                shape = _Shape(self._message(text), prefix, tail, blank_prefix=not prefix or prefix.isspace())
            elif not aer_detail_in(rest):
                shape = _Shape(None)
            else:
                device = _DEVICE_TAIL.search(rest)
                shape = _Shape(None, is_aer_detail=True, detail=rest[device.start() :].strip() if device else None)
        _remember(self.shapes, rest, shape)
        return shape

    def _message(self, text: str) -> _Message:
        message = self.messages.get(text)
        if message is None:
            message = _message(text)
            _remember(self.messages, text, message)
        return message

    def _feed_plain(self, aer_detail: str | None) -> None:
        """A line without any message we read: an AER detail line, or the end of a pending message."""
        pending = self.pending
        if pending is None:
            return
        if pending.is_aer and aer_detail is not None:
            if len(pending.details) < MAX_LINES_PER_EVENT:
                pending.details.append(aer_detail)
            return
        self._flush()

    def _feed_message(self, prefix: str, message: _Message, tail: str, indented: bool) -> None:
        """A line with a message. ``indented``: its prefix is blank, as on the continuation lines of a
        multi-line NVRM message (they carry no timestamp)."""
        pending = self.pending
        body = message.nvrm_body
        if pending is None:
            if indented and body is not None and self.last_event is not None:
                self._add_line(self.last_event, body)
                self._gsp_dump(body)
                return
        else:
            if body is not None and (indented or (message.continues_block and pending.opens_block)):
                if len(pending.continuation) < MAX_LINES_PER_EVENT:  # memory stays bounded on any input
                    pending.continuation.append(body)
                return
            if pending.is_aer and message.aer_detail:
                if len(pending.details) < MAX_LINES_PER_EVENT:
                    pending.details.append(message.text)
                return
            self._flush()
        if message.waits:
            self.pending = _Draft(prefix, message.text, is_aer=message.is_aer, opens_block=message.opens_block)
        else:
            self._handle(message.found, (message.text,), prefix, tail, ())

    def _flush(self) -> None:
        draft, self.pending = self.pending, None
        if draft is None:
            return
        # Keyed by the parts, not their join: the parts are memoized strings whose hashes are known.
        parts = (draft.message, *draft.continuation)
        found = self.cache.get(parts)
        if found is None:
            found = classify(" ".join(parts))
            _remember(self.cache, parts, found)
        self._handle(found, parts, draft.prefix, None, draft.details)

    def _handle(
        self, found: _Classified, parts: tuple[str, ...], prefix: str, tail: str | None, details: Sequence[str]
    ) -> None:
        """Act on a classified message (``parts``: its lines' messages). ``tail``: the line from the message
        on when parse_lines may short-cut its repeats (a single line, no AER details), else None."""
        role = found.role
        if role == "event":
            event = self._emit(found, prefix, details)
            if tail is not None and event is not None:
                self._remember_seen(tail, event)
        elif role in _NOTE_ROLES:
            self.note(found, prefix)
            if tail is not None:
                self._remember_seen(tail, found)
        elif role == "bandwidth":
            self._bandwidth(found)
        elif role == "unreadable":
            self._warn(f"unreadable Xid/SXid line: {' '.join(parts)[:200]}")

    def _remember_seen(self, tail: str, known: dict[str, Any] | _Classified) -> None:
        """Let parse_lines short-cut the next line with this tail (it looks up the text after the
        6-character "NVRM: " / "SXid (" it finds)."""
        if len(self.seen_nvrm) + len(self.seen_sxid) >= _SEEN_LIMIT:
            return
        if tail.startswith("NVRM: "):
            self.seen_nvrm[tail[6:]] = known
        elif tail.startswith("SXid ("):
            self.seen_sxid[tail[6:]] = known

    def note(self, found: _Classified, prefix: str) -> None:
        """A line that adds to an event rather than being one: keep what it says."""
        role = found.role
        if role == "sxid_detail":
            self._sxid_detail(found, prefix)
        elif role == "prelude":
            self.prelude = {"pci": found.pci, "uuid": found.text}
        elif role == "board_serial":
            if self.prelude is not None:
                self.prelude["board_serial"] = found.text
        elif role == "gpu_serial":
            last = self.last_event
            if last is not None and last.get("pci") == found.pci:
                last.setdefault("board_serial", found.text)
        elif role == "detail":
            if self.last_event is not None:
                self._add_line(self.last_event, found.text)
            self._gsp_dump(found.text)
        else:
            self._note_host(found, prefix)

    def _gsp_dump(self, text: str) -> None:
        """Keep a title of the GSP RPC debug dump (``GSP_RPC_DUMP``) once, whatever event the detail joins."""
        if ("GSP" in text or "entry function" in text) and GSP_RPC_DUMP.match(text):
            title = " ".join(text.split())
            if title not in self.gsp_rpc_dumps and len(self.gsp_rpc_dumps) < MAX_WARNINGS:
                self.gsp_rpc_dumps.append(title)

    def _note_host(self, found: _Classified, prefix: str) -> None:
        role = found.role
        if role == "nouveau":
            if found.pci and len(self.nouveau) < MAX_HOST_RECORDS:
                self.nouveau[found.pci] = None
        elif role == "ghes_detail":
            if self.last_ghes is not None:
                for name, value in found.extras:  # the first value of each field is the record's
                    if self.last_ghes.get(name) is None:
                        self.last_ghes[name] = value
        elif role == "hung_task":
            self._hung_task(found, prefix)
        elif role == "host_error":
            self._host_error(found, prefix)

    def _hung_task(self, found: _Classified, prefix: str) -> None:
        if len(self.hung_tasks) >= MAX_HOST_RECORDS:
            return
        after = {pci: sorted(codes) for pci, codes in self.xid_codes_seen.items() if pci}
        self.hung_tasks.append(
            {
                "task": found.process,
                "pid": found.pid,
                "state": "D",  # the hung-task detector reports only uninterruptible (D) tasks
                "time": parse_time(prefix)[0],
                **dict(found.extras),
                "after_xids": after,
            }
        )

    def _host_error(self, found: _Classified, prefix: str) -> None:
        extras = dict(found.extras)
        key = (extras.get("source"), extras.get("severity"), extras.get("dimm"))
        known = self.host_keys.get(key) if extras.get("source") != "ghes" else None
        if known is not None:
            known["count"] += 1
            known["errors"] = known.get("errors", 0) + extras.get("errors", 0)
            known["last_time"] = parse_time(prefix)[0]
            return
        if len(self.host_errors) >= MAX_HOST_RECORDS:
            return
        time = parse_time(prefix)[0]
        record = {**extras, "text": found.text, "time": time, "count": 1, "last_time": time}
        self.host_errors.append(record)
        if extras.get("source") == "ghes":
            self.last_ghes = record
        else:
            self.host_keys[key] = record

    def repeat(self, event: dict[str, Any], prefix: str) -> None:
        """Another occurrence of a known event (its prelude and lines were kept at the first one)."""
        event["count"] += 1
        event["_last_prefix"] = prefix
        self.last_event = event
        if self.prelude is not None:
            self.drop_prelude_of(event)

    def drop_prelude_of(self, event: dict[str, Any]) -> None:
        if self.prelude is not None and self.prelude["pci"] == event["pci"]:
            self.prelude = None

    def _emit(self, found: _Classified, prefix: str, details: Sequence[str]) -> dict[str, Any] | None:
        key = found.key
        event = self.events.get(key)
        if event is not None:
            self.repeat(event, prefix)
            return event
        if found.kind == "fallen_off_bus" and found.pci is not None:
            xid79 = self.events.get(("xid", 79, found.pci, None, None, "GPU has fallen off the bus."))
            xid79 = xid79 or next((e for e in self.xid79 if e["pci"] == found.pci), None)
            if xid79 is not None:  # the driver's own words for the same event: one event
                self._merge_fallen(xid79, found.text)
                return None
        if len(self.events) >= MAX_DISTINCT_EVENTS:
            self.dropped_events += 1
            return None
        time, monotonic = parse_time(prefix)
        event = {
            "kind": found.kind,
            "code": found.code,
            "pci": found.pci,
            "time": time,
            "pid": found.pid,
            "process": found.process,
            "text": found.text,
        }
        event.update(found.extras)
        event.update(count=1, first_time=time, last_time=time, _last_prefix=None)
        if monotonic is not None and monotonic != time:
            event["monotonic"] = monotonic
        self._enrich(event, prefix, details)
        self.events[key] = event
        self.last_event = event
        if found.kind == "xid" and found.code is not None:
            self.xid_codes_seen.setdefault(found.pci, set()).add(found.code)
            if found.code == 79:
                self._absorb_fallen(event)
        return event

    def _merge_fallen(self, xid79: dict[str, Any], text: str) -> None:
        xid79["fallen_off_bus"] = True
        if text not in xid79.get("lines", ()):
            self._add_line(xid79, text)

    def _absorb_fallen(self, xid79: dict[str, Any]) -> None:
        """An Xid 79 after its GPU's fallen-off-the-bus block: the block joins the Xid event."""
        self.xid79.append(xid79)
        if xid79["pci"] is None:
            return
        for key, other in list(self.events.items()):
            if other["kind"] == "fallen_off_bus" and other["pci"] == xid79["pci"]:
                del self.events[key]
                self._merge_fallen(xid79, other["text"])

    def _enrich(self, event: dict[str, Any], prefix: str, details: Sequence[str]) -> None:
        kind = event["kind"]
        prelude = self.prelude
        if prelude is not None and kind in ("xid", "fallen_off_bus") and prelude["pci"] == event["pci"]:
            event["uuid"] = prelude["uuid"]
            if "board_serial" in prelude:
                event["board_serial"] = prelude["board_serial"]
            self.prelude = None
        if kind == "sxid":
            device = _NVSWITCH_DEVICE.search(prefix)
            if device is not None:
                event["device"] = device.group(1)
            self.sxid_last[(event["pci"], event["code"])] = event
        if kind == "pcie_aer" and details and "severity" not in event:
            for detail in details:
                bus_error = _PCIE_BUS_ERROR.search(detail)
                if bus_error is not None:
                    event["severity"] = bus_error.group("severity").strip().lower()
                    break
        if details:
            kept = event.setdefault("lines", [])
            kept.extend(details[: max(0, MAX_LINES_PER_EVENT - len(kept))])
        if event.get("driver_version"):
            self.driver_version = event["driver_version"]

    @staticmethod
    def _add_line(event: dict[str, Any], line: str) -> None:
        kept = event.setdefault("lines", [])
        if len(kept) < MAX_LINES_PER_EVENT:
            kept.append(line)

    def _sxid_detail(self, found: _Classified, prefix: str) -> None:
        owner = self.sxid_last.get((found.pci, found.code))
        if owner is not None:
            self._add_line(owner, found.text)
            return
        # A "Severity"/"Data" line whose report we did not see: keep it as its own event.
        self._emit(_Classified("event", "sxid", found.code, found.pci, text=found.text), prefix, ())

    def _bandwidth(self, found: _Classified) -> None:
        pci = found.pci
        if pci is None or pci in self.bandwidth or len(self.bandwidth) >= MAX_DISTINCT_EVENTS:
            return
        self.bandwidth[pci] = {"pci": pci, **dict(found.extras)}

    def _warn(self, text: str) -> None:
        if len(self.warnings) < MAX_WARNINGS:
            self.warnings.append(text)
        else:
            self.extra_warnings += 1

    def finish(self) -> KernelLogResult:
        self._flush()
        events = list(self.events.values())
        for event in events:
            last_prefix = event.pop("_last_prefix")
            if last_prefix is not None:
                event["last_time"] = parse_time(last_prefix)[0]
        warnings = list(self.warnings)
        if self.extra_warnings:
            warnings.append(f"{self.extra_warnings} more unreadable lines not listed")
        if self.dropped_events:
            warnings.append(f"{self.dropped_events} events beyond {MAX_DISTINCT_EVENTS} distinct ones not kept")
        if not self.saw_text:
            warnings.append("empty input: no kernel log lines")
        return KernelLogResult(
            events=events,
            warnings=warnings,
            driver_version=self.driver_version,
            pcie_bandwidth_limited=list(self.bandwidth.values()),
            lines_read=self.lines_read,
            host_errors=self.host_errors,
            hung_tasks=self.hung_tasks,
            nouveau_devices=sorted(self.nouveau),
            gsp_rpc_dumps=self.gsp_rpc_dumps,
        )


def parse_lines(lines: Iterable[str]) -> KernelLogResult:
    """Parse a kernel log line by line (an open file works); memory grows with distinct events only.

    The loop is the hot path of a 100 MB log: a line whose text after ``NVRM: `` / ``SXid (`` was seen
    before (an Xid burst) only bumps its event's count, and lines that cannot matter are skipped with
    substring tests; everything else goes to ``_Parser.feed``, which looks what it can up by text too.
    """
    parser = _Parser()
    stacks, driver_stacks = DriverLockScan(), DriverStackScan()  # D-state stacks; driver frames, header or not
    links = LinkScan()
    splats = SplatScan()
    in_stack = in_splat = False
    nvrm_seen = parser.seen_nvrm.get
    sxid_seen = parser.seen_sxid.get
    pending: _Draft | None = None
    lines_read, saw_text = 0, False
    load_lines: list[str] = []  # the lines a driver-load failure can be read from (driver_load_failures)
    host_lines: list[str] = []  # boot lines naming the platform, processes crashing (platform.py, app_crashes.py)
    for line in lines:
        lines_read += 1
        # A D-state task's header opens its stack; the frames after it are read only while it is open.
        if in_stack:
            in_stack = stacks.feed(line)
        if in_splat:  # a kernel WARNING/BUG/Oops report: its task and frames (splats.py)
            in_splat = splats.feed(line)
        elif "cut here" in line or "BUG" in line or "Oops" in line or "protection fault" in line or "WARNING" in line:
            in_splat = splats.start(line, len(load_lines))
        if "state:D" in line or "blocked for more than" in line:
            in_stack = stacks.start(line)
        elif "ink " in line and ("Link " in line or "link status" in line):  # nic_links.HINTS (both hold "ink ")
            links.feed(line, seconds_of(line))
        if may_matter(line):  # a run of frames in the driver, under a D-state header or none (driver_stacks.py)
            driver_stacks.feed(line, lines_read, stacks.current if in_stack else None, in_splat)
        if "segfault at " in line or "DMI: " in line or "Hypervisor detected: " in line:  # on any path below
            host_lines.append(line)  # (one logged while a report is pending, or by nvidia-modprobe, too)
        head, found, tail = line.partition("NVRM: ")
        if found and not message_prefix(head):
            found = ""  # "NVRM: " inside another message: the general path reads the line (and no Xid in it)
        if found:
            known = nvrm_seen(tail) if pending is None else None
            if known is None and any(hint in tail for hint in _NVRM_LOAD_HINTS):
                load_lines.append(line)
        elif "Xid" in line:
            head, found, tail = line.partition("SXid (")
            known = sxid_seen(tail) if found and pending is None and message_prefix(head) else None
        elif (
            pending is None
            and "AER: " not in line
            and "PCIe " not in line
            and "of memory" not in line
            and "EDAC " not in line
            and "Hardware Error]" not in line
            and "INFO: task " not in line
            and "nouveau " not in line
            and "modeset: ERROR" not in line
        ):
            # No message we read (every _ANCHOR alternative holds one of these substrings).
            if not saw_text and line and not line.isspace():
                saw_text = True
            if _may_tell_of_loading(line):
                load_lines.append(line)
            continue
        else:
            known = None
        # A blank prefix makes the line a continuation of the one before: feed() decides.
        if known is not None and not head.isspace():
            if known.__class__ is dict:  # inlined parser.repeat(): this is the hottest line
                known["count"] += 1  # type: ignore[index]
                known["_last_prefix"] = head  # type: ignore[index]
                parser.last_event = known  # type: ignore[assignment]
                if parser.prelude is not None:
                    parser.drop_prelude_of(known)  # type: ignore[arg-type]
            else:
                parser.note(known, head)  # type: ignore[arg-type]
            continue
        parser.feed(line)
        pending = parser.pending
    parser.saw_text = parser.saw_text or saw_text
    parser.lines_read = lines_read
    return _result(parser, (stacks, driver_stacks), links, splats, load_lines, host_lines)


def _result(
    parser: _Parser,
    stacks: tuple[DriverLockScan, DriverStackScan],
    links: LinkScan,
    splats: SplatScan,
    load: list[str],
    host: list[str],
) -> KernelLogResult:
    """The parser's result with what the scans beside it read (``load``/``host``: the lines kept for them)."""
    result = parser.finish()
    result.driver_lock_waits = stacks[1].finish(stacks[0].finish())  # tasks stuck in the driver, header or not
    result.nic_links = links.finish()
    result.driver_load_failures = driver_load_failures("\n".join(load)) + splats.finish(load)
    result.host_kernel_faults = splats.host_faults(load)
    result.virtual_platform = virtual_platform("\n".join(host))
    result.gpu_library_crashes = gpu_library_crashes("\n".join(host))
    return result


# The nvidia module is not installed for the running kernel: modprobe's own message (kmod, "Module %s not
# found in directory %s") and systemd-modules-load's ("Failed to find module '%s'"), in a syslog or a paste.
_MODULE_MISSING = re.compile(r"modprobe: FATAL: Module nvidia\S* not found|Failed to find module 'nvidia")
# Each alternative starts with one of these: without them the search cannot match, and they are found at
# memory speed where the search tries the pattern at every "m" and "F" (14 ms of a 0.8 MB boot log's 29).
_MODULE_MISSING_HINTS = ("modprobe: FATAL: Module nvidia", "Failed to find module 'nvidia")


def _may_tell_of_loading(line: str) -> bool:
    """A line driver_load_failures and splats.py may read: a module loader's (modprobe, insmod,
    systemd-modules-load), a module tainting the kernel as it loads, hardened usercopy refusing the driver's memory
    ("attempt detected"), nvidia-drm's own errors."""
    if "mod" in line and ("modprobe" in line or "insmod" in line or "modules-load" in line):
        return True
    return "taints kernel" in line or "attempt detected" in line or "[nvidia-drm]" in line


def driver_module_missing(text: str) -> bool:
    """Whether modprobe or systemd-modules-load said the nvidia module is not there (``_MODULE_MISSING``)."""
    return any(hint in text for hint in _MODULE_MISSING_HINTS) and _MODULE_MISSING.search(text) is not None


@functools.cache
def _load_failure_patterns() -> tuple[tuple[str, re.Pattern[str]], ...]:
    from nightowl import knowledge

    rows = knowledge.read_csv("driver_load_failures.csv", required=("id", "pattern", "meaning", "source"))
    return tuple((row["id"], knowledge.compile_pattern(row["pattern"], "driver_load_failures.csv")) for row in rows)


# The NVRM messages of a driver that cannot use its GPUs (driver_load_failures.csv's NVRM rows).
_NVRM_LOAD_HINTS = ("not supported", "No NVIDIA", "None of", "failed to init", "Chipset not recognized")
# Every driver-load failure line holds one of these (found at memory speed before any pattern runs).
_LOAD_FAILURE_HINTS = (
    "modprobe",
    "insmod: ",
    "[nvidia-drm]",
    "modules-load",
    "not supported by",
    "NVRM: No NVIDIA",
    "NVRM: None of",
    "NVRM: fail",
    "Chipset not",
    "attempt detected",  # hardened usercopy refusing the driver's memory
)


def driver_load_failures(text: str) -> list[dict[str, str]]:
    """The lines where the driver could not load or could not use any GPU: modprobe or systemd-modules-load
    failing to insert a module, a GPU the release does not support, no GPU found or initialised
    (nightowl/knowledge/driver_load_failures.csv), at most one line per row, in log order."""
    if not any(hint in text for hint in _LOAD_FAILURE_HINTS):
        return []
    found: list[tuple[int, dict[str, str]]] = []
    for row_id, pattern in _load_failure_patterns():
        if row_id == "modprobe_error" and any(f["id"] == "modprobe_insert_failed" for _, f in found):
            continue  # the insert failure already says it
        match = pattern.search(text)
        if match is not None:
            start = text.rfind("\n", 0, match.start()) + 1
            end = text.find("\n", match.end())
            found.append((start, {"id": row_id, "line": text[start : end if end >= 0 else len(text)].strip()[:300]}))
    return [failure for _, failure in sorted(found, key=lambda item: item[0])]


def parse(text: str) -> KernelLogResult:
    """Parse a whole kernel log held in memory. Never raises on any text.

    Every line goes through parse_lines' loop: picking the lines that hold a hint out of the whole text
    first (``str.find``, as kernel_log_boots does for its fewer hints) costs as much as the loop's own
    substring tests, which are the loop's cost (13 hints at ~0.3 ms each per 0.8 MB boot log, CPython
    3.11: 4.3 ms to find them against 4.9 ms for the whole parse), so it would not pay."""
    result = parse_lines(text.splitlines())
    result.driver_module_missing = driver_module_missing(text)
    return result
