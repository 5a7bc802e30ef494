"""A storm's common causes are judged once (receiver/common_cause.py ``StormRecord``): the manifest's storm
record, the capture's outcome and the status update rendered from it all carry that one judgement, never a
second one made from the same runs; and a storm of one host's many alerts says "on 1 host".
"""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from nightowl.receiver import common_cause
from nightowl.receiver.capture import Storm, run_capture
from nightowl.receiver.common_cause import StormRecord
from nightowl.receiver.config import load_config
from tests.receiver.test_storm import rack_hosts, storm_config
from tests.receiver.test_storm_common_cause import storm_of


def counting(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Every call of ``common_causes`` counted (the judgement itself unchanged)."""
    calls: list[int] = []
    judge = common_cause.common_causes

    def counted(*args: Any, **kwargs: Any) -> list[dict[str, Any]]:
        calls.append(1)
        return judge(*args, **kwargs)

    monkeypatch.setattr(common_cause, "common_causes", counted)
    return calls


def test_a_storm_capture_judges_its_common_causes_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    config = load_config(storm_config(tmp_path, "http://127.0.0.1:9/hook"))
    hosts = rack_hosts(tmp_path, "r07", 3)  # 3 hosts of one rack: fleet/domains.py's fewest for a finding
    calls = counting(monkeypatch)
    capture = run_capture(storm_of(tmp_path, config, hosts, 1, "r07"), config)
    assert capture.status == "captured" and capture.storm is not None, capture.reason
    assert len(calls) == 1  # the manifest's judgement, handed to the outcome; not judged again for it
    bundle = Path(str(capture.bundle))
    kept = json.loads((bundle / "manifest.json").read_text())["alert"]["storm"]["common_cause"]
    assert [c["name"] for c in capture.storm.common_cause] == ["r07"] and kept == capture.storm.common_cause
    assert capture.run_outcome is not None and capture.run_outcome.verdict is not None
    assert capture.run_outcome.verdict["common_cause"] == kept[0]
    assert "rack r07" in (bundle / "status-update.md").read_text()  # rendered from the outcome's one judgement


def _run(host: str) -> Any:
    return SimpleNamespace(host=host, status="ok", verdict=None, error=None, collections={})


def test_a_storm_no_host_reported_is_judged_once_from_its_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    """A job-scoped runbook reports no host as done (engine/session.py ``_run_job``): the outcome's causes are
    then judged from the runs it hands, once, and kept."""
    calls = counting(monkeypatch)
    record = StormRecord({"storm": {"alerts_by_host": {"a": 2}}}, {}, ["a", "b"])
    runs = [_run("a"), _run("b")]
    first = record.common_causes(runs)
    assert record.common_causes(runs) is first and len(calls) == 1


def test_the_last_hosts_judgement_is_the_one_the_outcome_gets(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = counting(monkeypatch)
    alert: dict[str, Any] = {"storm": {"alerts_by_host": {"a": 1, "b": 1}}}
    record = StormRecord(alert, {}, ["a", "b"])
    record.host_done(_run("a"))
    assert calls == []  # not before the last host
    record.host_done(_run("b"))
    assert record.common_causes([_run("a"), _run("b")]) is alert["storm"]["common_cause"] and len(calls) == 1


def test_a_storm_of_one_hosts_alerts_says_one_host() -> None:
    members: Any = [SimpleNamespace(host="gpu-1", host_spec="gpu-1") for _ in range(4)]
    assert Storm("rack", "r1", members).describe("x").startswith("storm rack=r1: 4 alerts on 1 host; worst: x")
    members.append(SimpleNamespace(host="gpu-2", host_spec="gpu-2"))
    assert "5 alerts on 2 hosts;" in Storm("rack", "r1", members).describe("x")
