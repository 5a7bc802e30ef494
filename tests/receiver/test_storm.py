"""Alert storms through the real receiver on 127.0.0.1: alerts of one rack fold into one capture and
one note, an unrelated alert in the same seconds gets its own, and a storm never holds up other alerts.

The hosts are copies of one recorded incident host (fixtures/hosts/xid79-fallen-off-bus), so every
capture is a real replay run of the `xid` runbook; notes go to a webhook stand-in on 127.0.0.1.
"""

from __future__ import annotations

import json
import shutil
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from nightowl.receiver.capture import Capture, run_capture
from nightowl.receiver.config import ConfigError, load_config
from nightowl.receiver.queue import Receiver
from tests.postmortem.bundles import HOSTS
from tests.receiver.test_serve import TOKEN, Running
from tests.receiver.test_serve_notify import Recorder, wait_notified

RECORDED = HOSTS / "xid79-fallen-off-bus"


@pytest.fixture
def recorder() -> Iterator[Recorder]:
    rec = Recorder()
    yield rec
    rec.server.shutdown()
    rec.server.server_close()


def rack_hosts(root: Path, rack: str, count: int) -> list[str]:
    """``count`` recorded hosts named ``<rack>-gpu-NN`` (copies of one real recording)."""
    names = [f"{rack}-gpu-{n:02d}" for n in range(1, count + 1)]
    for name in names:
        shutil.copytree(RECORDED, root / "hosts" / name)
    return names


def storm_config(tmp_path: Path, hook: str, window: float = 5.0, max_hosts: int = 64, extra: str = "") -> Path:
    path = tmp_path / "serve.yaml"
    path.write_text(f"""
out: {tmp_path / "bundles"}
token: {TOKEN}
workers: 2
queue: 8
storm:
  by: [rack]
  window: {window}
  max_hosts: {max_hosts}
  workers: 1
  queue: 4
notify:
  attempts: 1
  timeout: 5
  webhook:
    url: {hook}
rules:
  - name: gpu-xid
    match: ["alertname=GpuXidErrors"]
    runbook: xid
    host: "replay:{tmp_path / "hosts"}/{{{{ labels.Hostname }}}}"
{extra}""")
    return path


def alert(host: str, gpu: int, rack: str | None) -> dict[str, Any]:
    labels = {"alertname": "GpuXidErrors", "Hostname": host, "gpu": str(gpu), "err_code": "79"}
    if rack:
        labels["rack"] = rack
    return {
        "status": "firing",
        "labels": labels,
        "annotations": {"summary": f"Xid 79 on GPU {gpu} of {host}"},
        "startsAt": "2026-12-01T23:30:00Z",
        "fingerprint": f"{host}-{gpu}",
    }


def deliver(running: Running, alerts: list[dict[str, Any]]) -> dict[str, Any]:
    status, body = running.request("POST", "/alertmanager", {"version": "4", "status": "firing", "alerts": alerts})
    assert status == 200, body
    return body


def start(config: Path, **kwargs: Any) -> Running:
    receiver = Receiver(load_config(config), **kwargs)
    receiver.start()
    running = Running(receiver)
    running.thread.start()
    return running


def stop(running: Running) -> None:
    running.server.shutdown()
    running.server.server_close()
    running.receiver.stop(timeout=5)


