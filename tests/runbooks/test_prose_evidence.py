"""Issue 30 item 6: prose never claims evidence that was not read. A verdict that says what a log shows
is true of a log that was read; without it, it says the log was not read."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from nightowl.cli.main import main
from tests.postmortem.bundles import HOSTS


def _summary(tmp_path: Path, runbook: str, host: str, drop: str, *params: str) -> str:
    copy = tmp_path / "hosts" / host
    shutil.copytree(HOSTS / host, copy)
    for path in copy.glob(f"{drop}.*"):
        path.unlink()
    args = ["triage", runbook, "--replay", str(copy), "--format", "json", "--out", str(tmp_path / "out")]
    for param in params:
        args += ["--param", param]
    result = CliRunner().invoke(main, args)
    (entry,) = json.loads(result.output)["hosts"]
    return str(entry["verdict"]["summary"])


def test_nccl_hang_without_an_nccl_log_never_says_what_it_shows(tmp_path: Path) -> None:
    text = _summary(
        tmp_path, "nccl-hang", "nccl-healthy-ib", "nccl-log", "nccl_log=/var/log/job/nccl.log", "symptom=slow"
    )
    assert "NCCL logs show" not in text and "No NCCL log was read" in text


@pytest.mark.parametrize("runbook", ["xid", "node-health"])
def test_no_xid_is_never_claimed_of_a_kernel_log_not_recorded(tmp_path: Path, runbook: str) -> None:
    text = _summary(tmp_path, runbook, "sram-ue-volatile", "kernel-log")  # the recording has no kernel log
    assert "kernel log shows no Xid" not in text and "no kernel log was read" in text


def test_no_xid_is_still_said_of_a_kernel_log_that_was_read(tmp_path: Path) -> None:
    copy = tmp_path / "hosts" / "sram-ue-volatile"
    shutil.copytree(HOSTS / "sram-ue-volatile", copy)
    (copy / "kernel-log.out").write_text("[    1.000000] Linux version 6.8.0\n")
    result = CliRunner().invoke(
        main, ["triage", "xid", "--replay", str(copy), "--format", "json", "--out", str(tmp_path / "o")]
    )
    (entry,) = json.loads(result.output)["hosts"]
    assert "though the kernel log shows no Xid" in entry["verdict"]["summary"]
