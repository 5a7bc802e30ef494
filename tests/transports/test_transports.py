"""local and replay transports: same frozen result, deadlines that kill whole process trees."""

from __future__ import annotations

import dataclasses
import sys
import time
from pathlib import Path

import psutil
import pytest

from nightowl.transports.base import TransportError
from nightowl.transports.local import LocalTransport
from nightowl.transports.replay import ReplayTransport


def test_local_runs_argv_without_shell() -> None:
    result = LocalTransport().run(["echo", "$(hostname); rm -rf /"], timeout=5)
    assert result.ok and result.stdout == "$(hostname); rm -rf /\n"
    with pytest.raises(dataclasses.FrozenInstanceError):
        result.rc = 1  # type: ignore[misc]


def test_local_timeout_kills_the_process_tree(tmp_path: Path) -> None:
    pidfile = tmp_path / "child.pid"
    script = (
        f"import subprocess,sys,time; p=subprocess.Popen([sys.executable,'-c','import time; time.sleep(60)']);"
        f"open({str(pidfile)!r},'w').write(str(p.pid)); time.sleep(60)"
    )
    t0 = time.monotonic()
    result = LocalTransport().run([sys.executable, "-c", script], timeout=1.0)
    assert result.timed_out and result.rc is None
    assert time.monotonic() - t0 < 10
    child = int(pidfile.read_text())
    deadline = time.monotonic() + 5
    while psutil.pid_exists(child) and psutil.Process(child).status() != psutil.STATUS_ZOMBIE:
        assert time.monotonic() < deadline, "grandchild survived the timeout"
        time.sleep(0.05)


def test_local_missing_command_is_a_result_not_an_exception() -> None:
    result = LocalTransport().run(["/nonexistent/nvidia-smi"], timeout=1)
    assert result.rc is None and not result.ok and "No such file" in (result.error or "")


def test_local_caps_output() -> None:
    result = LocalTransport(output_cap_bytes=1000).run([sys.executable, "-c", "print('x'*5000)"], timeout=5)
    assert len(result.stdout) == 1000 and result.stdout_truncated_bytes == 4001


def test_replay_reads_recorded_files_in_order(tmp_path: Path) -> None:
    (tmp_path / "metrics.1.out").write_text("first")
    (tmp_path / "metrics.2.out").write_text("second")
    (tmp_path / "nvidia-smi.out").write_text("No devices were found\n")
    (tmp_path / "nvidia-smi.rc").write_text("6\n")
    (tmp_path / "kernel-log.timeout").write_text("20\n")
    replay = ReplayTransport(tmp_path)
    replay.connect()
    assert [replay.run(["curl"], 5, kind="metrics").stdout for _ in range(3)][:2] == ["first", "second"]
    smi = replay.run(["nvidia-smi", "-q"], 5, kind="nvidia-smi")
    assert smi.rc == 6 and smi.stdout.startswith("No devices")
    assert replay.run(["dmesg"], 5, kind="kernel-log").timed_out
    assert replay.run(["x"], 5, kind="nccl-log").error.startswith("not recorded")


@pytest.mark.parametrize(
    ("recorded", "why"),
    [
        ("none\n", "ended without an exit status"),
        ("ok\n", "unreadable exit code 'ok'"),
        ("", "unreadable exit code ''"),
    ],
)
def test_an_exit_code_that_is_not_a_number_never_replays_as_success(tmp_path: Path, recorded: str, why: str) -> None:
    (tmp_path / "nvidia-smi.out").write_text("<nvidia_smi_log>\n")
    (tmp_path / "nvidia-smi.rc").write_text(recorded)
    result = ReplayTransport(tmp_path).run(["nvidia-smi", "-q", "-x"], 5, kind="nvidia-smi")
    assert not result.ok and result.rc is None and result.error == f"nvidia-smi.rc: {why}"


def test_a_command_without_exit_status_is_recorded_so_and_replays_as_an_error(tmp_path: Path) -> None:
    from nightowl.collectors import get_collector
    from nightowl.engine.bundle_writer import BundleWriter
    from nightowl.engine.runner import RunOptions, collect_on
    from nightowl.transports.base import CommandResult

    class LostMidway:
        host = "gpu-1"

        def run(self, argv: tuple[str, ...], timeout: float, kind: str | None = None) -> CommandResult:
            return CommandResult(
                tuple(argv), None, "==== NVSMI LOG ====\n", "", time.time(), 1.0, error="connection lost"
            )

    writer = BundleWriter(tmp_path / "out", "node-health")
    live = collect_on(LostMidway(), get_collector("nvidia-smi"), writer, RunOptions(), single_attempt=True)
    folder = writer.tmp_path / "hosts" / "gpu-1"
    assert live.status == "error" and (folder / "nvidia-smi.rc").read_text() == "none\n"
    replayed = collect_on(
        ReplayTransport(folder), get_collector("nvidia-smi"), BundleWriter(tmp_path / "again", "x"), RunOptions(), True
    )
    assert replayed.status == "error" and "without an exit status" in (replayed.reason or "")


def test_replay_missing_or_unreachable_host(tmp_path: Path) -> None:
    with pytest.raises(TransportError):
        ReplayTransport(tmp_path / "absent").connect()
    (tmp_path / "unreachable").write_text("refused: connection refused\n")
    with pytest.raises(TransportError, match="refused"):
        ReplayTransport(tmp_path).connect()


def test_known_hosts_is_parsed_once_per_file_version_and_indexed(tmp_path) -> None:
    """A sweep opens one connection per host: the file is read once, lookups go through the index,
    and a changed file (accept-new wrote to it) is read again."""
    import base64

    from nightowl.transports import ssh

    blob = base64.b64encode(b"\x00\x00\x00\x0bssh-ed25519" + b"\x00" * 36).decode()
    path = tmp_path / "known_hosts"
    lines = [f"gpu-{i:04d} ssh-ed25519 {blob}" for i in range(300)] + [f"*.corp ssh-ed25519 {blob}"]
    path.write_text("\n".join(lines) + "\n")
    first, second = ssh.KnownHosts.load(path), ssh.KnownHosts.load(path)
    assert first.entries[0] is second.entries[0]  # parsed once
    assert [e.patterns for e in first.for_host("gpu-0042")] == [("gpu-0042",)]
    assert [e.patterns for e in first.for_host("x.corp")] == [("*.corp",)]  # wildcards still scanned
    assert first.for_host("gpu-9999") == []
    path.write_text(path.read_text() + f"gpu-9999 ssh-ed25519 {blob}\n")
    assert [e.patterns for e in ssh.KnownHosts.load(path).for_host("gpu-9999")] == [("gpu-9999",)]
