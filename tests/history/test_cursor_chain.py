"""The bundle stays whole (issue 46 item 4): ``postmortem --verify`` checks the carried.json chain, and
``bundles --prune`` never removes a bundle a kept one still cites."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

from click.testing import CliRunner

from nightowl.cli.bundles_cmd import prune
from nightowl.cli.main import main
from nightowl.engine.incremental import CARRIED
from nightowl.library import runbooks
from nightowl.postmortem.carried_chain import verify_carried
from nightowl.run import RunSettings, run_and_save
from nightowl.transports.replay import ReplayTransport
from tests.history.cursor_standins import Journal
from tests.history.test_cursor_read import BOOT, XID13, XID79, kernel_log, node, sweep

__all__ = ["node"]  # the fixture


def chain(folder: Path) -> list[Path]:
    """Three sweeps of one node: a full read, then two incremental ones, each with a new Xid before it."""
    journal = Journal(folder / "journal.json")
    journal.add(*BOOT)
    bundles = [sweep(folder).bundle]
    for line in (XID79, XID13):
        journal.add(line)
        bundles.append(sweep(folder).bundle)
    assert all(b is not None for b in bundles)
    return bundles  # type: ignore[return-value]


def writable(path: Path) -> Path:
    os.chmod(path, 0o600)
    return path


def test_verify_follows_the_chain_back_to_the_full_read(node: Path) -> None:
    last = chain(node)[-1]
    assert verify_carried(last) == ([], [])
    result = CliRunner().invoke(main, ["postmortem", "--verify", str(last)])
    assert result.exit_code == 0, result.output


def test_verify_finds_a_carried_text_that_is_not_what_the_earlier_bundle_read(node: Path) -> None:
    first, second, last = chain(node)
    # the earlier bundle's fetched output edited: what it read no longer carries on to this bundle's text
    fetched = writable(second / "hosts" / "node" / "kernel-log.out")
    fetched.write_text(fetched.read_text().replace("): 79,", "): 48,"))
    problems, _ = verify_carried(last)
    assert problems and f"is not what {second.name} read" in problems[0]
    document = json.loads((last / CARRIED).read_text())
    assert document["hosts"]["node"]["kernel-log"]["carried_from"]["bundle"] == second.name
    result = CliRunner().invoke(main, ["postmortem", "--verify", str(last)])
    assert result.exit_code == 1 and "is not what" in result.output


def test_verify_notes_where_the_chain_leaves_the_folder(node: Path) -> None:
    first, second, last = chain(node)
    (second / "manifest.sha256").rename(node / "elsewhere.sha256")
    problems, notes = verify_carried(last)
    assert problems == [] and notes and "not beside this bundle" in notes[0]


def test_prune_keeps_every_bundle_a_kept_one_cites(node: Path) -> None:
    bundles = chain(node)
    out = bundles[0].parent
    lone = sweep(node, with_cursors=False).bundle  # no carried.json: cites nothing, cited by nothing
    assert lone is not None
    later = time.time() + 3600
    for old in [*bundles[:2], lone]:  # an hour old at `later`; the newest incremental bundle is not
        manifest = writable(old / "manifest.json")
        document = json.loads(manifest.read_text())
        document["started"] -= 7200
        manifest.write_text(json.dumps(document))
    gone = prune(out, 3600, dry_run=True, now=later - 3000)
    assert gone == [str(lone)]  # the chain's two older bundles are cited (one directly, one through it)


def test_a_quiet_log_carries_its_text_in_one_bundle_and_the_later_ones_cite_it(node: Path) -> None:
    """The first read to carry a text copies it; the reads after it that keep nothing new cite that copy
    (``carried_in``), the store's row names the holder, and replay and verify read the text from it. A new line
    the reader keeps (an Xid) is a new text: copied once again by the read after it."""
    journal = Journal(node / "journal.json")
    journal.add(*BOOT, XID79)
    full, copied = sweep(node).bundle, sweep(node).bundle
    quiet = []
    for n in range(2):
        journal.add(f"2024-06-01T10:01:0{n}+0000 node kernel: usb 1-{n}: new device")
        quiet.append(sweep(node).bundle)
    assert full and copied and all(quiet)
    held = json.loads((copied / CARRIED).read_text())["hosts"]["node"]["kernel-log"]
    assert held["carried_from"]["bundle"] == full.name and "): 79," in held["carried_text"]
    for bundle in quiet:
        entry = json.loads((bundle / CARRIED).read_text())["hosts"]["node"]["kernel-log"]
        assert entry["carried_in"] is True and "carried_text" not in entry
        assert entry["carried_from"]["bundle"] == copied.name and entry["carried_sha256"] == held["carried_sha256"]
        assert verify_carried(bundle) == ([], [])
    # the quiet read still judges the Xid the carried text holds, and so does its replay
    assert kernel_log(sweep(node))["xid_codes"] == [79]
    replayed = run_and_save(
        runbooks.load("xid"),
        {"node": lambda: ReplayTransport(quiet[-1] / "hosts" / "node")},  # type: ignore[operator]
        node / "replays",
        settings=RunSettings(drafts=False, status_update=False),
    )
    assert kernel_log(replayed)["xid_codes"] == [79]
    # a held text changed in its bundle: verify says so
    writable(copied / CARRIED).write_text((copied / CARRIED).read_text().replace("): 79,", "): 48,"))
    problems, _ = verify_carried(quiet[-1])
    assert problems and "changed" in problems[0], problems
    # a new kept line: the text changes, and the next read copies the new one
    journal.add(XID13)
    sweep(node)
    after = sweep(node).bundle
    assert after is not None
    entry = json.loads((after / CARRIED).read_text())["hosts"]["node"]["kernel-log"]
    assert "carried_in" not in entry and "): 13," in entry["carried_text"]
