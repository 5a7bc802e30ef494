"""Issue 30 item 1: an output past the transport's cap keeps its head and tail, says what was cut, and a
verdict read from a cut log says so (journalctl -k -b prints oldest first: the Xid is at the end)."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path
from typing import Any

import pytest

from nightowl.cli.sweep_cmd import param_values, run_sweep
from nightowl.collectors import get_collector
from nightowl.engine.runner import RunOptions, collect_on
from nightowl.library import runbooks
from nightowl.paths import data_dir
from nightowl.transports.capped import CappedOutput
from nightowl.transports.local import LocalTransport
from nightowl.transports.replay import ReplayTransport

HEALTHY = data_dir("fixtures") / "hosts" / "healthy-l40s"
XID79 = data_dir("fixtures") / "hosts" / "xid79-fallen-off-bus"
CAP = 64 * 1024


def test_the_buffer_keeps_whole_lines_of_head_and_tail_and_counts_the_cut() -> None:
    lines = [f"line {n:06d}\n".encode() for n in range(20_000)]
    buffer = CappedOutput(4096)
    for line in lines:
        buffer.add(line)
    kept, cut, at = buffer.value()
    assert kept.startswith(b"line 000000\n") and kept.endswith(b"line 019999\n")
    assert len(kept) <= 4096 and cut == sum(map(len, lines)) - len(kept)
    assert at is not None and kept[:at].endswith(b"\n") and kept[at:].startswith(b"line ")
    assert all(line in set(lines) for line in kept.splitlines(keepends=True))


def test_under_the_cap_nothing_is_cut() -> None:
    buffer = CappedOutput(100)
    buffer.add(b"a" * 60)
    buffer.add(b"b" * 40)
    assert buffer.value() == (b"a" * 60 + b"b" * 40, 0, None)


def long_log(tmp_path: Path) -> Path:
    """A boot log far past the cap whose last lines hold the Xid 79 (oldest first, as journalctl prints)."""
    healthy = (HEALTHY / "kernel-log.out").read_text()
    path = tmp_path / "kernel.log"
    path.write_text(healthy * (4 * CAP // len(healthy) + 1) + (XID79 / "kernel-log.out").read_text())
    return path


def fake_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, outputs: dict[str, Path]) -> None:
    """Put commands on PATH that print the given files at once."""
    folder = tmp_path / "bin"
    folder.mkdir()
    for name, source in outputs.items():
        script = folder / name
        script.write_text(f"#!/bin/sh\ncat '{source}'\n")
        script.chmod(script.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("PATH", f"{folder}{os.pathsep}{os.environ['PATH']}")


def test_a_cut_kernel_log_still_shows_its_newest_xid_and_says_it_was_cut(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = long_log(tmp_path)
    fake_path(tmp_path, monkeypatch, {"journalctl": log, "dmesg": log})
    run = collect_on(LocalTransport(output_cap_bytes=CAP), get_collector("kernel-log"), _NoRecorder(), RunOptions())
    assert run.facts is not None and 79 in run.facts["xid_codes"]
    assert run.facts["truncated"] is True
    assert run.facts["truncated_bytes"] == log.stat().st_size - len(run.attempts[0].stdout.encode())


def test_an_output_under_the_cap_is_marked_not_truncated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    log = HEALTHY / "kernel-log.out"
    fake_path(tmp_path, monkeypatch, {"journalctl": log, "dmesg": log})
    run = collect_on(LocalTransport(), get_collector("kernel-log"), _NoRecorder(), RunOptions())
    assert run.facts is not None and run.facts["truncated"] is False and run.facts["truncated_bytes"] == 0


def test_a_verdict_on_a_cut_log_says_so_and_its_bundle_replays_cut(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    healthy_log = tmp_path / "healthy.log"
    text = (HEALTHY / "kernel-log.out").read_text()
    healthy_log.write_text(text * (4 * CAP // len(text) + 1))
    fake_path(tmp_path, monkeypatch, {"nvidia-smi": HEALTHY / "nvidia-smi.out", "journalctl": healthy_log})
    run_sweep(
        runbooks.load("node-health"),
        {"gpu-17": lambda: LocalTransport("gpu-17", output_cap_bytes=CAP)},
        param_values((), None),
        {"command_timeout": 10.0, "host_timeout": None},
        fmt="json",
        textfile=None,
        log_format="json",
        out_dir=tmp_path / "b",
        forks=1,
    )
    (host,) = json.loads(capsys.readouterr().out)["hosts"]
    caveats = host["verdict"]["caveats"]
    assert any(c.startswith("the kernel-log output was cut at the transport's cap") for c in caveats)
    assert "Caveat: the kernel-log output was cut" in host["verdict"]["summary"]
    (bundle,) = (tmp_path / "b").iterdir()
    (recorded,) = (bundle / "hosts").iterdir()
    replayed = ReplayTransport(recorded, "gpu-17").run(["journalctl"], 5, kind="kernel-log")
    assert replayed.stdout_truncated_bytes == int((recorded / "kernel-log.truncated").read_text())
    assert replayed.stdout_truncated_bytes > 0


def test_a_replayed_file_past_the_cap_keeps_its_tail(tmp_path: Path) -> None:
    (tmp_path / "kernel-log.out").write_bytes(long_log(tmp_path).read_bytes())
    result = ReplayTransport(tmp_path, output_cap_bytes=CAP).run(["dmesg"], 5, kind="kernel-log")
    assert "GPU has fallen off the bus" in result.stdout and result.stdout_truncated_bytes > 0


class _NoRecorder:
    def record_command(self, host: str, kind: str, result: Any, keep_output: bool) -> str | None:
        return None


@pytest.mark.parametrize("cap", [0, 1, 7, 64, 4096])
def test_text_is_the_kept_bytes_decoded_however_the_output_arrived(cap: int) -> None:
    """``text`` decodes an output that fits the head where it lies: the same text as ``value`` decoded, for
    outputs under, at and past the cap, split anywhere (a UTF-8 character cut between chunks included)."""
    import random

    rng = random.Random(cap)
    outputs = [b"", b"\n", "é GPU 0 \u00e9\n".encode() * 40, bytes(rng.randrange(256) for _ in range(3000))]
    outputs.append((HEALTHY / "nvidia-smi.out").read_bytes()[:9000])
    for data in outputs:
        buffer = CappedOutput(cap)
        at = 0
        while at < len(data):
            step = rng.randrange(1, 300)
            buffer.add(data[at : at + step])
            at += step
        kept, cut, cut_at = buffer.value()
        assert buffer.text() == (kept.decode("utf-8", errors="replace"), cut, cut_at)
        if not buffer.overflowed:
            assert kept == data
