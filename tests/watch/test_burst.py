"""A burst keeps every trigger line and drops context first: an Xid 79 after thousands of NVRM lines, or after
a storm of Xid 13, is in the burst, its neighbours are kept, and what was not kept is counted."""

from __future__ import annotations

from nightowl.collectors.gpu import kernel_log
from nightowl.watch import burst as burst_module
from nightowl.watch.burst import MAX_LINES, MAX_TRIGGER_LINES, NEAR, Burst, BurstTracker
from nightowl.watch.source import Batch
from nightowl.watch.triggers import LineJudge

XID13 = "[ 10.0] NVRM: Xid (PCI:0000:3b:00): 13, pid={n}, name=python, Graphics SM Warp Exception"
XID79 = "[ 12.0] NVRM: Xid (PCI:0000:3b:00): 79, pid=1, name=python, GPU has fallen off the bus."
NVRM = "[ 11.{n:04d}] NVRM: GPU at PCI:0000:3b:00: GPU-6b3c8a3e-1111-2222-3333-44445555{n:04d}"
AER = "[ 13.0] pcieport 0000:00:02.0: AER: Uncorrected (Fatal) error received: 0000:3b:00.0"
AER_DETAIL = "[ 13.0] pcieport 0000:00:02.0:   device [10de:2330] error status/mask=00000020/00000000"


def closed_burst(lines: list[str]) -> Burst:
    tracker = BurstTracker(LineJudge(), debounce=1.0, max_age=30.0)
    tracker.feed(Batch(lines, {"offset": 0}), now=0.0)
    burst = tracker.due(now=2.0)
    assert burst is not None
    return burst


def nvrm(count: int) -> list[str]:
    return [NVRM.format(n=n) for n in range(count)]


def test_an_xid_79_after_2100_nvrm_context_lines_is_kept_with_the_lines_before_it() -> None:
    context = nvrm(2100)
    burst = closed_burst([XID13.format(n=1), *context, XID79])
    assert burst.lines[-1] == XID79
    assert burst.lines[-1 - NEAR : -1] == context[-NEAR:]  # what the driver said just before it
    assert burst.dropped_context == len(context) - MAX_LINES - NEAR and burst.dropped_triggers == 0
    assert sorted(burst.triggers.elements()) == ["xid", "xid"]
    facts = kernel_log.facts(kernel_log.parse("\n".join(burst.lines) + "\n"))
    assert facts["fallen_off_bus"] is True
    note = burst.dropped_note()
    assert note is not None and f"{burst.dropped_context} context lines" in note


def test_the_detail_lines_after_a_trigger_are_kept_once_context_is_spent() -> None:
    burst = closed_burst([XID13.format(n=1), *nvrm(MAX_LINES + 50), AER, AER_DETAIL, *nvrm(NEAR + 5)])
    at = burst.lines.index(AER)
    assert burst.lines[at + 1] == AER_DETAIL
    assert burst.triggers["aer-fatal"] == 1
    assert at == 1 + MAX_LINES + NEAR  # the Xid, the context budget, the NEAR lines before the header
    assert len(burst.lines) == at + 1 + NEAR  # and the NEAR after it, its detail line first


def test_a_new_xid_after_a_storm_past_the_trigger_budget_is_kept() -> None:
    storm = [XID13.format(n=n) for n in range(MAX_TRIGGER_LINES + 500)]
    burst = closed_burst([*storm, XID79, XID13.format(n=0)])
    assert XID79 in burst.lines
    assert burst.dropped_triggers == 500 + 1  # the storm's repeats past the budget, never the new Xid
    assert burst.evidence_lines == MAX_TRIGGER_LINES + 1
    assert burst.triggers["xid"] == len(storm) + 2  # every trigger line is counted, kept or not


def test_a_storm_of_huge_distinct_trigger_lines_stays_within_the_character_budget() -> None:
    long_lines = [XID13.format(n=n).replace("13,", f"{n},", 1) + " x" * 8000 for n in range(700)]
    burst = closed_burst(long_lines)
    budget = burst_module.MAX_TRIGGER_CHARS + burst_module.SPARE_CHARS
    assert burst.evidence_chars <= budget and burst.dropped_triggers > 0
    assert sum(len(line) + 1 for line in burst.lines) <= budget + burst_module.MAX_CHARS


def test_a_queued_burst_absorbs_the_newer_ones_trigger_lines_past_its_context() -> None:
    older = closed_burst([XID13.format(n=1), *nvrm(MAX_LINES + 10)])
    newer = closed_burst([*nvrm(3), XID79, AER, AER_DETAIL])
    merged = older.absorb(newer)
    assert XID79 in merged.lines and AER_DETAIL in merged.lines
    assert merged.lines.index(XID79) < merged.lines.index(AER) < merged.lines.index(AER_DETAIL)
    assert merged.triggers["xid"] == 2 and merged.superseded == 1
    assert merged.dropped_context == older.dropped_context  # its own drops and the newer's (none)
