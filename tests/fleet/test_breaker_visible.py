"""An open circuit breaker (actions held) shows in the sweep's table and JSON, the textfile and the
outcome line a capture's notes carry; an unreadable actions log is "unknown", never a closed breaker."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from nightowl.fleet import actions_log
from nightowl.paths import data_dir
from nightowl.receiver.capture import triage_alert_payload
from nightowl.receiver.config import load_config
from tests.fleet.test_fact_domains import sweep
from tests.postmortem.bundles import ALERTS
from tests.receiver.test_serve import write_config

HEALTHY = data_dir("fixtures") / "hosts" / "healthy-l40s"
TWO_HOURS_AGO = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() - 7200))


def held_log(path: Path, recent: int, old: int = 0) -> Path:
    for i in range(old):
        actions_log.append(
            path, {"when": TWO_HOURS_AGO, "node": f"old-{i}", "what": "drain", "why": "w", "result": "held"}
        )
    actions_log.append(
        path, {"node": "gpu-01", "what": "drain", "why": "nightowl: x (reboot-node)", "result": "drained"}
    )
    for i in range(recent):
        why = "circuit breaker open: 5 nodes already drained by nightowl in the last 3600 s, cap 5 (--max-drain 5)"
        actions_log.append(path, {"node": f"gpu-{i + 6:02d}", "what": "drain", "why": why, "result": "held"})
    return path


def test_breaker_state_counts_held_actions_in_the_window(tmp_path: Path) -> None:
    assert actions_log.breaker_state(tmp_path / "none.jsonl") is None  # nightowl never acted
    state = actions_log.breaker_state(held_log(tmp_path / "a.jsonl", recent=7, old=2))
    assert state is not None
    assert (state["open"], state["held_in_window"], state["held_total"]) == (True, 7, 9)
    assert state["last_held"]["node"] == "gpu-12"
    closed = actions_log.breaker_state(held_log(tmp_path / "b.jsonl", recent=0, old=3))
    assert closed is not None and (closed["open"], closed["held_total"]) == (False, 3)
    assert actions_log.breaker_line(closed) is None
    line = actions_log.breaker_line(state)
    assert line is not None and line.startswith(
        "circuit breaker open: 7 action(s) held in the last 3600 s (last: gpu-12:"
    )


def _sweep(tmp_path: Path, fmt: str, capsys: pytest.CaptureFixture[str]) -> str:
    sweep(tmp_path, {"gpu-01": HEALTHY}, fmt)
    return capsys.readouterr().out


def test_an_open_breaker_shows_in_the_table_json_and_textfile(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("NIGHTOWL_ACTIONS_LOG", str(held_log(tmp_path / "actions.jsonl", recent=7)))
    assert "circuit breaker open: 7 action(s) held" in _sweep(tmp_path, "table", capsys)
    report = json.loads(_sweep(tmp_path, "json", capsys))
    assert report["breaker"]["open"] is True and report["breaker"]["held_in_window"] == 7
    metrics = _sweep(tmp_path, "prometheus", capsys)
    assert "\nnightowl_breaker_open 1.0\n" in metrics and "\nnightowl_actions_held_total 7.0\n" in metrics


def test_no_actions_log_no_breaker_and_an_unreadable_one_is_unknown(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("NIGHTOWL_ACTIONS_LOG", str(tmp_path / "never-written.jsonl"))
    assert "breaker" not in json.loads(_sweep(tmp_path, "json", capsys))
    assert "nightowl_breaker_open" not in _sweep(tmp_path, "prometheus", capsys)
    broken = tmp_path / "broken.jsonl"
    broken.write_text('{"result": "held"\n')
    monkeypatch.setenv("NIGHTOWL_ACTIONS_LOG", str(broken))
    assert "circuit breaker: unknown (cannot read broken.jsonl" in _sweep(tmp_path, "table", capsys)
    assert "nightowl_breaker_open" not in _sweep(tmp_path, "prometheus", capsys)  # no false 0


def test_a_captures_note_says_the_breaker_is_open(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NIGHTOWL_ACTIONS_LOG", str(held_log(tmp_path / "actions.jsonl", recent=2)))
    config = load_config(write_config(tmp_path), for_receiver=False)
    payload = json.loads((ALERTS / "alertmanager-xid-firing.json").read_text())
    first = triage_alert_payload(payload, config)[0]
    assert first.status == "captured"
    # the outcome line is the text every notify target posts (receiver/queue.py hands it to the notifier)
    assert first.outcome().startswith("gpu-fell-off-bus (critical) -> reboot-node; circuit breaker open: 2 action(s)")
    assert first.to_json()["breaker"]["open"] is True
