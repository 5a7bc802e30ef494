"""The watcher with a stand-in for the run: bursts, one run at a time, superseding, the saved position
across restarts, SIGTERM's grace, the health file. Waits are watchdogs (give up after a while), never
assertions about how long something took."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from nightowl.watch.burst import MAX_LINES, NEAR, Burst, BurstTracker
from nightowl.watch.daemon import Watcher, WatchOptions
from nightowl.watch.file_source import FileSource
from nightowl.watch.source import Batch
from nightowl.watch.state import Cursor, health_age, read_json
from nightowl.watch.triggers import LineJudge

XID = "[ 10.0] NVRM: Xid (PCI:0000:3b:00): {code}, pid=1, name=python, Ch 00000010"
QUIET = "[ 10.1] systemd[1]: Started session-1.scope."
NVRM = "[ 10.1] NVRM: GPU at PCI:0000:3b:00: GPU-6b3c8a3e-1111-2222-3333-444455556666"  # context: fires nothing
WATCHDOG = 30.0


def wait_for(predicate: Callable[[], bool], what: str) -> None:
    give_up = time.monotonic() + WATCHDOG
    while not predicate():
        assert time.monotonic() < give_up, f"gave up waiting for {what}"
        time.sleep(0.02)


def append(path: Path, *lines: str) -> None:
    with path.open("a") as handle:
        handle.write("".join(line + "\n" for line in lines))


class Harness:
    """A watcher on a file in ``tmp``, its runs recorded; ``gate`` (when set) holds each run until opened."""

    def __init__(self, tmp: Path, gate: threading.Event | None = None, grace: float = 5.0) -> None:
        self.log_file = tmp / "kern.log"
        self.log_file.touch()
        self.cursor = Cursor(tmp / "state" / "cursor.json", "file:test")
        self.health = tmp / "state" / "health.json"
        self.runs: list[Burst] = []
        self.started = threading.Event()
        self.gate = gate
        self.aborted = False
        options = WatchOptions(debounce=0.2, max_age=5.0, grace=grace, poll=0.05, save_every=0.05, health_every=0.1)
        tracker = BurstTracker(LineJudge(), options.debounce, options.max_age)
        source = FileSource(self.log_file, self.cursor.load())
        self.logged: list[tuple[str, dict[str, Any]]] = []
        self.watcher = Watcher(
            source, self.cursor, tracker, self.run, self.health, options, self.note, abort=self.abort
        )
        self.thread = threading.Thread(target=self.watcher.follow)

    def note(self, text: str, **fields: Any) -> None:
        self.logged.append((text, fields))

    def run(self, burst: Burst) -> dict[str, Any]:
        self.started.set()
        if self.gate is not None:
            self.gate.wait(WATCHDOG)
        self.runs.append(burst)
        return {"bundle": f"bundle-{len(self.runs)}"}

    def abort(self) -> None:
        self.aborted = True
        if self.gate is not None:
            self.gate.set()

    def __enter__(self) -> Harness:
        self.thread.start()
        wait_for(self.health.exists, "the first health file")
        return self

    def __exit__(self, *exc: object) -> None:
        self.watcher.stop.set()
        self.thread.join(WATCHDOG)
        assert not self.thread.is_alive()


def test_one_run_per_burst_and_none_again_after_a_restart(tmp_path: Path) -> None:
    with Harness(tmp_path) as first:
        append(first.log_file, QUIET, XID.format(code=79), XID.format(code=79), QUIET)
        wait_for(lambda: len(first.runs) == 1, "the first run")
        append(first.log_file, XID.format(code=48), XID.format(code=63))
        wait_for(lambda: len(first.runs) == 2, "the second run")
        size = first.log_file.stat().st_size
        wait_for(lambda: (first.cursor.saved or {}).get("offset") == size, "the position past both bursts")
    assert [sorted(b.triggers.elements()) for b in first.runs] == [["xid", "xid"], ["xid", "xid"]]
    assert first.runs[0].lines[0].endswith("79, pid=1, name=python, Ch 00000010")
    with Harness(tmp_path) as second:
        append(second.log_file, XID.format(code=13))
        wait_for(lambda: len(second.runs) == 1, "the run of the line written after the restart")
    assert [line.split(": ")[2][:2] for line in second.runs[0].lines] == ["13"]


def test_a_newer_burst_supersedes_the_queued_one_and_runs_never_overlap(tmp_path: Path) -> None:
    gate = threading.Event()
    with Harness(tmp_path, gate) as harness:
        append(harness.log_file, XID.format(code=79))
        wait_for(harness.started.is_set, "the first run to start")
        append(harness.log_file, XID.format(code=48))
        wait_for(lambda: harness.watcher.counts.bursts == 2, "the second burst")
        append(harness.log_file, XID.format(code=63))
        wait_for(lambda: harness.watcher.counts.bursts == 3, "the third burst")
        gate.set()
        wait_for(lambda: len(harness.runs) == 2, "the queued run")
    first, merged = harness.runs
    assert merged.superseded == 1 and harness.watcher.counts.superseded == 1
    assert [line.split(": ")[2][:2] for line in merged.lines] == ["48", "63"]
    assert first.lines[0].split(": ")[2][:2] == "79"


def test_sigterm_mid_run_leaves_the_burst_unjudged_when_the_grace_runs_out(tmp_path: Path) -> None:
    gate = threading.Event()
    harness = Harness(tmp_path, gate, grace=0.2)
    with harness:
        append(harness.log_file, QUIET, XID.format(code=79))
        wait_for(harness.started.is_set, "the run to start")
    assert harness.aborted  # the grace ran out: the run's commands were ended
    assert (harness.cursor.saved or {}).get("offset") == 0  # held at the start of the unjudged burst
    assert read_json(harness.health)["state"] == "stopped"
    with Harness(tmp_path) as again:  # the burst is read and judged again
        wait_for(lambda: len(again.runs) == 1, "the burst judged after the restart")
    assert again.runs[0].lines == [XID.format(code=79)]


def test_sigterm_lets_a_run_in_progress_finish_within_the_grace(tmp_path: Path) -> None:
    gate = threading.Event()
    harness = Harness(tmp_path, gate, grace=WATCHDOG)
    with harness:
        append(harness.log_file, XID.format(code=79))
        wait_for(harness.started.is_set, "the run to start")
        harness.watcher.stop.set()
        threading.Timer(0.3, gate.set).start()
    assert not harness.aborted and len(harness.runs) == 1
    assert (harness.cursor.saved or {}).get("offset") == harness.log_file.stat().st_size


def test_the_health_file_tells_a_probe_what_the_follower_does(tmp_path: Path) -> None:
    with Harness(tmp_path) as harness:
        append(harness.log_file, XID.format(code=79))
        wait_for(lambda: (read_json(harness.health) or {}).get("runs") == 1, "the run in the health file")
        age, doc = health_age(harness.health)
        assert age is not None and age < WATCHDOG
        assert doc is not None and doc["state"] == "following" and doc["last_run"]["bundle"] == "bundle-1"


def test_a_burst_is_bounded_and_closes_on_max_age_in_a_storm() -> None:
    tracker = BurstTracker(LineJudge(), debounce=1.0, max_age=5.0)
    lines = [XID.format(code=13)] + [NVRM] * (MAX_LINES + 500)
    tracker.feed(Batch(lines, {"offset": 0}), now=0.0)
    assert tracker.due(now=0.5) is None  # still firing
    tracker.feed(Batch([XID.format(code=13)], {"offset": 1}), now=4.9)
    burst = tracker.due(now=5.0)  # never quiet, judged at max_age
    assert burst is not None and burst.dropped_lines == 500 - NEAR  # context beyond the cap, but beside a trigger
    assert len(burst.lines) == 1 + MAX_LINES + NEAR + 1 and burst.lines[-1] == XID.format(code=13)
    assert burst.start == {"offset": 0} and tracker.open is None


def test_a_burst_left_unjudged_at_a_stop_is_judged_from_the_rotated_file_after_the_restart(tmp_path: Path) -> None:
    gate = threading.Event()
    harness = Harness(tmp_path, gate, grace=0.2)
    with harness:
        append(harness.log_file, QUIET)
        size = harness.log_file.stat().st_size
        wait_for(lambda: (harness.cursor.saved or {}).get("offset") == size, "the position past the quiet line")
        append(harness.log_file, XID.format(code=79))
        wait_for(harness.started.is_set, "the run to start")
    assert harness.aborted and (harness.cursor.saved or {}).get("offset") == size  # held at the burst's start
    harness.log_file.rename(tmp_path / "kern.log.1")  # rotated (logrotate's create) while stopped
    with Harness(tmp_path) as again:
        append(again.log_file, XID.format(code=48))
        wait_for(lambda: sum(len(run.lines) for run in again.runs) == 2, "both bursts judged")
    assert [line for run in again.runs for line in run.lines] == [XID.format(code=79), XID.format(code=48)]
    assert any("kern.log.1" in text for text, _ in again.logged)
