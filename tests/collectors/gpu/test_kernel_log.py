"""kernel-log collector: recorded cases, log formats, burst collapsing, facts, robustness."""

from __future__ import annotations

import io
import re
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nightowl.collectors import get_collector
from nightowl.collectors.base import to_jsonable
from nightowl.collectors.gpu import kernel_log
from nightowl.collectors.gpu.kernel_log import parser as kernel_log_parser
from tests.helpers import ROOT, assert_subset, load_cases

CASES = load_cases("kernel-log")


def parsed(text: str) -> dict[str, Any]:
    return to_jsonable(kernel_log.parse(text))


def events_of(text: str) -> list[dict[str, Any]]:
    return parsed(text)["events"]


def test_collector_declaration() -> None:
    collector = get_collector("kernel-log")
    assert collector is kernel_log.COLLECTOR
    assert collector.commands == (
        ("journalctl", "-k", "-b", "--no-pager", "-o", "short-iso", "--since={since}"),
        ("journalctl", "-k", "-b", "--no-pager", "-o", "short-iso"),
        ("dmesg", "-T"),
        ("dmesg",),
        ("sudo", "-n", "--", "dmesg", "-T"),
    )
    assert collector.timeout == 20 and not collector.invasive


# --- formats: each line is the same Xid in another prefix ------------------------------------------
XID_MESSAGE = "NVRM: Xid (PCI:0000:3b:00): 95, pid=2345, name=python, Uncontained: FBHUB. RST: Yes, D-RST: No"


@pytest.mark.parametrize(
    ("prefix", "time"),
    [
        ("", None),
        ("[  219.470994] ", "219.470994"),
        ("[Tue Mar  5 10:00:00 2024] ", "2024-03-05T10:00:00"),
        ("2024-03-05T10:00:00,123456+00:00 ", "2024-03-05T10:00:00.123456+00:00"),
        ("kern  :err   : 2024-03-05T10:00:00,123456+0100 ", "2024-03-05T10:00:00.123456+01:00"),
        ("2024-03-05T10:00:00+0000 gpu-node-7 kernel: ", "2024-03-05T10:00:00+00:00"),
        ("Mar  5 10:00:00 gpu-node-7 kernel: ", "Mar  5 10:00:00"),
        ("mar 05 10:00:00 węzeł kernel: ", "mar 05 10:00:00"),  # journald, Polish locale
        ("paź 05 10:00:00 węzeł kernel: ", "paź 05 10:00:00"),
        ("3月 05 10:00:00 ノード kernel: ", "3月 05 10:00:00"),
        ("[Di Mär  5 10:00:00 2024] ", "Di Mär  5 10:00:00 2024"),  # not English: kept as written
        ("10.0.0.7: kern: warning: [2024-03-05T10:00:00.291660856Z]: ", "2024-03-05T10:00:00.291660+00:00"),
        ("kernel: ", None),
    ],
)
def test_xid_line_in_every_format(prefix: str, time: str | None) -> None:
    events = events_of(prefix + XID_MESSAGE)
    assert_subset(
        events,
        [
            {
                "kind": "xid",
                "code": 95,
                "pci": "0000:3b:00",
                "time": time,
                "pid": 2345,
                "process": "python",
                "text": "Uncontained: FBHUB. RST: Yes, D-RST: No",
            }
        ],
    )


def test_syslog_with_monotonic_keeps_both_times() -> None:
    line = "Dec  2 11:38:47 worker4 kernel: [  219.470994] " + XID_MESSAGE
    assert_subset(events_of(line), [{"time": "Dec  2 11:38:47", "monotonic": "219.470994"}])


def test_legacy_xid_without_pci_word_and_pid() -> None:
    event = events_of("[ 12.3] NVRM: Xid (0000:01:00): 79, GPU has fallen off the bus.")[0]
    assert_subset(event, {"code": 79, "pci": "0000:01:00", "pid": None, "process": None})


