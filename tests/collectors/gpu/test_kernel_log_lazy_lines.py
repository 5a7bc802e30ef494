"""The kernel-log collectors' ``shows_nothing`` read an output one line at a time (``iter_lines``) and stop
at the first line that decides, instead of cutting a whole boot log into lines first: ``iter_lines`` must
cut as ``str.splitlines`` does, and both answers must be those of the versions below (the code as it was)."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from nightowl.collectors.gpu import kernel_log, kernel_log_boots
from nightowl.collectors.gpu.kernel_log.kernel_log import _JOURNAL_BANNERS
from nightowl.collectors.gpu.kernel_log_boots import _BOOT_ROW, _MARKER_LINE, MARKER
from nightowl.collectors.lines import iter_lines, newline_joined

ROOT = Path(__file__).resolve().parents[3]
OUTPUTS = sorted(p for p in (ROOT / "fixtures").rglob("kernel-log*.out") if p.stat().st_size < 2_000_000)
LINE_BREAKS = ("\n", "\r\n", "\r", "\x0b", "\x0c", "\x1c", "\x1d", "\x1e", "\x85", "\u2028", "\u2029")


def reference_kernel_log_shows_nothing(text: str) -> bool:
    return all(not line.strip() or line.strip().startswith(_JOURNAL_BANNERS) for line in text.splitlines())


def reference_boots_shows_nothing(text: str) -> bool:
    for line in text.splitlines():
        if MARKER in line and _MARKER_LINE.match(line.strip()):
            return True
        if _BOOT_ROW.match(line):
            return False
    return True


LINES = [
    "",
    " ",
    "\t",
    "a",
    "-- No entries --",
    "  -- Logs begin at Mon 2024-01-01 --",
    "-- Boot 8d3c0e1f2a3b4c5d6e7f8091a2b3c4d5 --",
    f"{MARKER}-1 --",
    f"say {MARKER}-1 --",
    " -1 8d3c0e1f2a3b4c5d6e7f8091a2b3c4d5 Thu 2024-04-04 18:03:50 UTC  Fri 2024-04-05 21:40:02 UTC",
    "NVRM: Xid (PCI:0000:3b:00): 79, GPU has fallen off the bus.",
]


@pytest.mark.parametrize("seed", range(200))
def test_lines_and_answers_as_before(seed: int) -> None:
    rng = random.Random(seed)
    parts = [rng.choice(LINES) + rng.choice(("", *LINE_BREAKS, "\r\r\n", "\n\r")) for _ in range(rng.randrange(0, 12))]
    text = "".join(parts)
    assert list(iter_lines(text)) == text.splitlines()
    assert kernel_log.shows_nothing(text) == reference_kernel_log_shows_nothing(text)
    assert kernel_log_boots.shows_nothing(text) == reference_boots_shows_nothing(text)


def test_recorded_outputs_answer_as_before() -> None:
    assert len(OUTPUTS) > 20
    for path in OUTPUTS:
        text = path.read_text(errors="replace")
        assert list(iter_lines(text)) == text.splitlines()
        assert kernel_log.shows_nothing(text) == reference_kernel_log_shows_nothing(text)
        assert kernel_log_boots.shows_nothing(text) == reference_boots_shows_nothing(text)


def test_every_line_break_of_splitlines() -> None:
    breaks = [c for c in map(chr, range(0x110000)) if len(f"a{c}b".splitlines()) == 2]
    assert sorted(breaks) == sorted(b for b in LINE_BREAKS if len(b) == 1)


def test_newline_joined_reads_the_lines_splitlines_cuts() -> None:
    """Every recorded output under fixtures/ (real outputs), as recorded, with CRLF and with each other
    break splitlines honours: the "\\n"-joined text has the same lines; one with "\\n" alone is itself."""
    outputs = [p.read_text(errors="replace") for p in sorted((ROOT / "fixtures").rglob("*.out"))]
    assert len(outputs) > 100
    for text in outputs:
        if not any(brk in text for brk in "\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029"):
            assert newline_joined(text) is text
        for variant in (text, text.replace("\n", "\r\n"), text.replace("\n", "\u2028"), text.replace("\n", "\r")):
            joined = newline_joined(variant)
            if joined is not variant:  # re-joined: cut at newlines, it gives splitlines' lines back
                assert joined.split("\n") == variant.splitlines()
