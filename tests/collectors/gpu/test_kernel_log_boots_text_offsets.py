"""kernel-log-boots works on text positions (``_joined``, ``_sections``, ``_candidates``): markers and hint
lines are found by ``str.find`` in the whole output, and only the lines kept are cut out; and it keeps the
lines after a hint line only where a report may be pending (``may_start_report``). ``parse``, and the
kernel-log parser's reading of ``candidate_lines``, must be what the line-by-line versions below (the code
as it was) give, on the recorded outputs and on mixtures with every line break ``str.splitlines`` knows,
AER reports and multi-line NVRM blocks, blank and blank-looking lines, markers first, last, repeated and
back to back, with and without a trailing line break."""

from __future__ import annotations

import random
import re
from bisect import bisect_right
from itertools import accumulate
from typing import Any

import pytest

from bench.real_evidence import kernel_log as real_size_boot_log
from nightowl.collectors.base import to_jsonable
from nightowl.collectors.gpu import kernel_log_boots
from nightowl.collectors.gpu.kernel_log import (
    EVENT_HINTS,
    MESSAGE_HINTS,
    may_continue_report,
    may_start_report,
    parse_lines,
)
from nightowl.collectors.gpu.kernel_log.parser import _Parser, _split
from nightowl.collectors.gpu.kernel_log.patterns import _STAMP
from nightowl.collectors.gpu.kernel_log_boots import _BOOT_ROW, _MARKER_LINE, MARKER
from tests.collectors.gpu.test_kernel_log_boots_sections import OUTPUTS, ROOT
from tests.collectors.gpu.test_kernel_log_boots_sections import reference_parse as reference_parse_by_lines

LOGS = sorted(p for p in (ROOT / "fixtures").rglob("kernel-log*.out") if p.stat().st_size < 2_000_000)
LINE_BREAKS = ("\n", "\r\n", "\r", "\x0b", "\x0c", "\x1c", "\x1d", "\x1e", "\x85", "\u2028", "\u2029")


def reference_candidate_lines(lines: list[str]) -> list[str]:
    """candidate_lines as it was: line starts by ``accumulate``, hits mapped to lines by bisection."""
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
    free = 0
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


def reference_sections(lines: list[str]) -> tuple[int, dict[int, tuple[int, int]]]:
    """_sections as it was: (lines of the boot list, each boot's (first, end) line indexes)."""
    markers = [
        (index, -int(found.group(1)))
        for index, line in enumerate(lines)
        if MARKER in line and (found := _MARKER_LINE.match(line.strip()))
    ]
    sections: dict[int, tuple[int, int]] = {}
    for number, (index, offset) in enumerate(markers):
        sections[offset] = (index + 1, markers[number + 1][0] if number + 1 < len(markers) else len(lines))
    return (markers[0][0] if markers else len(lines)), sections


def reference_parse(text: str) -> dict[str, Any]:
    """parse as it was: every boot's lines cut and read line by line (test_kernel_log_boots_sections), its
    candidates chosen as they were before this module worked on text offsets."""
    return reference_parse_by_lines(text, reference_candidate_lines)


def mixture(rng: random.Random, pool: list[str], specials: list[str], count: int) -> str:
    """Lines drawn from ``pool`` (in runs) and ``specials``, each ended by a line break of any kind."""
    lines: list[str] = []
    while len(lines) < count:
        if rng.random() < 0.3:
            lines.append(rng.choice(specials))
        else:
            start = rng.randrange(len(pool))
            lines += pool[start : start + rng.randrange(1, 6)]
    breaks = ("\n",) if rng.random() < 0.5 else LINE_BREAKS
    text = "".join(line + rng.choice(breaks) for line in lines)
    return text if rng.random() < 0.5 else text.rstrip("".join(LINE_BREAKS))


@pytest.fixture(scope="module")
def pool() -> list[str]:
    """The recorded kernel logs' lines and those of a real-size boot log (PCIe bandwidth notes, NVRM ...)."""
    recorded = [line for p in LOGS for line in p.read_text(errors="replace").splitlines()]
    return recorded + real_size_boot_log(400).splitlines()


def test_recorded_outputs_parse_as_before() -> None:
    assert OUTPUTS
    for path in OUTPUTS:
        text = path.read_text(errors="replace")
        assert kernel_log_boots.parse(text) == reference_parse(text)
        assert kernel_log_boots.parse(text.replace("\n", "\r\n")) == reference_parse(text.replace("\n", "\r\n"))


def read(lines: list[str]) -> dict[str, Any]:
    """What an earlier boot's result holds of the kernel-log parser's reading of ``lines``."""
    log = to_jsonable(parse_lines(lines))
    return {
        "events": [e for e in log.get("events") or [] if e.get("kind") != "other_nvrm"],
        "warnings": log.get("warnings") or [],
    }