@pytest.mark.integration
def test_64_alerts_of_one_rack_are_one_capture_and_one_note(tmp_path: Path, recorder: Recorder) -> None:
    hosts = rack_hosts(tmp_path, "r07", 16)
    (lone,) = rack_hosts(tmp_path, "r12", 1)
    running = start(storm_config(tmp_path, f"{recorder.url}/hook"))
    try:
        storm = [alert(h, gpu, "r07") for gpu in range(4) for h in hosts]  # 64 alerts, 4 GPUs of 16 hosts
        began = time.monotonic()
        answers = [deliver(running, storm[i : i + 16]) for i in range(0, 64, 16)]
        answers.append(deliver(running, [alert(lone, 0, "r12")]))  # another rack, the same seconds
        assert time.monotonic() - began < 5
        assert sum(a["counts"].get("held", 0) for a in answers) == 65
        health = running.request("GET", "/healthz")[1]
        assert health["status"] == "ok" and health["waiting"] >= 1  # held alerts count as waiting
        done = wait_notified(running, 2, timeout=90)
        status, page = running.request("GET", "/")
        assert status == 200 and "rack=r07" in page  # the index lists the storm as one capture
    finally:
        stop(running)
    assert len(done) == 2
    (folded,) = [c for c in done if c["storm"]]
    (single,) = [c for c in done if not c["storm"]]
    assert folded["storm"]["alerts"] == 64 and sorted(folded["storm"]["hosts"]) == hosts
    assert {r["verdict"]["id"] for r in folded["storm"]["results"]} == {"gpu-fell-off-bus"}
    assert folded["outcome"].startswith(
        "storm rack=r07: 64 alerts on 16 hosts, 16 need action; common cause: rack r07 ("
    )  # the rack first (test_storm_common_cause.py), then the worst host verdict
    assert "; worst: gpu-fell-off-bus (critical) -> reboot-node" in folded["outcome"]
    assert single["host"] == lone and single["verdict"]["id"] == "gpu-fell-off-bus"
    bundles = sorted(p for p in (tmp_path / "bundles").iterdir() if (p / "manifest.json").is_file())
    assert len(bundles) == 2  # one bundle for 64 alerts, one for the lone alert
    storm_bundle = next(b for b in bundles if b.name == folded["run_id"])
    assert sorted(p.name for p in (storm_bundle / "hosts").iterdir()) == hosts
    notes = recorder.to("/hook")
    assert len(notes) == 2
    assert sorted(n["body"]["capture"]["host"] for n in notes) == sorted([lone, "rack=r07"])
    (storm_note,) = [n["body"] for n in notes if n["body"]["capture"]["host"] == "rack=r07"]
    assert storm_note["finding"][0].startswith("Common cause first: rack r07 (")  # the rack before its nodes
    journal = [json.loads(line) for line in (tmp_path / "bundles" / "captures.jsonl").read_text().splitlines()]
    assert len({entry["id"] for entry in journal}) == 2  # journalled once per capture, not per alert


@pytest.mark.integration
def test_a_storm_never_holds_up_another_alert(tmp_path: Path, recorder: Recorder) -> None:
    hosts = rack_hosts(tmp_path, "r03", 3)
    (other,) = rack_hosts(tmp_path, "solo", 1)
    gate, storm_started = threading.Event(), threading.Event()

    def slow_storm(capture: Capture, config: Any) -> Capture:
        storm_started.set()
        gate.wait(30)  # the storm lane is busy for as long as the test wants
        return run_capture(capture, config)

    running = start(storm_config(tmp_path, f"{recorder.url}/hook", window=0.3), run_storm=slow_storm)
    try:
        deliver(running, [alert(h, 0, "r03") for h in hosts])
        assert storm_started.wait(10)
        deliver(running, [alert(other, 0, None)])  # no rack: captured at once, by the ordinary lane
        done = wait_notified(running, 1)
        assert [c["host"] for c in done] == [other] and not gate.is_set()
        gate.set()
        done = wait_notified(running, 2)
    finally:
        gate.set()
        stop(running)
    assert sorted(c["host"] for c in done) == sorted([other, "rack=r03"])


@pytest.mark.integration
def test_a_full_window_is_released_at_the_cap_and_a_redelivery_is_a_duplicate(
    tmp_path: Path, recorder: Recorder
) -> None:
    hosts = rack_hosts(tmp_path, "r05", 6)
    running = start(storm_config(tmp_path, f"{recorder.url}/hook", window=0.5, max_hosts=4))
    try:
        first = deliver(running, [alert(h, 0, "r05") for h in hosts])
        again = deliver(running, [alert(hosts[0], 0, "r05")])
        done = wait_notified(running, 2)
    finally:
        stop(running)
    assert first["counts"] == {"held": 6}
    assert again["counts"] == {"duplicate": 1}
    assert sorted(len(c["storm"]["hosts"]) for c in done) == [2, 4]
    assert len(recorder.to("/hook")) == 2


def test_a_stopping_receiver_journals_its_windows_and_the_next_resumes_them(tmp_path: Path, recorder: Recorder) -> None:
    hosts = rack_hosts(tmp_path, "r09", 2)
    config = storm_config(tmp_path, f"{recorder.url}/hook", window=600)
    receiver = Receiver(load_config(config), run=lambda c, cfg: c)
    receiver.start()
    from nightowl.receiver.payload import parse_alertmanager

    held = receiver.submit(parse_alertmanager({"alerts": [alert(h, 0, "r09") for h in hosts]}))
    assert [c.status for c in held] == ["held", "held"] and receiver.waiting() == 2
    receiver.stop(timeout=2)
    again = Receiver(load_config(config), run=lambda c, cfg: c)
    assert [c.storm.hosts() if c.storm else None for c in again._resume] == [
        {h: f"replay:{tmp_path / 'hosts'}/{h}" for h in hosts}
    ]


