"""`serve` attaches the status update to its capture, written by the same function as `triage`'s."""

from __future__ import annotations

from pathlib import Path

from nightowl.receiver.capture import triage_alert_payload
from nightowl.receiver.config import load_config
from tests.receiver.test_serve import payload, write_config


def test_capture_bundle_holds_the_status_update_and_the_record_links_it(tmp_path: Path) -> None:
    config = load_config(write_config(tmp_path))
    captured = [c for c in triage_alert_payload(payload("alertmanager-xid-firing.json"), config) if c.bundle]
    assert captured
    for capture in captured:
        path = Path(capture.bundle or "") / "status-update.md"
        assert capture.to_json()["status_update"] == str(path)
        text = path.read_text()
        assert f"Current action: {capture.verdict['action']}:" in text  # type: ignore[index]
        assert f"nightowl xid run {Path(capture.bundle or '').name}" in text