def reads_alike(lines: list[str]) -> bool:
    kept = kernel_log_boots.candidate_lines(lines)
    return read(kept) == read(reference_candidate_lines(lines)) == read(lines)


def test_fixture_logs_read_alike() -> None:
    assert len(LOGS) > 20
    for path in LOGS:
        lines = path.read_text(errors="replace").splitlines()
        assert reads_alike(lines), path.name
        for cut in (1, 2, 7):  # a hint line or a report last, the log without its first lines
            assert reads_alike(lines[:-cut]) and reads_alike(lines[cut:]), path.name


SPECIALS = [
    "",
    "   ",
    "\t",
    "\u00a0",  # blank to str.strip(), not to a byte-minded test
    "  NVRM: GPU at PCI:0000:3b:00: GPU-1",
    "pcieport 0000:00:01.0:    [ 0] RxErr",
    "pcieport 0000:00:01.0: AER: Corrected error received: 0000:00:01.0",
    "kernel: Key type dns_resolver registered",
    "NVRM: Xid (PCI:0000:3b:00): 79, pid=1, name=x, GPU has fallen off the bus.",
    "EDAC ",
    "Xid",
    "[    5.140210] NVRM: The NVIDIA GPU 0000:3b:00.0 (PCI ID: 10de:1db1)",
    "[    5.140210] NVRM: The NVIDIA GPU 0000:3b:00.0",
    "NVRM: installed in this system is not supported by the",
    "NVRM: API mismatch: the client has the version 535.54.03, but",
    "NVRM: this kernel module has the version 530.30.02.  Please",
    "[  +0.000004] pcieport 0000:00:03.0: PCIe Bus Error: severity=Uncorrected (Fatal), type=Transaction Layer",
    "[  +0.000004] pcieport 0000:00:03.0:   device [8086:6f08] error status/mask=00004000/00000000",
    "[  +0.000004] pcieport 0000:00:03.0:    [14] CmpltTO",
    "pcieport 0000:00:03.0: AER: Uncorrected (Fatal) error received: 0000:03:00.0",
    '[XID found] (1) "NVRM: The NVIDIA GPU 0000:3b:00.0"',
    "pci 0000:3b:00.0: 252.048 Gb/s available PCIe bandwidth, limited by 16.0 GT/s PCIe x16 link at"
    " 0000:00:01.0 (capable of 504.112 Gb/s with 32.0 GT/s PCIe x16 link)",
    "pcieport 0000:00:01.0: available PCIe bandwidth AER: [ 0] RxErr",
    "pci 0000:3b:00.0: [10de:2330] type 00 class 0x030200 PCIe Endpoint",
    "[ 8123.000001] Out of memory: Killed process 4321 (python3) total-vm:81234567kB, anon-rss:7654321kB",
    "[ 8123.000002] Memory cgroup out of memory: Killed process 4322 (pt_main_thread) total-vm:1kB",
    "[ 8123.000003] INFO: task python3:4323 blocked for more than 122 seconds.",
    "[ 8123.000004] {1}[Hardware Error]: Hardware error from APEI Generic Hardware Error Source: 0",
    "[ 8123.000005] EDAC MC0: 1 CE memory read error on CPU_SrcID#0_Ha#0_Chan#0_DIMM#0",
    "[ 8123.000006] nouveau 0000:01:00.0: bus: MMIO read of 00000000 FAULT at 612000",
    "[ 8123.000007] NVRM: Xid (PCI:0000:3b:00): 13, pid=4321, name=python3, Graphics Exception",
    "[ 8123.000008] nvidia-nvswitch0: SXid (PCI:0000:05:00.0): 12028, Non-fatal, Link 32 egress non-posted PRIV",
]


@pytest.mark.parametrize("seed", range(60))
def test_mixtures_read_alike(seed: int, pool: list[str]) -> None:
    rng = random.Random(seed)
    assert reads_alike(mixture(rng, pool, SPECIALS, rng.randrange(0, 300)).splitlines())


