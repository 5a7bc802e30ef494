"""Reading a host's kernel log from where the last read stopped (issue 46 items 1, 2 and 4).

The host is this machine (the local transport) with `journalctl` and `dmesg` stand-ins first on PATH that keep
a real cursor and a real ring (cursor_standins.py); the runs are `xid` runs through ``run_and_save`` with a
history store, as `sweep` and `check` make them."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from nightowl import history
from nightowl.engine.incremental import CARRIED
from nightowl.history import cursors, store
from nightowl.library import runbooks
from nightowl.run import RunHooks, RunResult, RunSettings, run_and_save
from nightowl.transports.local import LocalTransport
from nightowl.transports.replay import ReplayTransport
from tests.history.cursor_standins import Journal, Ring, install

BOOT = [
    "2024-06-01T10:00:00+0000 node kernel: Linux version 6.8.0 (buildd@lcy02) #1 SMP",
    "2024-06-01T10:00:05+0000 node kernel: NVRM: loading NVIDIA UNIX x86_64 Kernel Module  550.54.15",
] + [f"2024-06-01T10:{n // 60:02d}:{n % 60:02d}+0000 node kernel: usb 1-{n}: new device" for n in range(10, 400)]
XID79 = "2024-06-01T11:00:00+0000 node kernel: NVRM: Xid (PCI:0000:5a:00): 79, pid=1234, GPU has fallen off the bus."
XID13 = "2024-06-01T11:30:00+0000 node kernel: NVRM: Xid (PCI:0000:3b:00): 13, pid=77, name=python3, Graphics Exception"

STORE = "history.sqlite3"  # the node's history store, in its folder


@pytest.fixture
def node(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    for name, value in install(tmp_path).items():
        monkeypatch.setenv(name, value)
    return tmp_path


def sweep(folder: Path, full: bool = False, with_cursors: bool = True) -> RunResult:
    book = cursors.book(folder / STORE, full=full) if with_cursors else None
    return run_and_save(
        runbooks.load("xid"),
        {"node": lambda: LocalTransport("node")},
        folder / "out",
        settings=RunSettings(drafts=False, status_update=False),
        hooks=RunHooks(cursors=book),
        context=history.run_context(folder / STORE),  # the store a sweep's command chose
    )


def kernel_log(result: RunResult) -> dict[str, Any]:
    facts = result.runs[0].collections["kernel-log"].facts
    assert facts is not None
    return facts


def carried(result: RunResult) -> dict[str, Any]:
    assert result.bundle is not None
    return json.loads((result.bundle / CARRIED).read_text())["hosts"]["node"]["kernel-log"]  # type: ignore[no-any-return]


def result_of(result: RunResult, kind: str) -> dict[str, Any]:
    assert result.bundle is not None
    return json.loads((result.bundle / CARRIED).read_text())["hosts"]["node"][kind]  # type: ignore[no-any-return]


def fetched(result: RunResult) -> str:
    assert result.bundle is not None
    return (result.bundle / "hosts" / "node" / "kernel-log.out").read_text()


def sha256_of(bundle: Path | None) -> str:
    assert bundle is not None
    return (bundle / "manifest.sha256").read_text().split()[0]


def same_verdict(result: RunResult) -> dict[str, Any]:
    """The verdict and the kernel log's evidence (a replayed nvidia-smi error reads its reason from a file)."""
    verdict = dict(result.runs[0].verdict or {})
    evidence = verdict.pop("evidence", [])
    return {**verdict, "evidence": [item for item in evidence if "kernel_log" in item["fact"]]}


