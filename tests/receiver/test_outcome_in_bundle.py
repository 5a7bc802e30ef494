"""The run's Outcome is in its bundle (issue 44 item 1): what serve's webhook posts as ``outcome`` is the
bundle's ``outcome.json``, for one alert and for a storm whose hosts share a rack (the common cause the
capture tells the run is in both), so a later reader of the bundle reads what the responders were told.

Real replay runs of the `xid` runbook on copies of one recorded host (fixtures/hosts/xid79-fallen-off-bus),
planned and run by the receiver's own functions, no server started.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

from nightowl.receiver.capture import plan_capture, run_capture
from nightowl.receiver.config import load_config
from nightowl.receiver.notify import Target, request_for
from nightowl.receiver.payload import parse_alertmanager
from tests.receiver.test_storm import RECORDED, alert, rack_hosts, storm_config
from tests.receiver.test_storm_common_cause import storm_of

HOOK = Target("webhook", "http://127.0.0.1:9/hook")


def bundle_outcome(bundle: str | None) -> dict[str, Any]:
    assert bundle is not None
    return json.loads((Path(bundle) / "outcome.json").read_text(encoding="utf-8"))


def test_the_webhooks_outcome_is_the_bundles_outcome_json(tmp_path: Path) -> None:
    shutil.copytree(RECORDED, tmp_path / "hosts" / "gpu-17")
    config = load_config(storm_config(tmp_path, HOOK.url))
    (planned,) = parse_alertmanager({"alerts": [alert("gpu-17", 0, None)]})
    capture = run_capture(plan_capture(planned, config, 0.0), config)
    assert capture.status == "captured", capture.reason
    _, _, body = request_for(HOOK, capture.notice(), None)
    kept = bundle_outcome(capture.bundle)
    assert body["outcome"] == kept
    assert (kept["origin"], kept["title"], kept["host"]) == ("alert", "GpuXidErrors", "gpu-17")
    assert kept["labels"]["Hostname"] == "gpu-17" and kept["source"] == "alertmanager"
    assert kept["verdict"]["id"] == "gpu-fell-off-bus" and kept["run_id"] == Path(str(capture.bundle)).name
    assert kept["status_update"] == capture.status_update and capture.status_update is not None


def test_a_storms_outcome_json_carries_the_common_cause_the_webhook_tells(tmp_path: Path) -> None:
    hosts = rack_hosts(tmp_path, "r07", 3)
    config = load_config(storm_config(tmp_path, HOOK.url))
    capture = run_capture(storm_of(tmp_path, config, hosts, 2, "r07"), config)
    assert capture.status == "captured", capture.reason
    _, _, body = request_for(HOOK, capture.notice(), None)
    kept = bundle_outcome(capture.bundle)
    # the line is the capture's own (the storm's count of alerts and hosts); the rest is the run's Outcome
    assert {key for key in kept if kept[key] != body["outcome"][key]} == {"line"}
    assert kept["verdict"]["common_cause"]["name"] == "r07" and kept["findings"][0].startswith("Common cause first")