def test_lines_without_an_event_hint_make_no_event(pool: list[str]) -> None:
    """A line holding none of ``EVENT_HINTS`` (a PCIe bandwidth note, an EDAC or GHES record, a hung task,
    a nouveau line), read with nothing pending, changes no event and no warning and leaves nothing
    pending, after an event as at the start: kernel-log-boots need not read it."""
    quiet = [line for line in [*pool, *SPECIALS] if not any(hint in line for hint in EVENT_HINTS)]
    for held in ("available PCIe bandwidth", "EDAC ", "Hardware Error]", "INFO: task ", "nouveau "):
        assert any(held in line for line in quiet), held
    event = "[ 8123.000007] NVRM: Xid (PCI:0000:3b:00): 13, pid=4321, name=python3, Graphics Exception"
    for line in quiet:
        for before in ([], [event]):
            parser = _Parser()
            for earlier in before:
                parser.feed(earlier)
            events = to_jsonable(list(parser.events.values()))
            parser.feed(line)
            assert parser.pending is None, line
            assert to_jsonable(list(parser.events.values())) == events and not parser.warnings, line


def test_a_report_waits_only_on_lines_that_may_start_one(pool: list[str]) -> None:
    """``may_start_report`` holds for every line whose message the parser keeps pending (read on the whole
    line and on the rest behind its time stamp, as ``_Parser.feed`` reads it)."""
    for line in [*pool, *SPECIALS]:
        parser = _Parser()
        parser.feed(line)
        waits = [
            parser._message(split[1]).waits
            for split in (_split(line), _split(line[_STAMP.match(line).end() :]))  # type: ignore[union-attr]
            if split is not None
        ]
        if parser.pending is not None or any(waits):
            assert may_start_report(line), line


@pytest.mark.parametrize("seed", range(60))
def test_mixtures_with_markers_parse_as_before(seed: int, pool: list[str]) -> None:
    rng = random.Random(seed)
    rows = [line for p in OUTPUTS for line in p.read_text(errors="replace").splitlines() if _BOOT_ROW.match(line)]
    markers = [f"{MARKER}-1 --", f"  {MARKER}-2 --  ", f"{MARKER}-3 --", f"{MARKER}-x --", f"say {MARKER}-1 --"]
    specials = [*SPECIALS, *markers, *markers, "IDX BOOT ID FIRST ENTRY LAST ENTRY", "garbage", *rows]
    text = mixture(rng, pool, specials, rng.randrange(0, 300))
    if rng.random() < 0.3:
        text = rng.choice(markers) + rng.choice(LINE_BREAKS) + text
    if rng.random() < 0.3:
        text += rng.choice(("", *LINE_BREAKS)) + rng.choice(markers) + rng.choice(("", "\n", "\r\n"))
    assert kernel_log_boots.parse(text) == reference_parse(text)
    assert cut_lines(text) == reference_cut_lines(text)


def cut_lines(text: str) -> tuple[list[str], dict[int, list[str]]]:
    """The boot list's lines and each boot's lines, as ``_sections`` cuts ``_joined(text)``."""
    joined = kernel_log_boots._joined(text)
    listing, sections = kernel_log_boots._sections(joined)
    cut = {offset: blank_as_none(joined[start:end].split("\n")) for offset, (start, end) in sections.items()}
    return blank_as_none(joined[:listing].split("\n")), cut


def reference_cut_lines(text: str) -> tuple[list[str], dict[int, list[str]]]:
    lines = text.splitlines()
    listing, sections = reference_sections(lines)
    return blank_as_none(lines[:listing]), {
        offset: blank_as_none(lines[start:end]) for offset, (start, end) in sections.items()
    }


def blank_as_none(lines: list[str]) -> list[str]:
    """A lone empty line as no line: "".split("\n") is [""], and a lone empty line reads as none (it is no
    boot row, no warning and no candidate)."""
    return [] if lines == [""] else lines


@pytest.mark.parametrize(
    "text",
    [
        "",
        "\n",
        "\n\n",
        f"{MARKER}-1 --",
        f"{MARKER}-1 --\n",
        f"{MARKER}-1 --\n{MARKER}-2 --\n",
        f"\n{MARKER}-1 --\nNVRM: Xid (PCI:0000:3b:00): 79, GPU has fallen off the bus.",
        f"{MARKER}-1 --\r\nNVRM: Xid (PCI:0000:3b:00): 79, GPU has fallen off the bus.\r\n",
        f"{MARKER}-1 --\n  \n\t\n",
        f"{MARKER}-1 --\n{MARKER}-1 --\nEDAC MC0: 1 CE memory read error\n",
    ],
)
def test_edge_texts_parse_as_before(text: str) -> None:
    assert kernel_log_boots.parse(text) == reference_parse(text)
    assert cut_lines(text) == reference_cut_lines(text)


def test_non_blank_is_what_strip_keeps() -> None:
    """``_candidates`` finds the first non-blank line with ``\\S``: the same characters ``str.strip`` keeps."""
    blank = [c for c in map(chr, range(0x3100)) if c.isspace()]
    assert all(re.fullmatch(r"\s", c) for c in blank)
    assert kernel_log_boots._NON_BLANK.search("".join(blank)) is None
