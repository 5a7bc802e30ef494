"""A triage leaves postmortem.html in its bundle: citations link to line anchors of the bundle's own
browsable copy of each raw file, and --verify still holds (the draft is written after the manifest)."""

from __future__ import annotations

import re
import stat
from pathlib import Path

from click.testing import CliRunner

from nightowl.cli.main import main
from nightowl.paths import data_dir


def test_triage_writes_the_html_draft_with_line_anchors(tmp_path: Path) -> None:
    host = data_dir("fixtures") / "hosts" / "xid79-fallen-off-bus"
    result = CliRunner().invoke(main, ["triage", "xid", "--replay", str(host), "--out", str(tmp_path)])
    assert result.exit_code == 1, result.output
    (bundle,) = [p for p in tmp_path.iterdir() if p.is_dir()]
    html = (bundle / "postmortem.html").read_text()
    links = set(re.findall(r'href="#(E\d+-L\d+)"', html))
    anchors = set(re.findall(r'id="(E\d+-L\d+)"', html))
    assert links, "no citation links to a line"
    assert links <= anchors, f"citations without a line to land on: {sorted(links - anchors)[:5]}"
    for written_after in ("postmortem.html", "status-update.md"):  # owner-only like every bundle file
        assert stat.S_IMODE((bundle / written_after).stat().st_mode) == 0o600, written_after
    verified = CliRunner().invoke(main, ["postmortem", "--verify", str(bundle)])
    assert verified.exit_code == 0, verified.output
