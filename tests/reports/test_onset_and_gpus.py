"""Issue 45 items 4 and 7, outside first-look: the status update dates the incident from the evidence the
draft's Trigger names (the fault line's own time, else the alert's startsAt) and a PagerDuty note carries the
bundle's id, not a path on the receiver's disk; a second GPU with a fault of its own is named with its codes
in the verdict's ``gpus``, the sweep's GPUS column, the status update and the draft.

Bundles are real replays of recorded hosts (fixtures/hosts/*) through the engine's front door."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from nightowl.fleet.table import fleet_table
from nightowl.receiver.notify import Target, request_for
from nightowl.reports import status_update
from tests.postmortem.bundles import make_bundle
from tests.receiver.outcomes import outcome_of

TWO_GPUS = "xid48-xid64-dbe"  # 0a:00 fails RmInitAdapter; 07:00 logs Xid 48 (DBE) and 64 (retirement failed)
OFF_THE_BUS = "xid79-sxid20034"  # its kernel log has seconds since boot only: no dated fault line
ALERT = {
    "source": "alertmanager",
    "status": "firing",
    "name": "GpuXid",
    "labels": {"alertname": "GpuXid", "incident_id": "PABC123"},
    "starts_at": "2026-03-01T02:17:42Z",
    "received_at": 1772331500.0,
}


def written(bundle: Path) -> tuple[dict[str, Any], str]:
    """The run's summary (verdicts.json) and the status update ``write`` makes of it, as a run does."""
    summary = json.loads((bundle / "verdicts.json").read_text())
    summary["bundle"] = str(bundle)
    return summary, status_update.write(bundle, summary).read_text()


def line(text: str, head: str) -> str:
    return next(x for x in text.splitlines() if x.startswith(head))


def test_since_is_the_fault_lines_own_time_the_drafts_trigger_names(tmp_path: Path) -> None:
    bundle = make_bundle(tmp_path, [TWO_GPUS])
    _, text = written(bundle)
    since = line(text, "Since: ")
    assert "not known" not in since
    trigger = (bundle / "postmortem.md").read_text().split("## Trigger", 1)[1].splitlines()[1]
    shown = re.search(r" at (\d{4}-\d\d-\d\d \d\d:\d\d):\d\d ", trigger)
    assert shown, trigger
    assert since.startswith(f"Since: {shown.group(1)} UTC; source: the first fault line on {TWO_GPUS}")
    # the fault of the verdict's own GPU (0a:00, line 1), not the later Xid 48 on 07:00 (line 4)
    assert "(kernel-log.out line 1): NVRM on 0000:0a:00" in since
    assert "on 0000:0a:00" in trigger and re.search(r"\[E\d+ kernel-log\.out:L1-L1\]", trigger)


def test_since_falls_back_to_the_alerts_starts_at(tmp_path: Path) -> None:
    bundle = make_bundle(tmp_path, [OFF_THE_BUS], extra_manifest={"alert": ALERT})
    _, text = written(bundle)
    assert line(text, "Since: ") == (
        "Since: 2026-03-01 02:17 UTC; source: the alert GpuXid started firing then (its startsAt)"
    )


def test_without_either_since_stays_not_known(tmp_path: Path) -> None:
    _, text = written(make_bundle(tmp_path, [OFF_THE_BUS]))
    assert line(text, "Since: ").startswith("Since: not known: first seen by this check at ")


def test_the_pagerduty_note_names_the_bundle_by_its_id_not_a_path(tmp_path: Path) -> None:
    bundle = make_bundle(tmp_path, [OFF_THE_BUS], extra_manifest={"alert": ALERT})
    summary, _ = written(bundle)
    record = {
        "alert": "GpuXid",
        "host": OFF_THE_BUS,
        "labels": ALERT["labels"],
        "verdict": summary["hosts"][0]["verdict"],
        "status_update": str(bundle / status_update.FILE_NAME),
    }
    target = Target("pagerduty", "https://api.pagerduty.invalid", "k", "oncall@example.com", "incident_id")
    _, _, body = request_for(target, outcome_of(record, "gpu-fell-off-bus (critical) -> reboot-node"), None)
    note = body["note"]["content"]
    assert f"evidence in bundle {bundle.name})" in note
    assert str(tmp_path) not in note


def test_a_second_gpu_with_its_own_fault_is_named_with_its_codes(tmp_path: Path) -> None:
    bundle = make_bundle(tmp_path, [TWO_GPUS])
    summary, text = written(bundle)
    verdict = summary["hosts"][0]["verdict"]
    assert verdict["id"] == "gpu-failed-to-initialise"
    assert verdict["gpus"] == ["0000:0a:00", "0000:07:00"]  # the verdict's own GPU first
    assert verdict["other_gpus"] == [{"gpu": "0000:07:00", "xids": [48, 64], "action": "drain-and-reset"}]
    header, row = fleet_table(summary).splitlines()[:2]
    gpus_cell = row[header.index("GPUS") : header.index("PORTS")].strip()
    assert gpus_cell == "0a:00, 07:00 48+64"  # every GPU with a finding, the codes each logged
    assert line(text, "Also seen: ") == f"Also seen: GPU 0000:07:00 on {TWO_GPUS}: Xid 48, 64 (drain-and-reset)"
    draft = (bundle / "postmortem.md").read_text()
    assert f"| [ ] {TWO_GPUS}: GPU 0000:07:00 (Xid 48, 64) has a fault of its own: drain-and-reset;" in draft
    assert f"- {TWO_GPUS}: GPU 0000:07:00 has a fault of its own too: Xid 48, 64 (first action drain-and-reset)." in (
        draft
    )


@pytest.mark.parametrize("host", ["xid13-app-fault", "xid43-sympathetic-only"])
def test_an_application_or_sympathetic_xid_is_not_a_gpus_own_fault(host: str, tmp_path: Path) -> None:
    summary, _ = written(make_bundle(tmp_path, [host]))
    assert "other_gpus" not in (summary["hosts"][0]["verdict"] or {})
