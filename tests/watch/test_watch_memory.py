"""Memory stays bounded whatever the line rate: 1 GB of non-matching lines appended at full speed to a
followed file, and the watcher's peak RSS (VmHWM) stays under the issue's bound.

Integration (tens of seconds of CPU on a small machine): ``pytest -m integration tests/watch``.
The lines are generated here; the wait is a watchdog, not a timing assertion.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from nightowl.watch.state import read_json

RSS_BOUND_KB = 80 * 1024  # the bound for a follower
TOTAL_BYTES = 1 << 30
WATCHDOG = 900.0
NIGHTOWL = [sys.executable, "-c", "from nightowl.cli.main import main; main()"]


def quiet_block(size: int = 1 << 20) -> bytes:
    """About ``size`` bytes of varied syslog-like lines none of which the kernel-log parser reads."""
    lines = []
    total = 0
    number = 0
    while total < size:
        line = f"2026-12-01T20:00:{number % 60:02d}+0000 gpu-17 systemd[1]: Started session-{number}.scope.\n"
        lines.append(line)
        total += len(line)
        number += 1
    return "".join(lines).encode()


def peak_rss_kb(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    raise AssertionError("no VmHWM")


@pytest.mark.integration
@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="needs /proc")
def test_a_gigabyte_of_quiet_lines_keeps_rss_under_the_bound(tmp_path: Path) -> None:
    log = tmp_path / "kern.log"
    log.touch()
    state = tmp_path / "state"
    env = {**os.environ, "HOME": str(tmp_path), "XDG_STATE_HOME": str(tmp_path / "xdg"), "NODE_NAME": "gpu-rss"}
    argv = [*NIGHTOWL, "watch", "--file", str(log), "--state-dir", str(state), "--out", str(tmp_path / "out")]
    proc = subprocess.Popen([*argv, "--log-format", "json"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
    try:
        give_up = time.monotonic() + WATCHDOG
        while not (state / "health.json").exists():
            assert proc.poll() is None and time.monotonic() < give_up, "the watcher did not start"
            time.sleep(0.1)
        block = quiet_block()
        with log.open("ab") as handle:  # as fast as this process can write
            for _ in range(TOTAL_BYTES // len(block) + 1):
                handle.write(block)
        size = log.stat().st_size
        cursor = next(state.glob("file-*.json"), None)
        while not (cursor and (read_json(cursor) or {}).get("position", {}).get("offset") == size):
            assert proc.poll() is None, "the watcher exited"
            assert time.monotonic() < give_up, "gave up waiting for the watcher to read the gigabyte"
            time.sleep(0.5)
            cursor = cursor or next(state.glob("file-*.json"), None)
        peak = peak_rss_kb(proc.pid)
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(60)
    assert size >= TOTAL_BYTES
    assert peak < RSS_BOUND_KB, f"peak RSS {peak} kB"
    assert not list((tmp_path / "out").glob("*")), "a quiet log ran the runbook"
