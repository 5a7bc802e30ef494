"""The history store a command chose (``--history``, ``--history-from``) is held in its click context and handed
down, never kept in ``nightowl.history`` (issue 44 item 3): a run outside the command records nothing there,
and the receiver's captures (here `triage --alert`) record into the store their command chose."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from nightowl import history
from nightowl.cli.main import main
from nightowl.history import store
from nightowl.library import runbooks
from nightowl.paths import data_dir
from nightowl.run import run_and_save
from nightowl.transports.replay import ReplayTransport
from tests.receiver.xid_alert import XID_ALERT, xid_rules

HOSTS = data_dir("fixtures") / "hosts"


def _runs(path: Path) -> int:
    return len(store.read(path, "SELECT * FROM runs"))


def test_a_commands_store_does_not_reach_a_later_run_that_was_handed_none(tmp_path: Path) -> None:
    db = tmp_path / "chosen.sqlite3"
    host = HOSTS / "xid79-fallen-off-bus"
    args = ["triage", "xid", "--replay", str(host), "--history", str(db), "--out", str(tmp_path / "b")]
    assert CliRunner().invoke(main, [*args, "--format", "json"]).exit_code == 1
    assert _runs(db) == 1
    # a Python caller in the same process, after the command: its run records nowhere (a module global would
    # still hold the command's store and record there)
    run_and_save(runbooks.load("xid"), {"gpu-17": lambda: ReplayTransport(host, "gpu-17")}, tmp_path / "py")
    assert _runs(db) == 1
    assert history.run_context().history is None


def test_an_alerts_capture_records_into_the_store_its_command_chose(tmp_path: Path) -> None:
    config, payload = xid_rules(tmp_path), str(XID_ALERT)
    db = tmp_path / "receiver.sqlite3"
    args = ["triage", "--alert", payload, "--config", str(config), "--out", str(tmp_path / "b"), "--history", str(db)]
    result = CliRunner().invoke(main, [*args, "--format", "json"])
    captured = [c for c in json.loads(result.output)["captures"] if c["status"] == "captured"]
    assert len(captured) == 2, result.output
    assert _runs(db) == 2  # each capture's run, recorded into the command's store (ServeConfig.history)