def test_an_xid_written_between_two_reads_is_in_the_second_and_only_the_new_lines_are_fetched(node: Path) -> None:
    journal = Journal(node / "journal.json")
    journal.add(*BOOT)
    first = sweep(node)
    assert carried(first)["read"] == "full" and "no position" in carried(first)["why_full"]
    assert kernel_log(first)["xid_codes"] == []
    journal.add(XID79)
    second = sweep(node)
    assert kernel_log(second)["xid_codes"] == [79]
    assert second.runs[0].verdict is not None and second.runs[0].verdict["id"] == "gpu-fell-off-bus"
    entry = carried(second)
    assert entry["read"] == "incremental" and entry["why_full"] is None
    assert entry["carried_from"] == {"bundle": first.bundle.name, "sha256": sha256_of(first.bundle)}  # type: ignore[union-attr]
    # what this read fetched: the entry read last (the proof it follows on), the new one and the cursor
    assert fetched(second).splitlines()[1:] == [XID79, fetched(second).splitlines()[-1]]
    assert len(fetched(second)) < 0.05 * len(fetched(first))
    # the earlier boots (none here) are read once per boot list: the second read asks for the list alone
    assert result_of(second, "kernel-log-boots")["read"] == "incremental"
    assert result_of(second, "kernel-log-boots")["argv"] == ["journalctl", "--list-boots", "--no-pager"]
    journal.add(XID13)
    third = sweep(node)
    assert kernel_log(third)["xid_codes"] == [13, 79]  # the earlier Xid is carried, not re-read
    assert carried(third)["carried_from"]["bundle"] == second.bundle.name  # type: ignore[union-attr]
    # the same facts a full read of the whole log gives (no cursor: the ordinary command)
    whole = sweep(node, with_cursors=False)
    assert {k: v for k, v in kernel_log(third).items() if k not in ("lines_read", "coverage")} == {
        k: v for k, v in kernel_log(whole).items() if k not in ("lines_read", "coverage")
    }
    assert third.runs[0].verdict == whole.runs[0].verdict


@pytest.mark.parametrize(
    ("gap", "why"),
    [
        ("vacuum", "no longer starts at the entry read last"),
        ("reboot", "a new boot"),
        ("full", "forced full read"),
    ],
)
def test_a_gap_that_cannot_be_proven_closed_is_a_full_read_and_the_bundle_says_why(
    node: Path, gap: str, why: str
) -> None:
    journal = Journal(node / "journal.json")
    journal.add(*BOOT)
    sweep(node)
    if gap == "vacuum":
        journal.vacuum(len(BOOT))  # the entry the cursor names is gone
    elif gap == "reboot":
        journal.reboot("boot-2")
        journal.add(*BOOT[:2])
    journal.add(XID79)
    after = sweep(node, full=gap == "full")
    entry = carried(after)
    assert entry["read"] == "full" and why in entry["why_full"] and entry["carried_text"] == ""
    assert kernel_log(after)["xid_codes"] == [79]
    assert after.runs[0].verdict is not None and after.runs[0].verdict["id"] == "gpu-fell-off-bus"


def test_the_ring_is_read_from_its_last_stamp_and_a_wrapped_ring_is_read_in_full(node: Path) -> None:
    Journal(node / "journal.json")  # no entries: a container without the host's journal
    ring = Ring(node / "ring.json", size=50)
    ring.add("Linux version 6.8.0", "NVRM: loading NVIDIA UNIX x86_64 Kernel Module  550.54.15", "usb 1-1: new")
    first = sweep(node)
    assert carried(first)["state"]["source"] == "dmesg"
    ring.add(XID79.split("kernel: ", 1)[1])
    second = sweep(node)
    assert carried(second)["read"] == "incremental" and kernel_log(second)["xid_codes"] == [79]
    ring.add(*(f"usb 1-{n}: new device" for n in range(60)))  # 60 records in a ring of 50: the position is gone
    ring.add(XID13.split("kernel: ", 1)[1])
    third = sweep(node)
    assert carried(third)["read"] == "full" and "wrapped" in carried(third)["why_full"]
    assert kernel_log(third)["xid_codes"] == [13]  # the ring no longer holds the 79: a full read says so too


def test_a_replay_of_an_incremental_bundle_gives_the_same_verdict_and_facts(node: Path) -> None:
    journal = Journal(node / "journal.json")
    journal.add(*BOOT)
    sweep(node)
    journal.add(XID79)
    second = sweep(node)
    assert second.bundle is not None and carried(second)["read"] == "incremental"
    replayed = run_and_save(
        runbooks.load("xid"),
        {"node": lambda: ReplayTransport(second.bundle / "hosts" / "node")},  # type: ignore[operator]
        node / "replays",
        settings=RunSettings(drafts=False, status_update=False),
    )
    assert same_verdict(replayed) == same_verdict(second)
    assert kernel_log(replayed)["xid_codes"] == [79]
    # a carried text edited after the fact is refused, never read
    document = json.loads((second.bundle / CARRIED).read_text())
    document["hosts"]["node"]["kernel-log"]["carried_text"] += XID13 + "\n"
    os.chmod(second.bundle / CARRIED, 0o600)
    (second.bundle / CARRIED).write_text(json.dumps(document))
    edited = run_and_save(
        runbooks.load("xid"),
        {"node": lambda: ReplayTransport(second.bundle / "hosts" / "node")},  # type: ignore[operator]
        node / "replays",
        settings=RunSettings(drafts=False, status_update=False),
    )
    assert edited.runs[0].collections["kernel-log"].status == "error"


