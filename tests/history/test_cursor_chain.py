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
from nightowl.postmortem.carried_chain import verify_carried
from tests.history.cursor_standins import Journal
from tests.history.test_cursor_read import BOOT, XID13, XID79, node, sweep

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
