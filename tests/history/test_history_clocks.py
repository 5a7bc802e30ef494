"""One Xid read through two clocks is one event (issue "trust, round four", item 5).

journalctl -o short-iso prints the zone (``+0200``); the dmesg -T fallback prints local time with no zone,
and moves with a clock step after boot. The same line read both ways was stored twice, two hours apart,
and the second run called the GPU a repeat offender.
"""

from __future__ import annotations

import json
import shutil
import sqlite3
from pathlib import Path

import pytest
from click.testing import CliRunner

from nightowl.cli.main import main
from nightowl.collectors.gpu.history_rows import event_row, same_event
from nightowl.history import store
from nightowl.paths import data_dir

SMI = data_dir("fixtures") / "hosts" / "xid79-fallen-off-bus" / "nvidia-smi.out"
XID79 = "NVRM: Xid (PCI:0000:a1:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus."
JOURNAL = "2024-04-05T{clock}+0200 gpu-17 kernel: " + XID79  # journalctl -k -o short-iso, a host at UTC+2
DMESG_T = "[Fri Apr  5 {clock} 2024] " + XID79  # dmesg -T on the same host: local time, no zone


def verdict_of(tmp_path: Path, name: str, line: str, db: Path) -> dict:
    host = tmp_path / name / "gpu-17"
    host.mkdir(parents=True)
    (host / "kernel-log.out").write_text(line + "\n")
    shutil.copy(SMI, host / "nvidia-smi.out")
    args = ["triage", "xid", "--replay", str(host), "--out", str(tmp_path / "b"), "--history", str(db)]
    result = CliRunner().invoke(main, [*args, "--format", "json"], catch_exceptions=False)
    return json.loads(result.stdout)["hosts"][0]["verdict"]


@pytest.mark.parametrize(
    "first, second", [(JOURNAL, DMESG_T), (DMESG_T, JOURNAL)], ids=["journal-first", "dmesg-first"]
)
def test_one_xid_through_both_clocks_is_one_event_and_a_second_an_hour_later_is_two(
    tmp_path: Path, first: str, second: str
) -> None:
    db = tmp_path / "h.sqlite3"
    assert verdict_of(tmp_path, "a", first.format(clock="21:29:39"), db)["action"] == "reboot-node"
    again = verdict_of(tmp_path, "b", second.format(clock="21:29:39"), db)
    assert (again["id"], again["action"]) == ("gpu-fell-off-bus", "reboot-node"), again["summary"]
    for name in ("a2", "b2"):  # each clock's reading once more: still one row, its times on one clock
        assert (
            verdict_of(tmp_path, name, (first if name == "a2" else second).format(clock="21:29:39"), db)["action"]
            == "reboot-node"
        )
    events = store.read(db, "SELECT * FROM events WHERE code = 79")
    assert len(events) == 1
    zoned = "2024-04-05T21:29:39+02:00"  # the reading that names its zone is kept
    assert (events[0]["first_time"], events[0]["last_time"], events[0]["count"]) == (zoned, zoned, 1)
    # a genuine second Xid 79 an hour later (the journal read with --since, so without the first line)
    later = verdict_of(tmp_path, "c", JOURNAL.format(clock="22:29:39"), db)
    assert (later["id"], later["action"]) == ("gpu-repeat-offender", "hardware-ticket")
    assert len(store.read(db, "SELECT * FROM events WHERE code = 79")) == 2


def row(time: str | None, boot: str | None = None, monotonic: str | None = None) -> dict:
    event = {"kind": "xid", "code": 79, "pci": "0000:a1:00", "text": "GPU has fallen off the bus.", "time": time}
    if monotonic is not None:
        event["monotonic"] = monotonic
    return event_row("gpu-17", event, boot)


@pytest.mark.parametrize(
    "a, b, same",
    [
        (row("2024-04-05T21:29:39+02:00"), row("2024-04-05T19:29:39+00:00"), True),  # one instant, two zones
        (row("2024-04-05T21:29:39+02:00"), row("2024-04-05T21:29:39"), True),  # dmesg -T's local time
        (row("2024-04-05T21:29:39+05:45"), row("2024-04-05T21:30:20"), True),  # Nepal, and a 41 s clock step
        (row("2024-04-05T21:29:39+02:00"), row("2024-04-05T22:29:39"), True),  # an hour: could be a zone
        (row("2024-04-05T21:29:39+02:00"), row("2024-04-05T22:29:39+02:00"), False),  # both zoned: an hour
        (row("2024-04-05T21:29:39"), row("2024-04-05T22:29:39"), False),  # both local: an hour
        (row("2024-04-05T21:29:39"), row("2024-04-05T21:30:20"), True),  # dmesg -T after a 41 s clock step
        (row("2024-04-05T21:29:39+00:00"), row("2024-04-05T21:36:39"), False),  # 7 minutes is no zone
        (row("2024-04-05T00:00:00+00:00"), row("2024-04-05T14:30:00"), False),  # beyond UTC+14
        (row("2024-04-05T21:29:39+00:00", "b1"), row("2024-04-05T21:29:39", "b2"), False),  # other boots
        # the kernel's own stamp decides where both have it: a clock stepped 3h07m, or the same wall time
        (row("Apr  5 21:29:39", "b1", "123.456789"), row("123.456789", "b1"), True),
        (row("2024-04-05T21:29:39+00:00", "b1", "123.456789"), row("2024-04-06T00:36:39", "b1", "123.456789"), True),
        (row("2024-04-05T21:29:39+00:00", "b1", "123.456789"), row("2024-04-05T21:29:39", "b1", "3723.4"), False),
    ],
)
def test_same_event_by_boot_monotonic_zone_and_clock_step(a: dict, b: dict, same: bool) -> None:
    assert same_event(a, b) is same
    assert same_event(b, a) is same


def test_syslog_and_plain_dmesg_of_one_boot_share_a_key() -> None:
    """Keyed by boot and monotonic stamp: no wall clock in the key where the kernel's own stamp is known."""
    assert row("Apr  5 21:29:39", "b1", "123.456789")["key"] == row("123.456789", "b1")["key"]
    assert row("123.456789", "b1")["key"] != row("123.456789", "b2")["key"]


def test_a_version_1_store_gains_the_monotonic_column(tmp_path: Path) -> None:
    db = tmp_path / "h.sqlite3"
    with sqlite3.connect(db) as conn:
        conn.executescript(store.SCHEMA.replace(",\n    monotonic REAL\n", "\n"))
        conn.execute("PRAGMA user_version = 1")
    record = {"bundle_id": "b", "bundle_sha256": "0" * 64, "runbook": "xid", "started": 1.0}
    record["runs"] = [{"host": "gpu-17", "events": [row("123.456789", "b1")]}]
    assert store.write(db, record) == 1
    assert store.read(db, "SELECT monotonic FROM events") == [{"monotonic": 123.456789}]
