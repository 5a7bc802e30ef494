"""Issue 14 item 16: a full disk or an unwritable --out prints the verdict anyway, exits 2 with the
reason, and leaves no half-written bundle."""

from __future__ import annotations

import errno
import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from nightowl.cli.main import main as cli
from nightowl.engine import bundle_writer as bundle_module
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

    def full_disk(path: Path, text: str) -> bytes:
        calls["n"] += 1
        if calls["n"] > fail_after:
            raise OSError(errno.ENOSPC, "No space left on device", str(path))
        return real(path, text)

    monkeypatch.setattr(bundle_module, "write_private", full_disk)
    out = tmp_path / "out"
    result = CliRunner().invoke(cli, ["triage", "xid", "--replay", str(XID79), "--out", str(out)])
    assert result.exit_code == 2, result.output
    assert "gpu-fell-off-bus" in result.stdout
    assert "No space left on device" in result.stderr
    assert list(out.iterdir()) == []  # neither a bundle nor a hidden .partial folder


@pytest.fixture
def xid79_node(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """This node's tools print the recorded Xid 79 host's outputs (`nightowl check` runs them)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for tool, kind in (("nvidia-smi", "nvidia-smi"), ("journalctl", "kernel-log"), ("dmesg", "kernel-log")):
        recorded = XID79 / f"{kind}.out"
        body = f"cat '{recorded}'" if recorded.exists() else "exit 127"
        (bin_dir / tool).write_text(f"#!/bin/sh\n{body}\n")
        (bin_dir / tool).chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:/usr/bin:/bin")
    monkeypatch.setenv("NODE_NAME", "gpu-17")


@pytest.mark.parametrize("fmt", ["table", "json"])
def test_a_sweep_whose_bundle_cannot_be_written_prints_the_verdicts_and_exits_2(
    tmp_path: Path, xid79_node: None, fmt: str
) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder\n")
    result = CliRunner().invoke(cli, ["check", "--format", fmt, "--out", str(blocker / "bundles")])
    assert result.exit_code == 2, result.output
    assert "gpu-fell-off-bus" in result.stdout
    assert "cannot write the bundle" in result.stderr
    if fmt == "json":
        assert json.loads(result.stdout)["bundle_error"]


@pytest.mark.parametrize("where", ["missing-folder/n.prom", "a-file/n.prom"])
def test_an_unwritable_textfile_prints_the_report_exits_2_and_leaves_no_file(
    tmp_path: Path, xid79_node: None, where: str
) -> None:
    (tmp_path / "a-file").write_text("not a folder\n")
    textfile = tmp_path / where
    before = sorted(tmp_path.rglob("*"))
    result = CliRunner().invoke(
        cli, ["check", "--format", "json", "--out", str(tmp_path / "out"), "--textfile", str(textfile)]
    )
    assert result.exit_code == 2, result.output
    assert json.loads(result.stdout)["hosts"][0]["verdict"]["id"] == "gpu-fell-off-bus"
    assert f"cannot write the textfile {textfile}" in result.stderr
    after = {p for p in tmp_path.rglob("*") if "out" not in p.relative_to(tmp_path).parts}
    assert after == {p for p in before if "out" not in p.relative_to(tmp_path).parts}


def test_a_textfile_write_that_fails_midway_leaves_no_temporary_file(
    tmp_path: Path, xid79_node: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    import prometheus_client.exposition as exposition

    def full_disk(*_args: object, **_kwargs: object) -> bytes:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(exposition, "generate_latest", full_disk)
    folder = tmp_path / "textfiles"
    folder.mkdir()
    result = CliRunner().invoke(
        cli, ["check", "--format", "table", "--out", str(tmp_path / "out"), "--textfile", str(folder / "n.prom")]
    )
    assert result.exit_code == 2, result.output
    assert "gpu-fell-off-bus" in result.stdout and "No space left on device" in result.stderr
    assert list(folder.iterdir()) == []


@pytest.mark.parametrize("extra", [["--status-update"], ["--follow"]])
def test_status_update_and_follow_on_an_unwritable_out_exit_2_not_70(tmp_path: Path, extra: list[str]) -> None:
    """With no bundle there is no update to print and nothing to follow from: exit 2 with the reason."""
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    out = blocker / "bundles"
    result = CliRunner().invoke(cli, ["triage", "xid", "--replay", str(XID79), "--out", str(out), *extra])
    assert result.exit_code == 2, result.output
    assert "gpu-fell-off-bus" in result.stdout
    assert "cannot write the bundle" in result.stderr