def test_unknown_pid_and_name_are_null() -> None:
    event = events_of("NVRM: Xid (PCI:0000:43:00): 13, pid='<unknown>', name=<unknown>, Graphics Exception")[0]
    assert_subset(event, {"pid": None, "process": None, "text": "Graphics Exception"})


@pytest.mark.parametrize(
    ("text", "action"),
    [
        ("GPU recovery action changed from 0x0 (None) to 0x2 (Node Reboot Required)", "node-reboot"),
        ("GPU recovery action changed from 0x0 (None) to 0x1 (GPU Reset Required)", "gpu-reset"),
        ("GPU recovery action changed from 0x0 (None) to 0x4 (Drain and Reset)", "drain-and-reset"),
        ("GPU recovery action changed from 0x0 (None) to 0x3 (Drain P2P)", "drain-p2p"),
        ("GPU recovery action changed from 0x1 (GPU Reset Required) to 0x0 (None)", "none"),
    ],
)
def test_xid_154_recovery_action(text: str, action: str) -> None:
    result = kernel_log.parse(f"NVRM: Xid (PCI:0000:3b:00): 154, {text}")
    facts = kernel_log.facts(result)
    assert facts["recovery_action"] == action
    assert facts["recovery_action_gpus"] == ([] if action == "none" else ["0000:3b:00"])


def test_strictest_recovery_action_wins() -> None:
    log = "\n".join(
        [
            "NVRM: Xid (PCI:0000:3b:00): 154, GPU recovery action changed from 0x0 (None) to "
            "0x2 (Node Reboot Required)",
            "NVRM: Xid (PCI:0000:5a:00): 154, GPU recovery action changed from 0x0 (None) to 0x1 (GPU Reset Required)",
        ]
    )
    facts = kernel_log.facts(kernel_log.parse(log))
    assert facts["recovery_action"] == "node-reboot"
    assert facts["recovery_actions_by_gpu"] == {"0000:3b:00": "node-reboot", "0000:5a:00": "gpu-reset"}
    assert facts["xid_judgement"]["action"] == "reboot-node"


def test_oom_kills_and_new_style_aer() -> None:
    log = "\n".join(
        [
            "[ 13.0] Memory cgroup out of memory: Killed process 4242 (vllm) total-vm:1234kB, anon-rss:100kB",
            "[ 14.0] Out of memory: Killed process 4243 (python3) total-vm:1234kB, anon-rss:100kB",
            "[ 15.0] pcieport 0000:00:03.1: AER: Multiple Corrected error message received from 0000:01:00.0",
            "[ 15.1] nvidia 0000:01:00.0: PCIe Bus Error: severity=Corrected, type=Physical Layer, (Receiver ID)",
            "[ 15.2] nvidia 0000:01:00.0:   device [10de:2204] error status/mask=00000001/0000a000",
            "[ 15.3] nvidia 0000:01:00.0:    [ 0] RxErr                  (First)",
        ]
    )
    result = kernel_log.parse(log)
    assert_subset(
        to_jsonable(result)["events"],
        [
            {"kind": "oom_kill", "pid": 4242, "process": "vllm"},
            {"kind": "oom_kill", "pid": 4243, "process": "python3"},
            {"kind": "pcie_aer", "pci": "0000:01:00", "severity": "corrected", "lines": {"__len__": 3}},
        ],
    )
    facts = kernel_log.facts(result)
    assert (facts["oom_kills"], facts["pcie_aer_count"]) == (2, 1)


def test_indented_continuation_joins_the_event_before_it() -> None:
    log = "\n".join(
        [
            "[ 1.0] NVRM: Xid (PCI:0000:3b:00): 119, pid=1, name=a, Timeout waiting for RPC from GSP!",
            "        NVRM: Expected function 76 (GSP_RM_CONTROL)",
        ]
    )
    assert_subset(events_of(log), [{"code": 119, "lines": ["Expected function 76 (GSP_RM_CONTROL)"]}])


