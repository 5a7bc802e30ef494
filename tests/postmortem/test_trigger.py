"""The Trigger, Impact and Detection of a draft rest on the line the verdict's own evidence cites."""

from __future__ import annotations

import json
from datetime import datetime, timezone
from pathlib import Path

from click.testing import CliRunner

from nightowl.cli.main import main
from nightowl.postmortem.render import render_bundle
from tests.postmortem.bundles import HOSTS, section


def _draft(out: Path, *args: str) -> tuple[str, dict]:
    result = CliRunner().invoke(main, ["triage", *args, "--out", str(out)], catch_exceptions=False)
    assert result.exit_code in (0, 1, 2, 3, 4, 5), result.output
    (bundle,) = [p for p in out.iterdir() if (p / "postmortem.md").is_file()]
    return (bundle / "postmortem.md").read_text(), json.loads((bundle / "manifest.json").read_text())


def test_xid79_trigger_is_the_xid_line_not_the_driver_load(tmp_path: Path) -> None:
    text, manifest = _draft(tmp_path, "xid", "--replay", str(HOSTS / "xid79-fallen-off-bus"))
    trigger = section(text, "Trigger")
    assert "Xid 79" in trigger and "kernel-log.out:L3" in trigger
    assert "driver" not in trigger.lower()
    impact = section(text, "Impact")
    assert "27.4 h" not in impact and "2024-04-04" not in impact
    assert "at 2024-04-05 21:29:39" in impact
    # a replay's capture time is the replay's: no "days from the fault to the capture" for it
    assert manifest["replayed_hosts"] == ["xid79-fallen-off-bus"]
    assert "replayed from a recording" in impact and "nightowl's capture:" not in impact
    assert "was the bundle replayed" not in text  # the open question is answered by the manifest


def test_a_live_capture_measures_from_the_xid_line_not_the_driver_load(tmp_path: Path) -> None:
    _draft(tmp_path, "xid", "--replay", str(HOSTS / "xid79-fallen-off-bus"))
    (bundle,) = [p for p in tmp_path.iterdir() if (p / "manifest.json").is_file()]
    manifest = json.loads((bundle / "manifest.json").read_text())
    del manifest["replayed_hosts"]  # as a live run writes it
    (bundle / "manifest.json").write_text(json.dumps(manifest))
    impact = section(render_bundle(bundle), "Impact")
    # the fault-to-capture span starts at the Xid line (21:29:39 on 5 April), not the boot a day earlier
    xid = datetime(2024, 4, 5, 21, 29, 39, tzinfo=timezone.utc).timestamp()
    days = (manifest["started"] - xid) / 86400
    assert f"nightowl's capture: {days:.1f} days" in impact
    assert "replayed" not in impact


def test_nccl_watchdog_timeouts_enter_the_timeline_with_the_stall_start(tmp_path: Path) -> None:
    text, _ = _draft(
        tmp_path,
        "nccl-hang",
        "--replay",
        str(HOSTS / "nccl-straggler-a"),
        "--replay",
        str(HOSTS / "nccl-straggler-b"),
        "--param",
        "nccl_log=/var/log/job/nccl.log",
    )
    trigger = section(text, "Trigger")
    assert "show no fault event" not in trigger
    # ranks 0-2 timed out at 06:24:44 after running ~600020 ms: the stall began ten minutes earlier
    assert "NCCL stall began: ALLREDUCE SeqNum=808 on rank(s) 0, 1, 2" in trigger
    assert "06:14:44" in trigger and "nccl-log.out:L1" in trigger
    timeline = section(text, "Timeline")
    assert "NCCL watchdog timeout: ALLREDUCE SeqNum=808" in timeline and "Timeout(ms)=600000" in timeline
    assert "(10.0 min)" in section(text, "Impact")
