"""A cheap read cites the full read's output instead of copying it (issue 46 item 4, "the bundle stays whole").

Its carried.json entry names the full read's bundle (id and manifest sha256) and the output file in it; the
store's row stays the full read's, so every later cheap read cites the same file, a replay reads it from the
bundle beside, `postmortem --verify` holds it to that bundle's manifest, and `bundles --prune` keeps it."""

from __future__ import annotations

import json
import shutil
import sqlite3
from pathlib import Path

import pytest

from nightowl.engine.incremental import CARRIED, cited_bundles
from nightowl.history import cursors
from nightowl.library import runbooks
from nightowl.postmortem.carried_chain import verify_carried
from nightowl.run import RunResult, RunSettings, run_and_save
from nightowl.transports.replay import ReplayTransport
from tests.engine.test_cheap_forms import XML, drop_saved, entry, install_node, smi_calls, sweep


@pytest.fixture
def node(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    return install_node(tmp_path, monkeypatch)


def replay(bundle: Path, out: Path) -> RunResult:
    return run_and_save(
        runbooks.load("node-health"),
        {"node": lambda: ReplayTransport(bundle / "hosts" / "node", host="node")},
        out,
        settings=RunSettings(drafts=False, status_update=False),
    )


def test_every_cheap_read_cites_the_full_reads_file_and_the_store_keeps_the_full_reads_row(node: Path) -> None:
    first, second, third = sweep(node), sweep(node), sweep(node)
    assert first.bundle and second.bundle and third.bundle
    cited = entry(first)["state"]
    assert entry(second)["read"] == entry(third)["read"] == "cheap"
    for later in (second, third):
        assert "carried_text" not in entry(later) and "keep" not in entry(later)
        assert entry(later)["carried_from"]["bundle"] == first.bundle.name
        assert entry(later)["carried_file"] == "hosts/node/nvidia-smi.out"
        assert cited_bundles(later.bundle) >= {first.bundle.name}  # bundles --prune keeps the full read
    assert (first.bundle / "hosts" / "node" / "nvidia-smi.out").read_text() == XML
    saved = cursors.load(node / "history.sqlite3", "node", "nvidia-smi")
    assert saved is not None and saved.bundle_id == first.bundle.name and saved.state["full_at"] == cited["full_at"]
    assert verify_carried(third.bundle) == ([], [])
    assert replay(third.bundle, node / "replayed").runs[0].verdict == third.runs[0].verdict
    # a carried.json of a sweep of many cheap hosts no longer grows with their full texts
    assert len((third.bundle / CARRIED).read_bytes()) < len(XML) / 10


def test_a_cited_file_that_changed_or_is_gone_is_told_and_a_replay_cannot_judge_without_it(node: Path) -> None:
    first, second = sweep(node), sweep(node)
    assert first.bundle and second.bundle
    kept = node / "elsewhere"
    shutil.move(first.bundle, kept)
    problems, notes = verify_carried(second.bundle)
    assert problems == [] and any("not beside this bundle" in note for note in notes), notes
    replayed = replay(second.bundle, node / "replayed")
    smi = replayed.runs[0].collections["nvidia-smi"]
    assert smi.status == "error" and "not beside this bundle" in str(smi.reason)
    assert (replayed.runs[0].verdict or {}).get("id") != (second.runs[0].verdict or {}).get("id")
    shutil.move(kept, first.bundle)
    output = first.bundle / "hosts" / "node" / "nvidia-smi.out"
    output.chmod(0o600)
    output.write_text(XML.replace("<product_name>", "<product_name>X", 1))
    problems, _ = verify_carried(second.bundle)
    assert problems and "not the output its manifest lists" in problems[0], problems


def test_a_saved_full_read_with_no_file_to_cite_is_read_in_full_again(node: Path) -> None:
    sweep(node)
    drop_saved(node, "nvidia-smi", "text_file")
    again = sweep(node)
    assert smi_calls(node) == ["-q -x"] and "in no bundle to cite" in entry(again)["why_full"]


def add_journal_line(folder: Path, line: str) -> None:
    state = json.loads((folder / "journal.json").read_text())
    state["entries"].append([state["entries"][-1][0] + 1, line])
    (folder / "journal.json").write_text(json.dumps(state))


def test_news_in_the_same_runs_kernel_log_read_makes_the_nvidia_smi_read_full_at_once(node: Path) -> None:
    """The cheap form does not wait a round for the log: nvidia-smi's read starts after the kernel log's, and a
    line the log reader keeps (an Xid) makes it the full form in the same run (engine/incremental.waves)."""
    sweep(node)
    quiet = sweep(node)
    assert entry(quiet)["read"] == "cheap"
    add_journal_line(node, "2024-06-01T10:05:00+0000 node kernel: usb 1-9: new device")
    assert entry(sweep(node))["read"] == "cheap"  # a line the log reader does not keep is no news
    add_journal_line(node, "2024-06-01T10:06:00+0000 node kernel: NVRM: Xid (PCI:0000:5a:00): 13, pid=7, Graphics")
    news = sweep(node)
    assert smi_calls(node) == ["-q -x"]  # the full form alone: the cheap one was never asked
    assert entry(news)["read"] == "full" and "kernel-log read found news" in entry(news)["why_full"]
    assert entry(news, "fabric")["read"] == "full"
    after = sweep(node)  # the log quiet again, the full read found nothing: cheap again
    assert entry(after)["read"] == "cheap"


def test_a_cheap_read_takes_the_full_reads_parsed_facts_from_the_store_instead_of_parsing_its_text_again(
    node: Path,
) -> None:
    first = sweep(node)
    saved = cursors.load(node / "history.sqlite3", "node", "nvidia-smi")
    assert saved is not None
    facts = first.runs[0].collections["nvidia-smi"].facts
    assert facts is not None and saved.state["parsed"] == {k: v for k, v in facts.items() if k != "read_form"}
    assert "parsed" not in entry(first)["state"]  # the store's, not the bundle's: carried.json cites the text
    # the kept facts are what a cheap read judges: a marker put there is in its facts
    conn = sqlite3.connect(node / "history.sqlite3")
    state = {**saved.state, "parsed": {**saved.state["parsed"], "marker": "from-the-store"}}
    conn.execute("UPDATE cursors SET state = ? WHERE kind = 'nvidia-smi'", (json.dumps(state),))
    conn.commit()
    conn.close()
    second = sweep(node)
    smi = second.runs[0].collections["nvidia-smi"].facts
    assert entry(second)["read"] == "cheap" and smi is not None and smi["marker"] == "from-the-store"
    assert "parsed" not in entry(second)["state"] and "parsed" not in entry(second)["state_before"]