def test_a_carried_secret_is_scrubbed_as_the_fetched_output_is(node: Path) -> None:
    journal = Journal(node / "journal.json")
    secret = "2024-06-01T10:00:06+0000 node kernel: NVRM: nvidia-modeset: launched with api_token=s3cr3tvalue42"
    journal.add(*BOOT[:2], secret)
    first = sweep(node)
    assert "s3cr3tvalue42" not in fetched(first)
    journal.add(XID79)
    second = sweep(node)
    entry = carried(second)
    assert "NVRM: nvidia-modeset" in entry["carried_text"] and "s3cr3tvalue42" not in entry["carried_text"]
    assert kernel_log(second)["xid_codes"] == [79]


def test_positions_are_saved_with_the_bundle_that_read_them(node: Path) -> None:
    journal = Journal(node / "journal.json")
    journal.add(*BOOT)
    first = sweep(node)
    path = node / STORE
    saved = cursors.load(path, "node", "kernel-log")
    assert saved is not None and saved.bundle_id == first.bundle.name  # type: ignore[union-attr]
    assert saved.bundle_sha256 == sha256_of(first.bundle) and saved.state["boot_id"] == "boot-1"
    assert store.read(path, "PRAGMA user_version")[0]["user_version"] == store.SCHEMA_VERSION == 4
    assert cursors.forget_bundles(path, [first.bundle.name]) == 2  # type: ignore[union-attr]  # and the boots
    assert cursors.load(path, "node", "kernel-log") is None
    assert store.read(path, "SELECT count(*) AS n FROM cursor_texts")[0]["n"] == 0  # their texts with them


def test_a_store_that_cannot_be_written_costs_only_the_positions(node: Path) -> None:
    journal = Journal(node / "journal.json")
    journal.add(*BOOT)
    book = cursors.book(node / STORE)
    result = run_and_save(
        runbooks.load("xid"), {"node": lambda: LocalTransport("node")}, node / "out",
        settings=RunSettings(drafts=False, status_update=False, history=False), hooks=RunHooks(cursors=book),
    )  # fmt: skip
    assert book is not None and book.staged and result.bundle is not None
    (node / "not-a-store").mkdir()
    said: list[str] = []
    assert cursors.commit(book, result.bundle, node / "not-a-store", said.append) == 0
    assert said and "the next read is full" in said[0]
    assert cursors.commit(book, result.bundle, node / STORE, said.append) == 2  # kernel-log and boots


def test_a_quiet_read_takes_the_last_parses_facts_and_parses_only_its_new_lines(node: Path) -> None:
    """Issue 46: a read whose new lines the kernel log's reader keeps none of (``settled`` and ``quiet``) takes the
    facts the store kept of the last parse (``PARSED``) and parses its new lines alone for what it counts; a replay
    of its bundle, which parses carried + new, gives the same verdict and facts."""
    from nightowl.collectors import get_collector

    journal = Journal(node / "journal.json")
    journal.add(*BOOT, XID79)
    first = sweep(node)
    quiet = [f"2024-06-01T12:00:{n:02d}+0000 node kernel: usb 2-{n}: new device" for n in range(3)]
    journal.add(*quiet)
    collector = get_collector("kernel-log")
    parsed: list[str] = []
    real_parse = collector.parse
    object.__setattr__(collector, "parse", lambda text: parsed.append(text) or real_parse(text))  # a frozen dataclass
    try:
        second = sweep(node)
    finally:
        object.__setattr__(collector, "parse", real_parse)
    assert parsed and all("NVRM" not in text for text in parsed)  # the carried Xid text was not parsed again
    assert carried(second)["read"] == "incremental"
    assert kernel_log(second)["xid_codes"] == [79]
    assert kernel_log(second)["lines_read"] == kernel_log(first)["lines_read"] + len(quiet)
    replayed = run_and_save(
        runbooks.load("xid"),
        {"node": lambda: ReplayTransport(second.bundle / "hosts" / "node", "node")},  # type: ignore[operator]
        node / "replayed",
        settings=RunSettings(drafts=False, status_update=False),
    )
    assert same_verdict(replayed) == same_verdict(second)
    counts = ("lines_read", "coverage")
    assert {k: v for k, v in kernel_log(replayed).items() if k not in counts} == {
        k: v for k, v in kernel_log(second).items() if k not in counts
    }
    journal.add(XID13)  # news again: a full parse of carried + new
    third = sweep(node)
    assert kernel_log(third)["xid_codes"] == [13, 79]
