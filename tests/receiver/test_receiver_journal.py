"""The receiver's journal under faults (issue 30, items 9-12): a failed write refuses the delivery and
makes /healthz unhealthy, a cut or mistyped line never swallows the next record, one receiver owns a
journal folder, and a reopened PagerDuty incident is a new delivery, not a duplicate."""

from __future__ import annotations

import errno
import json
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from nightowl.receiver import journal as receiver_journal
from nightowl.receiver.capture import Capture
from nightowl.receiver.config import load_config
from nightowl.receiver.journal import JOURNAL, ReceiverBusy
from nightowl.receiver.payload import parse_alertmanager, parse_pagerduty, sign_pagerduty
from nightowl.receiver.queue import Receiver
from tests.postmortem.bundles import ALERTS
from tests.receiver.test_receiver_hostile import alert_with
from tests.receiver.test_serve import SECRET, payload, serve_factory, write_config


@pytest.fixture
def serve(tmp_path: Path) -> Iterator[Any]:
    yield from serve_factory(tmp_path)


def held(capture: Capture, config: Any) -> Capture:
    capture.status = "captured"
    return capture


class FullDisk:
    """Journal appends fail with ENOSPC while ``full`` is set."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.full = threading.Event()
        real = receiver_journal._append

        def append(path: Path, text: str) -> None:
            if self.full.is_set():
                raise OSError(errno.ENOSPC, "No space left on device")
            real(path, text)

        monkeypatch.setattr(receiver_journal, "_append", append)


# --- item 9 -------------------------------------------------------------------------------------
def test_a_failed_journal_write_refuses_the_delivery_and_healthz_says_so(
    serve: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    disk = FullDisk(monkeypatch)
    running = serve(run=held)
    body = alert_with("xid79-fallen-off-bus")
    disk.full.set()
    status, answer = running.request("POST", "/alertmanager", body)
    assert status == 503 and "No space left" in answer["error"]  # the sender retries
    status, health = running.request("GET", "/healthz", token=None)
    assert status == 503 and health["status"] == "unhealthy" and "No space left" in health["reason"]
    disk.full.clear()
    status, answer = running.request("POST", "/alertmanager", body)  # the redelivery, disk freed
    assert status == 200 and answer["statuses"] == ["queued"], "a refused delivery became a duplicate"
    running.wait_idle()
    assert running.request("GET", "/healthz", token=None)[0] == 200


def test_a_failed_write_when_a_capture_ends_keeps_the_worker_and_is_unhealthy(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    disk = FullDisk(monkeypatch)
    ran: list[str] = []

    def fill_then_finish(capture: Capture, config: Any) -> Capture:
        ran.append(capture.alert.fingerprint)
        disk.full.set()  # the disk fills while the capture runs: its final line cannot be written
        capture.status = "captured"
        return capture

    receiver = Receiver(load_config(write_config(tmp_path, workers=1)), run=fill_then_finish)
    receiver.start()
    try:
        [first] = receiver.submit(parse_alertmanager(alert_with("xid79-fallen-off-bus", "f1")))
        assert first.status == "queued"
        for _ in range(200):
            if receiver.health()[0] is False:
                break
            threading.Event().wait(0.05)
        healthy, why = receiver.health()
        assert not healthy and "No space left" in str(why)
        disk.full.clear()
        [second] = receiver.submit(parse_alertmanager(alert_with("xid79-fallen-off-bus", "f2")))
        for _ in range(200):  # a watchdog: the worker that hit the failed write must still be working
            if len(ran) == 2:
                break
            threading.Event().wait(0.05)
        assert ran == ["f1", "f2"]
    finally:
        receiver.stop(timeout=5)


# --- item 10 ------------------------------------------------------------------------------------
def test_a_cut_last_line_never_swallows_the_next_record(tmp_path: Path) -> None:
    config = load_config(write_config(tmp_path))
    first = Receiver(config, run=held)
    first.start()
    [capture] = first.submit(parse_alertmanager(alert_with("xid79-fallen-off-bus", "f1")))
    first.stop(timeout=5)
    path = tmp_path / "bundles" / JOURNAL
    path.write_bytes(path.read_bytes() + b'{"id": "cut-by-a-crash", "status": "que')  # no newline
    lines: list[Any] = []
    second = Receiver(config, run=held, log=lines.append)
    second.start()
    try:
        [next_one] = second.submit(parse_alertmanager(alert_with("xid79-fallen-off-bus", "f2")))
    finally:
        second.stop(timeout=5)
    third = Receiver(config)
    ids = {c["id"] for c in third.captures()}
    assert next_one.id in ids, "the record after a cut line was lost"
    assert any("cannot be read" in str(line) for line in lines)


@pytest.mark.parametrize(
    "bad",
    [
        '{"id": "x1", "status": "captured", "received_at": "yesterday"}',
        '{"id": "x2", "status": "captured", "dedupe_key": 7}',
        '{"id": "x3", "status": "captured", "verdict": "critical"}',
        '{"id": "x4", "status": "captured", "notifications": [1, 2]}',
        "[1, 2, 3]",
        "\xff\xfe not json",
    ],
)
def test_a_mistyped_line_is_skipped_and_reported(serve: Any, tmp_path: Path, bad: str) -> None:
    write_config(tmp_path)
    (tmp_path / "bundles").mkdir()
    (tmp_path / "bundles" / JOURNAL).write_text(
        bad + "\n" + json.dumps({"id": "good", "status": "captured", "received_at": 1.0, "alert": "A"}) + "\n"
    )
    running = serve()  # starting is the first thing that broke
    status, page = running.request("GET", "/")
    assert status == 200 and "<td>A</td>" in page.replace(" ", "")


# --- item 11 ------------------------------------------------------------------------------------
def test_one_receiver_owns_a_journal_folder(tmp_path: Path) -> None:
    config = load_config(write_config(tmp_path))
    owner = Receiver(config, run=held)
    owner.start()
    try:
        with pytest.raises(ReceiverBusy, match="already served by another nightowl serve"):
            Receiver(config, run=held).start()
        # The real command says so and exits 2, in another process.
        done = subprocess.run(
            [str(Path(sys.executable).parent / "nightowl"), "serve", "--config", str(tmp_path / "serve.yaml")],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert done.returncode == 2 and "already served by another nightowl serve" in done.stderr
    finally:
        owner.stop(timeout=5)
    after = Receiver(config, run=held)
    after.start()  # the lock went with the owner
    after.stop(timeout=5)


def test_two_receivers_never_both_resume_a_queued_capture(tmp_path: Path) -> None:
    config = load_config(write_config(tmp_path, workers=1))
    crashed = Receiver(config, run=held)  # admits, never runs: the capture stays queued
    crashed.submit(parse_alertmanager(alert_with("xid79-fallen-off-bus", "f1")))
    ran: list[str] = []

    def count(capture: Capture, cfg: Any) -> Capture:
        ran.append(capture.id)
        return held(capture, cfg)

    a, b = Receiver(config, run=count), Receiver(config, run=count)
    a.start()
    try:
        with pytest.raises(ReceiverBusy):
            b.start()
    finally:
        for _ in range(100):
            if ran:
                break
            threading.Event().wait(0.05)
        a.stop(timeout=5)
    assert len(ran) == 1


# --- item 12 ------------------------------------------------------------------------------------
def _pd(event_id: str, event_type: str = "incident.triggered") -> bytes:
    body = json.loads((ALERTS / "pagerduty-incident-triggered.json").read_text())
    body["event"]["id"], body["event"]["event_type"] = event_id, event_type
    return json.dumps(body).encode()


def test_a_reopened_incident_is_captured_again_even_after_a_restart(serve: Any, tmp_path: Path) -> None:
    def post(running: Any, raw: bytes) -> list[str]:
        status, answer = running.request(
            "POST", "/pagerduty", raw, headers={"X-PagerDuty-Signature": sign_pagerduty(raw, SECRET)}
        )
        assert status == 200
        return answer["statuses"]

    config = write_config(tmp_path)
    config.write_text(
        config.read_text().replace("event_type=incident.triggered", "event_type=~incident.(triggered|reopened)")
    )
    running = serve(config, run=held)
    assert post(running, _pd("EV1")) == ["queued"]
    running.wait_idle()
    assert post(running, _pd("EV1")) == ["duplicate"]  # PagerDuty retrying the same event
    running.receiver.stop(timeout=5)
    again = serve(config, run=held)
    assert post(again, _pd("EV1")) == ["duplicate"]
    assert post(again, _pd("EV2", "incident.reopened")) == ["queued"], "a reopened incident was a duplicate"
    assert (
        parse_pagerduty(json.loads(_pd("EV2")))[0].dedupe_key != parse_pagerduty(json.loads(_pd("EV1")))[0].dedupe_key
    )
    # Alertmanager's repeat of one alert (same fingerprint and start) is still one capture.
    same = parse_alertmanager(payload("alertmanager-xid-firing.json"))[0]
    assert same.dedupe_key == parse_alertmanager(payload("alertmanager-xid-firing.json"))[0].dedupe_key