def test_storm_config_is_checked(tmp_path: Path) -> None:
    bad = storm_config(tmp_path, "http://127.0.0.1:9/hook").read_text().replace("max_hosts: 64", "max_hosts: 1")
    (tmp_path / "bad.yaml").write_text(bad)
    with pytest.raises(ConfigError, match="max_hosts 2-1024"):
        load_config(tmp_path / "bad.yaml")
    typo = storm_config(tmp_path, "http://127.0.0.1:9/hook", extra="    storm_by: 'rack name'\n")
    with pytest.raises(ConfigError, match="storm_by is a label name"):
        load_config(typo)


def test_which_alerts_fold_and_by_what(tmp_path: Path) -> None:
    from nightowl.receiver.capture import plan_capture
    from nightowl.receiver.payload import parse_alertmanager
    from nightowl.receiver.storm import storm_key

    extra = """  - name: by-rule
    match: ["alertname=NodeDown"]
    runbook: node-health
    host: "replay:/x/{{ labels.Hostname }}"
    storm_by: rule
  - name: by-switch
    match: ["alertname=IbPortDown"]
    runbook: node-health
    host: "replay:/x/{{ labels.Hostname }}"
    storm_by: switch
"""
    config = load_config(storm_config(tmp_path, "http://127.0.0.1:9/hook", extra=extra))

    def key(labels: dict[str, str], status: str = "firing") -> Any:
        (parsed,) = parse_alertmanager({"alerts": [{"status": status, "labels": {"Hostname": "n1", **labels}}]})
        return storm_key(plan_capture(parsed, config, 0.0), config)

    assert key({"alertname": "GpuXidErrors", "rack": "r1"}) == ("gpu-xid", "rack", "r1")  # storm.by
    assert key({"alertname": "GpuXidErrors"}) is None  # no domain label: captured at once
    assert key({"alertname": "GpuXidErrors", "rack": "r1"}, status="resolved") is None  # only firing alerts
    assert key({"alertname": "NodeDown", "rack": "r1"}) == ("by-rule", "rule", "by-rule")
    assert key({"alertname": "IbPortDown", "rack": "r1", "switch": "leaf-3"}) == ("by-switch", "switch", "leaf-3")
    assert key({"alertname": "IbPortDown", "rack": "r1"}) is None  # the rule's own label wins over storm.by
    assert key({"alertname": "Unrouted", "rack": "r1"}) is None  # ignored alerts never fold


@pytest.mark.integration
def test_a_failed_storm_is_never_a_duplicate_of_its_redelivery(tmp_path: Path, recorder: Recorder) -> None:
    hosts = rack_hosts(tmp_path, "r11", 3)

    def broken(capture: Capture, config: Any) -> Capture:
        capture.status, capture.reason = "failed", "the storm lane broke"
        return capture

    running = start(storm_config(tmp_path, f"{recorder.url}/hook", window=0.3), run_storm=broken)
    try:
        storm = [alert(h, 0, "r11") for h in hosts]
        deliver(running, storm)
        (failed,) = wait_notified(running, 1)
        assert failed["status"] == "failed" and failed["storm"]["alerts"] == 3
        again = deliver(running, storm[1:])  # Alertmanager redelivers: each alert gets its chance again
    finally:
        stop(running)
    assert again["counts"] == {"held": 2}


def test_a_journal_line_with_unreadable_storm_records_is_skipped(tmp_path: Path) -> None:
    config = storm_config(tmp_path, "http://127.0.0.1:9/hook")
    (tmp_path / "bundles").mkdir()
    bad = {"id": "s1", "status": "queued", "alert_record": {"labels": {"alertname": "GpuXidErrors"}}}
    (tmp_path / "bundles" / "captures.jsonl").write_text(json.dumps({**bad, "storm_records": [1, "x"]}) + "\n")
    lines: list[str] = []
    receiver = Receiver(load_config(config), log=lambda line: lines.append(str(line)))
    assert receiver._resume == [] and any("storm_records are not alert records" in line for line in lines)
