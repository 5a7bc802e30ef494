"""Issue 14 item 6: the local transport caps output while reading and honours its deadline even when a
grandchild that left the process tree holds the pipe."""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import tracemalloc
from pathlib import Path

from nightowl.transports.local import LocalTransport
from tests.hostile.watchdog import watchdog


def test_output_is_capped_while_reading() -> None:
    # 64 MB written; the transport holds 1 MB of it and counts the rest.
    script = "import sys\nblock = b'x' * (1 << 20)\nfor _ in range(64): sys.stdout.buffer.write(block)\n"
    tracemalloc.start()
    try:
        with watchdog(60):
            result = LocalTransport(output_cap_bytes=1 << 20).run([sys.executable, "-c", script], timeout=60)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 16 << 20, f"held {peak >> 20} MB for a 1 MB cap"
    assert result.rc == 0
    assert len(result.stdout) == 1 << 20
    assert result.stdout_truncated_bytes == 63 << 20


def test_a_grandchild_holding_the_pipe_does_not_hold_the_deadline(tmp_path: Path) -> None:
    pid_file = tmp_path / "grandchild.pid"
    # A daemon: the middle process starts the grandchild in its own session and exits, so the grandchild is
    # out of the process group and out of the tree, and keeps stdout open for 120 s.
    grandchild = f"import os, time; open({str(pid_file)!r}, 'w').write(str(os.getpid())); time.sleep(120)"
    middle = f"import subprocess, sys; subprocess.Popen([sys.executable, '-c', {grandchild!r}], start_new_session=True)"
    script = (
        "import subprocess, sys, time\n"
        f"subprocess.run([sys.executable, '-c', {middle!r}])\n"
        "print('started', flush=True)\n"
        "time.sleep(120)\n"
    )
    try:
        with watchdog(20):
            result = LocalTransport().run([sys.executable, "-c", script], timeout=1)
        assert result.timed_out and result.rc is None
        assert "started" in result.stdout  # what came before the deadline is kept
    finally:
        if pid_file.exists():
            with contextlib.suppress(OSError):
                os.kill(int(pid_file.read_text()), signal.SIGKILL)


def test_a_command_that_closes_its_pipes_and_keeps_running_is_killed_at_the_deadline() -> None:
    script = "import os, time\nos.close(1)\nos.close(2)\ntime.sleep(120)\n"
    with watchdog(20):
        result = LocalTransport().run([sys.executable, "-c", script], timeout=1)
    assert result.timed_out and result.rc is None