# --- bursts ---------------------------------------------------------------------------------------------
def test_identical_events_collapse_with_count_and_times() -> None:
    lines = [f"[{100 + i}.000000] {XID_MESSAGE}" for i in range(1000)]
    events = events_of("\n".join(lines))
    assert_subset(events, [{"code": 95, "count": 1000, "first_time": "100.000000", "last_time": "1099.000000"}])


def test_different_processes_stay_apart_and_are_flagged() -> None:
    log = "\n".join(
        f"NVRM: Xid (PCI:0000:3b:00): 13, pid={pid}, name={name}, Graphics Exception"
        for pid, name in ((1, "a"), (2, "b"), (2, "b"))
    )
    result = kernel_log.parse(log)
    assert [e["count"] for e in result.events] == [1, 2]
    assert kernel_log.facts(result)["app_xid_repeating_gpus"] == ["0000:3b:00"]


def test_one_program_restarted_under_new_pids_does_not_point_at_the_gpu() -> None:
    """Xid 13 from pids 11, 12 and 13 of one program is that program's bug, not the GPU's."""
    log = "\n".join(
        f"NVRM: Xid (PCI:0000:3b:00): 13, pid={pid}, name=python3, Graphics Exception" for pid in (11, 12, 13)
    )
    assert kernel_log.facts(kernel_log.parse(log))["app_xid_repeating_gpus"] == []


def test_memory_is_bounded_by_distinct_events() -> None:
    """800k Xid 95 lines with 29 distinct texts (NVSentinel #1120), scaled down: 29 events."""
    distinct = [
        f"[{{t}}.0] NVRM: Xid (PCI:0000:3b:00): 95, pid='<unknown>', name=<unknown>, unit {n}" for n in range(29)
    ]
    stream = (distinct[i % 29].format(t=i) for i in range(50_000))
    result = kernel_log.parse_lines(stream)
    assert len(result.events) == 29
    assert sum(e["count"] for e in result.events) == 50_000
    assert result.lines_read == 50_000


def test_parse_lines_streams_a_file_like_parse() -> None:
    text = (ROOT / CASES[0][1]["input"]).read_text(encoding="utf-8")
    for _, case in CASES:
        text = (ROOT / case["input"]).read_text(encoding="utf-8")
        assert to_jsonable(kernel_log.parse_lines(io.StringIO(text))) == to_jsonable(kernel_log.parse(text))


