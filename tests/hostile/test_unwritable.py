"""Issue 14 item 16: a full disk or an unwritable --out prints the verdict anyway, exits 2 with the
reason, and leaves no half-written bundle."""

from __future__ import annotations

import errno
import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from nightowl.cli.main import main as cli
from nightowl.engine import bundle as bundle_module
from nightowl.paths import data_dir

XID79 = data_dir("fixtures") / "hosts" / "xid79-fallen-off-bus"


def test_an_out_folder_that_cannot_be_made_still_prints_the_verdict(tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder\n")
    out = blocker / "bundles"
    result = CliRunner().invoke(cli, ["triage", "xid", "--replay", str(XID79), "--format", "json", "--out", str(out)])
    assert result.exit_code == 2
    report = json.loads(result.stdout)
    assert report["hosts"][0]["verdict"]["id"] == "gpu-fell-off-bus"
    assert report["bundle"] is None and "cannot write the bundle" in report["bundle_error"]
    assert "cannot write the bundle" in result.stderr


@pytest.mark.parametrize("fail_after", [0, 1, 3, 6])
def test_a_full_disk_leaves_no_half_written_bundle(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fail_after: int
) -> None:
    real = bundle_module.write_private
    calls = {"n": 0}

    def full_disk(path: Path, text: str) -> None:
        calls["n"] += 1
        if calls["n"] > fail_after:
            raise OSError(errno.ENOSPC, "No space left on device", str(path))
        real(path, text)

    monkeypatch.setattr(bundle_module, "write_private", full_disk)
    out = tmp_path / "out"
    result = CliRunner().invoke(cli, ["triage", "xid", "--replay", str(XID79), "--out", str(out)])
    assert result.exit_code == 2, result.output
    assert "gpu-fell-off-bus" in result.stdout
    assert "No space left on device" in result.stderr
    assert list(out.iterdir()) == []  # neither a bundle nor a hidden .partial folder
