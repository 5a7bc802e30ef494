"""`nightowl bundles`: recent bundles with host, runbook, verdict and time; `--prune AGE`."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from nightowl.cli.bundles_cmd import bundles, parse_age
from tests.postmortem.bundles import make_bundle


def invoke(*args: str):
    return CliRunner().invoke(bundles, list(args), catch_exceptions=False)


def test_lists_newest_first_and_prunes_by_age(tmp_path: Path) -> None:
    old = make_bundle(tmp_path, ["xid48-xid64-dbe"])
    new = make_bundle(tmp_path, ["xid79-fallen-off-bus"])
    manifest = json.loads((old / "manifest.json").read_text())
    manifest["started"] = time.time() - 40 * 86400  # captured 40 days ago
    (old / "manifest.json").write_text(json.dumps(manifest))
    stale = tmp_path / ".20200101T000000Z-xid-abcdef.partial"  # a run that crashed long ago
    stale.mkdir()
    os.utime(stale, (time.time() - 40 * 86400,) * 2)

    text = invoke("--out", str(tmp_path)).output
    lines = text.splitlines()
    assert lines[0].startswith("started (UTC)")
    assert "xid79-fallen-off-bus" in lines[1] and "gpu-fell-off-bus" in lines[1] and "reboot-node" in lines[1]
    assert "xid48-xid64-dbe" in lines[2] and "gpu-failed-to-initialise" in lines[2] and "reboot-node" in lines[2]

    dry = json.loads(invoke("--out", str(tmp_path), "--prune", "30d", "--dry-run", "--format", "json").output)
    assert sorted(dry["pruned"]) == sorted([str(old), str(stale)]) and old.exists() and stale.exists()
    result = invoke("--out", str(tmp_path), "--prune", "30d")
    assert f"deleted {old}" in result.output and not old.exists() and not stale.exists() and new.exists()
    data = json.loads(invoke("--out", str(tmp_path), "--format", "json").output)
    assert [b["run_id"] for b in data["bundles"]] == [new.name]
    assert data["bundles"][0]["hosts"] == ["xid79-fallen-off-bus"] and data["bundles"][0]["runbook"] == "xid"


def test_bad_age_and_empty_folder(tmp_path: Path) -> None:
    assert CliRunner().invoke(bundles, ["--out", str(tmp_path), "--prune", "soon"]).exit_code == 2
    assert "no bundles" in invoke("--out", str(tmp_path / "none")).output
    assert parse_age("90m") == 5400 and parse_age("2w") == 14 * 86400 and parse_age("1.5h") == 5400


def test_an_age_option_needs_its_unit() -> None:
    """cli/common.parse_age reads through nightowl.ages but refuses the bare number ages reads as seconds."""
    assert parse_age(" 2 d ") == 2 * 86400 and parse_age("45s") == 45
    for text in ("30", "30 ", "d", "", "3x", "-1d"):
        with pytest.raises(ValueError, match="expected a number and a unit"):
            parse_age(text)