def test_distinct_event_cap_warns(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(kernel_log_parser, "MAX_DISTINCT_EVENTS", 5)
    result = kernel_log.parse("\n".join(f"NVRM: Xid (PCI:0000:3b:00): 13, pid={i}, name=a, x" for i in range(8)))
    assert len(result.events) == 5
    assert any("3 events beyond 5" in w for w in result.warnings)


# --- burst memo: a message seen before is looked up by its text, whatever stamp it carries ----------------
AER_REPORT = (
    "pcieport 0000:00:02.0: AER: Corrected error received: 0000:00:02.0",
    "pcieport 0000:00:02.0: PCIe Bus Error: severity=Corrected, type=Data Link Layer, (Transmitter ID)",
    "pcieport 0000:00:02.0:   device [8086:6f04] error status/mask=00001000/00002000",
    "pcieport 0000:00:02.0:    [12] Replay Timer Timeout",
)


@pytest.mark.parametrize(
    ("stamps", "first", "last"),
    [
        (["[  100.000001] ", "[  200.000002] ", "[  300.000003] "], "100.000001", "300.000003"),
        (
            ["2024-03-05T10:00:00+0000 gpu-7 kernel: ", "2024-03-05T10:05:00+0000 gpu-7 kernel: "] * 2,
            "2024-03-05T10:00:00+00:00",
            "2024-03-05T10:05:00+00:00",
        ),
        (["Mar  5 10:00:00 gpu-7 kernel: ", "Mar  5 10:00:09 gpu-7 kernel: "], "Mar  5 10:00:00", "Mar  5 10:00:09"),
        (["[Tue Mar  5 10:00:00 2024] ", "[Tue Mar  5 11:00:00 2024] "], "2024-03-05T10:00:00", "2024-03-05T11:00:00"),
    ],
)
def test_aer_storm_collapses_under_changing_stamps(stamps: list[str], first: str, last: str) -> None:
    log = "\n".join(stamp + line for stamp in stamps for line in AER_REPORT)
    [event] = events_of(log)
    assert_subset(
        event,
        {
            "kind": "pcie_aer",
            "pci": "0000:00:02",
            "severity": "corrected",
            "count": len(stamps),
            "first_time": first,
            "last_time": last,
            "lines": {"__len__": 3},
        },
    )


def test_blank_prefixed_repeat_still_continues_the_event_before() -> None:
    log = "\n".join(
        [
            "[ 1.0] NVRM: Xid (PCI:0000:3b:00): 119, pid=1, name=a, Timeout waiting for RPC from GSP!",
            "        NVRM: Expected function 76 (GSP_RM_CONTROL)",
            "[ 2.0] NVRM: Xid (PCI:0000:3b:00): 119, pid=1, name=a, Timeout waiting for RPC from GSP!",
            "        NVRM: Expected function 76 (GSP_RM_CONTROL)",
        ]
    )
    [event] = events_of(log)
    assert_subset(event, {"code": 119, "count": 2, "lines": ["Expected function 76 (GSP_RM_CONTROL)"] * 2})


def test_a_rest_opening_with_a_pci_address_reads_as_before() -> None:
    """Such a line takes the general path: the stamp is then part of what the device pattern sees."""
    lines = ["[ 15.4] 0000:01:00.0: AER: Corrected error received: 0000:01:00.0"] * 2
    events = events_of("\n".join(lines))
    assert [e["kind"] for e in events] == ["pcie_aer"]
    assert events[0]["count"] == 2


def test_continuation_lines_are_bounded() -> None:
    log = "\n".join(["[ 1.0] NVRM: The NVIDIA GPU 0000:b3:00.0"] + [f"       NVRM: part {n}" for n in range(100)])
    [event] = events_of(log)
    assert event["kind"] == "other_nvrm"
    assert "part 31" in event["text"] and "part 32" not in event["text"]


# Stamps and rests that exercise the memo of line shapes (every stamp format, rests that open with a
# PCI address, AER detail lines with and without a device, blank and odd-blank prefixes).
MEMO_STAMPS = [
    "",
    "[ 1.0] ",
    "[   10.735323] ",
    "[Fri Apr  5 21:29:39 2024] ",
    "[Wed Dec 11 01:02:03 2024] ",
    "2024-03-05T10:00:00+0000 ",
    "2024-03-05T10:00:00,123456+01:00 host kernel: ",
    "Mar  5 10:00:00 host kernel: ",
    "Dec 12 10:00:00 ",
    "   ",
    "\t",
    "  [ 2.5] ",
    "\x0b",
]
MEMO_RESTS = [
    *AER_REPORT,
    "0000:00:02.0: AER: Corrected error received: 0000:00:02.0",
    "0000:00:02.0:   device [8086:6f04] error status/mask=00001000/00002000",
    "kernel: [12] RxErr",
    "broadcast error_detected message",
    "nvidia 0000:02:00.0: device has no AER-aware driver",
    XID_MESSAGE,
    "NVRM: The NVIDIA GPU 0000:b3:00.0",
    "NVRM: (PCI ID: 10de:26b5) installed in this system has",
    "NVRM: Expected function 76 (GSP_RM_CONTROL)",
    "NVRM: GPU at PCI:0000:3b:00: GPU-efbdfde9-5798-a6e7-4c46-12518fa15375",
    "NVRM: GPU Board Serial Number: 1650423013443",
    "nvidia-nvswitch2: SXid (PCI:0000:07:00.0): 20034, Fatal, Link 37 LTSSM Fault Up",
    "nvidia-nvswitch2: SXid (PCI:0000:07:00.0): 20034, Severity 1 Engine instance 60 Sub-engine instance 00",
    "pci 0000:04:00.0: 252.048 Gb/s available PCIe bandwidth, limited by 16.0 GT/s PCIe x16 link at "
    "0000:01:00.0 (capable of 504.112 Gb/s with 32.0 GT/s PCIe x16 link)",
    "Memory cgroup out of memory: Killed process 4242 (vllm) total-vm:1234kB",
    "NVRM: Xid (PCI:0000:3b:00): garbage",
    "an ordinary line",
    "",
]


@settings(max_examples=100, deadline=None)
@given(
    st.lists(st.tuples(st.sampled_from(MEMO_STAMPS), st.sampled_from(MEMO_RESTS)), max_size=30),
    st.integers(min_value=1, max_value=3),
)
def test_memoized_paths_read_like_the_general_path(pairs: list[tuple[str, str]], repeats: int) -> None:
    """The shortcuts (burst fast path, line-shape memo) change speed, never the result."""
    log = "\n".join([stamp + rest for stamp, rest in pairs] * repeats)
    fast = to_jsonable(kernel_log.parse_lines(io.StringIO(log)))
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(kernel_log_parser, "_SEEN_LIMIT", 0)  # no burst fast path
        patch.setattr(kernel_log_parser, "_STAMP", re.compile(""))  # no stamp cut: every line split afresh
        general = to_jsonable(kernel_log.parse_lines(io.StringIO(log)))
    assert fast == general


# --- facts ------------------------------------------------------------------------------------------------
def test_facts_on_a_mixed_log() -> None:
    log = "\n".join(
        [
            "NVRM: Xid (PCI:0000:5a:00): 48, pid='<unknown>', name=<unknown>, An uncorrectable DBE",
            "NVRM: Xid (PCI:0000:5a:00): 63, pid='<unknown>', name=<unknown>, Row Remapper: New row marked",
            "NVRM: Xid (PCI:0000:5a:00): 45, pid=7, name=python, Ch 00000001",
            "NVRM: Xid (PCI:0000:6b:00): 74, pid=8, name=python, NVLink: fatal error detected on link 3",
            "NVRM: Xid (PCI:0000:6b:00): 999, pid=8, name=python, something new",
        ]
    )
    facts = kernel_log.facts(kernel_log.parse(log))
    assert_subset(
        facts,
        {
            "xid_codes": [45, 48, 63, 74, 999],
            "unknown_xid_codes": [999],
            "nvlink_xid_codes": [74],
            "primary_xids": [48, 63, 74, 999],
            "xids_by_gpu": {"0000:5a:00": [45, 48, 63], "0000:6b:00": [74, 999]},
            "catalog_action": "escalate",
            "recovery_action": None,
            "xid_judgement": {"gpu_actions": {"0000:5a:00": "drain-and-reset", "0000:6b:00": "escalate"}},
        },
    )


def test_facts_accept_the_json_form() -> None:
    result = kernel_log.parse(XID_MESSAGE)
    assert kernel_log.facts(to_jsonable(result)) == kernel_log.facts(result)


# --- robustness ---------------------------------------------------------------------------------------------
def test_empty_input_warns() -> None:
    result = parsed("")
    assert result["events"] == [] and result["warnings"]


def test_unreadable_xid_line_is_a_warning() -> None:
    result = parsed("NVRM: Xid (PCI:0000:3b:00): garbage")
    assert result["events"] == [] and "garbage" in result["warnings"][0]


SAMPLE_TEXTS = [(ROOT / case["input"]).read_text(encoding="utf-8") for _, case in CASES]


@settings(max_examples=100, deadline=None)
@given(st.lists(st.sampled_from([line for text in SAMPLE_TEXTS for line in text.splitlines()]), max_size=60))
def test_shuffled_sample_lines_never_raise(lines: list[str]) -> None:
    result = kernel_log.parse("\n".join(lines))
    facts = kernel_log.facts(result)
    assert facts["xid_judgement"]["action"] in ("none", *facts["xid_judgement"]["gpu_actions"].values())
