"""A deadline that expires while nightowl was behind is never the host's fault (CONTRACT section 6).

Every test holds the reader back at the transports' one wait for output (``_wait_readable``), as a
saturated sweep does, and never asserts a timing: the command itself answers at once, so whatever
its deadline finds unread is nightowl's lateness.
"""

from __future__ import annotations

import json
import os
import selectors
import stat
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from nightowl.cli.exit import ExitStatus
from nightowl.cli.sweep_cmd import param_values, run_sweep
from nightowl.engine.runner import RunOptions, collect_on
from nightowl.library import runbooks
from nightowl.paths import data_dir
from nightowl.transports import local
from nightowl.transports.local import LocalTransport
from nightowl.transports.replay import ReplayTransport

HEALTHY = data_dir("fixtures") / "hosts" / "healthy-l40s"
PRINT_5000 = [sys.executable, "-c", "import sys; sys.stdout.write('x' * 5000)"]


def hold_reader(monkeypatch: pytest.MonkeyPatch, seconds: float, times: int = 1) -> None:
    """The first ``times`` waits for output sleep ``seconds`` and read nothing (a starved reader)."""
    real = local._wait_readable
    held = {"left": times}

    def starved(selector: selectors.BaseSelector, timeout: float) -> list[selectors.SelectorKey]:
        if held["left"] > 0:
            held["left"] -= 1
            time.sleep(seconds)
            return []
        return real(selector, timeout)

    monkeypatch.setattr(local, "_wait_readable", starved)


def test_a_command_that_answered_while_the_reader_was_held_is_late_not_timed_out(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    hold_reader(monkeypatch, 1.0)
    result = LocalTransport().run(PRINT_5000, timeout=0.5)
    assert not result.timed_out and not result.ok
    assert result.late == "nightowl was overloaded (read 0 of 5000 bytes in 0.5 s)"
    assert result.rc == 0 and result.stdout == "x" * 5000  # kept for the bundle, never judged


def test_a_command_that_hangs_is_timed_out_even_with_the_reader_held(monkeypatch: pytest.MonkeyPatch) -> None:
    hold_reader(monkeypatch, 0.6)
    result = LocalTransport().run(["sleep", "30"], timeout=0.3)
    assert result.timed_out and result.late is None and result.rc is None


def test_without_a_held_reader_the_same_command_is_ok() -> None:
    result = LocalTransport().run(PRINT_5000, timeout=5)
    assert result.ok and result.late is None


class _Smi:
    """The smallest collector: its command prints, its parse would call an empty output clean."""

    kind = "nvidia-smi"
    commands = (tuple(PRINT_5000), ("true",))
    timeout = 0.5
    invasive = False

    @property
    def parse(self) -> Any:
        return lambda text: {"gpus": len(text)}

    @property
    def facts(self) -> Any:
        return lambda parsed: parsed


class _Recorder:
    def __init__(self) -> None:
        self.kept: list[Any] = []

    def record_command(self, host: str, kind: str, result: Any, keep_output: bool) -> str | None:
        self.kept.append((result, keep_output))
        return None


def test_a_late_collection_has_no_facts_and_runs_no_fallback(monkeypatch: pytest.MonkeyPatch) -> None:
    hold_reader(monkeypatch, 1.0)
    recorder = _Recorder()
    run = collect_on(LocalTransport(), _Smi(), recorder, RunOptions())
    assert run.status == "late" and run.facts is None
    assert run.reason is not None and run.reason.startswith("nightowl was overloaded (read 0 of 5000 bytes")
    assert len(run.attempts) == 1  # "true" would have answered in time and been judged instead


def fake_bin(tmp_path: Path) -> Path:
    """nvidia-smi and journalctl that print the healthy recording at once."""
    folder = tmp_path / "bin"
    folder.mkdir()
    for name, source in (("nvidia-smi", "nvidia-smi.out"), ("journalctl", "kernel-log.out")):
        script = folder / name
        script.write_text(f"#!/bin/sh\ncat '{HEALTHY / source}'\n")
        script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return folder


def check_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> Any:
    monkeypatch.setenv("PATH", f"{fake_bin(tmp_path)}{os.pathsep}{os.environ['PATH']}")
    status = run_sweep(
        runbooks.load("node-health"),
        {"gpu-17": lambda: LocalTransport("gpu-17")},
        param_values((), None),
        {"command_timeout": 0.5, "host_timeout": None},
        fmt="json",
        textfile=tmp_path / "n.prom",
        log_format="json",
        out_dir=tmp_path / "b",
        forks=1,
    )
    (host,) = json.loads(capsys.readouterr().out)["hosts"]
    return status, host


def test_check_on_a_held_reader_cannot_judge_and_never_blames_the_node(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    hold_reader(monkeypatch, 1.0, times=1000)
    status, host = check_run(tmp_path, monkeypatch, capsys)
    assert status == ExitStatus.NO_VERDICT
    assert host["verdict"] is None and host["status"] == "incomplete"
    assert host["error"].startswith("cannot judge: nightowl was overloaded (read 0 of ")
    assert "hung" not in json.dumps(host)


def test_check_with_a_reader_that_keeps_up_judges_the_same_node(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    status, host = check_run(tmp_path, monkeypatch, capsys)
    assert host["verdict"] is not None, host.get("error")
    assert status != ExitStatus.NO_VERDICT


def test_a_late_command_in_a_bundle_replays_late(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    hold_reader(monkeypatch, 1.0, times=1000)
    check_run(tmp_path, monkeypatch, capsys)
    (bundle,) = (tmp_path / "b").iterdir()
    (folder,) = (bundle / "hosts").iterdir()
    assert (folder / "nvidia-smi.late").read_text().startswith("nightowl was overloaded")
    replayed = ReplayTransport(folder, "gpu-17").run(["nvidia-smi", "-q"], 5, kind="nvidia-smi")
    assert replayed.late is not None and not replayed.timed_out


class _DroppingChannel:
    """A channel whose command answered and whose connection dropped before it could be closed."""

    eof_received, closed, remote_chanid = True, False, 0

    def __init__(self) -> None:
        import threading

        self.status_event = threading.Event()
        self.status_event.set()
        self.exit_status = 0

    def exec_command(self, command: str) -> None:
        return None

    def exit_status_ready(self) -> bool:
        return True

    def recv_ready(self) -> bool:
        return False

    def recv_stderr_ready(self) -> bool:
        return False

    def close(self) -> None:
        raise EOFError  # paramiko's packetizer when the socket is gone


class _Transport:
    def open_session(self, timeout: float) -> _DroppingChannel:
        return _DroppingChannel()

    def is_active(self) -> bool:
        return True


def test_a_connection_that_drops_at_close_is_a_result_not_an_internal_error() -> None:
    from nightowl.transports.hostspec import parse_host_spec
    from nightowl.transports.ssh import SSHTransport

    transport = SSHTransport(parse_host_spec("ssh://root@gpu-17"))
    transport._transport = _Transport()  # type: ignore[assignment]
    result = transport.run(["nvidia-smi", "-q"], timeout=5)
    assert result.rc == 0 and result.error is None
