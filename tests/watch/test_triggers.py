"""Which lines open a burst: real kernel lines from the corpus, read by the kernel-log parser."""

from __future__ import annotations

import re
import threading
from pathlib import Path

import pytest

from nightowl.collectors.gpu import kernel_log
from nightowl.collectors.gpu.kernel_log import patterns
from nightowl.watch import triggers
from nightowl.watch.triggers import LineJudge

CORPUS = Path(__file__).resolve().parents[2] / "fixtures" / "corpus" / "gpu"
WATCHDOG = 30.0  # the long-line test's give-up time: it ends in about a second; it hung for a minute before


def lines_of(name: str) -> list[str]:
    return (CORPUS / name).read_text().splitlines()


def fired_in(name: str, judge: LineJudge | None = None) -> list[list[str]]:
    judge = judge or LineJudge()
    return [fired for line in lines_of(name) if (fired := judge.fired(line))]


def test_every_xid_line_of_the_corpus_fires_the_xid_trigger() -> None:
    judge = LineJudge()
    for path in sorted(CORPUS.glob("xid*.txt")):
        for line in path.read_text().splitlines():
            parsed = kernel_log.parse_lines([line])
            is_xid = any(e["kind"] == "xid" for e in parsed.events)
            assert ("xid" in judge.fired(line)) == is_xid, (path.name, line)


def test_fatal_aer_fires_and_a_corrected_one_does_not() -> None:
    name = "xid79-after-pcie-aer-surprise-down-dmesg-gpuburn1.txt"
    judge = LineJudge()
    by_line = {line: judge.fired(line) for line in lines_of(name)}
    corrected = [line for line in by_line if "Corrected error received" in line]
    fatal = [line for line in by_line if "Uncorrected (Fatal) error received" in line]
    assert corrected and fatal
    assert all(by_line[line] == [] for line in corrected)
    assert all(by_line[line] == ["aer-fatal"] for line in fatal)


def test_gpu_init_failure_and_sxid_fire() -> None:
    assert any("gpu-init-failed" in f for f in fired_in("xid48-xid64-dbe-rminitadapter-syslog-gpuop1146.txt"))
    assert ["sxid"] in fired_in("xid79-sxid20034-dmesg-nvswitch-gpud-readme.txt")


def test_a_hung_task_fires_only_after_an_xid() -> None:
    hung = "[ 1234.5] INFO: task nvidia-smi:4242 blocked for more than 120 seconds."
    xid = "[ 1200.0] NVRM: Xid (PCI:0000:3b:00): 45, pid=1, name=python, Ch 00000010"
    judge = LineJudge()
    assert judge.fired(hung) == []
    assert judge.fired(xid) == ["xid"]
    assert judge.fired(hung) == ["hung-task-after-xid"]


def test_uncorrectable_edac_fires_and_a_corrected_one_does_not() -> None:
    judge = LineJudge()
    assert judge.fired("[ 5.0] EDAC MC0: 1 CE memory read error on CPU_SrcID#0_MC#0_Chan#1_DIMM#0 (x)") == []
    uncorrectable = "[ 5.0] EDAC MC3: 1 UE memory read error on CPU_SrcID#1_MC#1_Chan#2_DIMM#0 (x)"
    assert "edac-uncorrectable" in judge.fired(uncorrectable)  # (the pattern table's edac_ue row fires too)


def test_triggers_are_configurable() -> None:
    judge = LineJudge(triggers.resolve(["oom-kill"]))
    oom = "[ 9.0] Out of memory: Killed process 4242 (python3) total-vm:1kB"
    assert judge.fired(oom) == ["oom-kill"]
    assert judge.fired("[ 9.1] NVRM: Xid (PCI:0000:3b:00): 79, GPU has fallen off the bus.") == []
    assert triggers.resolve(["default,oom-kill"])[-1] == "oom-kill"
    assert triggers.resolve([]) == triggers.DEFAULT_TRIGGERS
    with pytest.raises(ValueError, match="unknown trigger 'xdi'"):
        triggers.resolve(["xdi"])


def test_quiet_lines_fire_nothing_and_the_memo_stays_bounded() -> None:
    judge = LineJudge(memo_limit=8)
    for number in range(100):
        assert judge.fired(f"[ {number}.0] NVRM: GPU at PCI:0000:{number:02x}:00: GPU-{number}") == []
        assert judge.fired(f"[ {number}.0] systemd[1]: Started session-{number}.scope") == []
    assert len(judge.memo) <= 8


def test_the_hints_cover_every_anchor_of_the_parser() -> None:
    """may_hold_message is a cheap superset of the parser's anchor: each literal alternative holds a hint."""
    pattern = patterns._ANCHOR.pattern
    for alternative in pattern.split("|"):
        literal = re.sub(r"\\(.)", r"\1", alternative)
        assert kernel_log.may_hold_message(literal), alternative
    assert not kernel_log.may_hold_message("systemd[1]: Started session-1.scope")


def test_a_line_the_pattern_table_says_needs_a_reset_fires() -> None:
    heartbeat = (
        "[   24.302465] NVRM: GPU6 _kgspIsHeartbeatTimedOut: Heartbeat timed out, currentTimeMs 812751949 "
        "heartbeat 1899482 heartbeatWithOffsetMs 812745879 diff 6070 timeout 5200"
    )  # fixtures/corpus-extra/kernel-log: gsp-heartbeat-timeout-membar-gh100-ogkm1230.txt
    judge = LineJudge()
    assert judge.fired(heartbeat) == ["pattern-action"]
    taint = "[    5.1] nvidia: loading out-of-tree module taints kernel."  # harmless in the table
    assert judge.fired(taint) == []


def test_a_line_is_judged_by_its_first_judge_chars_so_a_storm_of_long_lines_cannot_stall_the_follower() -> None:
    long_lines = [f"[ 11.0] NVRM: Xid (PCI:0000:3b:00): {n}, pid=1, name=x " + "z" * 16000 for n in range(60)]
    judge = LineJudge()
    done = threading.Event()
    fired: list[list[str]] = []

    def judge_all() -> None:
        fired.extend(judge.fired(line) for line in long_lines)
        done.set()

    threading.Thread(target=judge_all, daemon=True).start()
    assert done.wait(WATCHDOG), "judging long lines stalled (a regex searched the whole 16 KiB line)"
    assert all(names == ["xid"] for names in fired)
    xid = "[ 12.0] NVRM: Xid (PCI:0000:3b:00): 79, pid=1, name=python, GPU has fallen off the bus."
    assert judge.fired("x" * triggers.JUDGE_CHARS + xid) == []  # text past what the kernel can log is not judged
