"""Issue 30 item 25: a received bundle is untrusted input. A FIFO never blocks a reader, crafted fields
never crash one (exit 70), and `runbook graph --path` never marks a path from another runbook's run."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from nightowl.cli.main import main
from tests.postmortem.bundles import make_bundle

NIGHTOWL = str(Path(sys.executable).parent / "nightowl")


@pytest.fixture(scope="module")
def source(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_bundle(tmp_path_factory.mktemp("src"), ["xid79-fallen-off-bus"])


def _copy(source: Path, tmp_path: Path) -> Path:
    out = tmp_path / "out"
    out.mkdir(exist_ok=True)
    return Path(shutil.copytree(source, out / source.name))


def _set(bundle: Path, name: str, key: str, value: Any) -> None:
    path = bundle / name
    data = json.loads(path.read_text())
    data[key] = value
    path.write_text(json.dumps(data))


READERS = [["postmortem"], ["postmortem", "--format", "html"], ["postmortem", "--verify"]]


def test_a_fifo_in_a_bundle_never_blocks_a_reader(source: Path, tmp_path: Path) -> None:
    bundle = _copy(source, tmp_path)
    log = next((bundle / "hosts").rglob("kernel-log.out"))
    log.unlink()
    os.mkfifo(log)  # a reader that opens it waits for a writer forever
    for args in READERS:
        try:
            done = subprocess.run([NIGHTOWL, *args, str(bundle)], capture_output=True, text=True, timeout=60)
        except subprocess.TimeoutExpired:  # the watchdog: far beyond what reading a bundle takes
            pytest.fail(f"nightowl {' '.join(args)} blocked on a FIFO in the bundle")
        assert done.returncode in (0, 1, 2), (args, done.stderr)
        assert "internal error" not in done.stderr
    verify = subprocess.run(
        [NIGHTOWL, "postmortem", "--verify", str(bundle)], capture_output=True, text=True, timeout=60
    )
    assert verify.returncode == 1 and "kernel-log.out" in verify.stdout + verify.stderr


CRAFTED = [
    ("manifest.json", "started", 1e400),  # json.dumps writes Infinity, as `started: 1e400` reads
    ("manifest.json", "started", "yesterday"),
    ("manifest.json", "finished", -1e300),
    ("manifest.json", "commands", [1, "x", {"file": 5, "argv": 7, "start": "s"}]),
    ("manifest.json", "commands", {"a": 1}),
    ("manifest.json", "files", [{"path": 5, "sha256": 3}]),
    ("manifest.json", "alert", {"labels": 5, "name": 7, "starts_at": 1e300}),
    ("verdicts.json", "hosts", [{"host": 5, "verdict": "x", "path": 7}]),
    ("verdicts.json", "hosts", [1, None]),
    ("verdicts.json", "hosts", {"a": 1}),
    ("verdicts.json", "hosts", [{"host": "h", "verdict": {"id": 5, "evidence": 3, "severity": []}, "path": ["x", 5]}]),
    ("trace.json", "hosts", 3),
    ("trace.json", "hosts", [{"host": "xid79-fallen-off-bus", "nodes": [1, {"node": 5}], "collectors": 4}]),
]


@pytest.mark.parametrize(("name", "key", "value"), CRAFTED, ids=[f"{n}:{k}:{str(v)[:24]}" for n, k, v in CRAFTED])
def test_crafted_fields_never_crash_a_reader(source: Path, tmp_path: Path, name: str, key: str, value: Any) -> None:
    bundle = _copy(source, tmp_path)
    _set(bundle, name, key, value)
    runner = CliRunner()
    for args in [*READERS, ["runbook", "graph", "xid", "--path"]]:
        result = runner.invoke(main, [*args, str(bundle)])
        assert result.exit_code in (0, 1, 2), (args, result.output, result.exception)
    listed = runner.invoke(main, ["bundles", "--out", str(bundle.parent)])
    assert listed.exit_code == 0, listed.output
    as_json = runner.invoke(main, ["bundles", "--out", str(bundle.parent), "--format", "json"])
    assert as_json.exit_code == 0 and "Infinity" not in as_json.output


def test_graph_path_of_another_runbooks_bundle_is_refused(source: Path) -> None:
    result = CliRunner().invoke(main, ["runbook", "graph", "oom", "--path", str(source)])
    assert result.exit_code == 2 and "run of runbook 'xid', not 'oom'" in result.output
    ok = CliRunner().invoke(main, ["runbook", "graph", "xid", "--path", str(source)])
    assert ok.exit_code == 0, ok.output
