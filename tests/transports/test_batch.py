"""Several commands in one session (nightowl/transports/batch.py): each command's output, errors and exit
status come back as it would alone, whatever the output holds, and what did not come back whole is left to
run alone. The script runs here under a real ``sh``, as sshd runs it on a host."""

from __future__ import annotations

import os
import select
import shlex
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from nightowl.transports import batch
from nightowl.transports.base import CommandResult
from nightowl.transports.ssh import remote_command


def run_script(lines: list[str], nonce: str, lanes: tuple[int, ...] = ()) -> CommandResult:
    started = 0.0
    done = subprocess.run(
        ["sh", "-c", batch.script(lines, nonce, lanes)], capture_output=True, text=True, input="stdin is not theirs\n"
    )
    return CommandResult(("sh", "-c", "..."), done.returncode, done.stdout, done.stderr, started, 0.5)


ARGVS = [
    ("printf", "no newline at the end"),
    ("sh", "-c", "echo out; echo err >&2; exit 3"),
    ("printf", "two\n\nblank lines\n\n"),
    ("true",),
    ("cat",),  # reads stdin: gets /dev/null, never the session's
    ("printf", "%s\n", "a line that looks like a frame: nightowl-0000 0 end 0"),
    ("printf", "caf\u00e9 \u2014 UTF-8\n"),
]
TIMEOUT = 3  # each command's own limit (the batch's session took 0.5 s: run_script)


@pytest.mark.parametrize("lanes", [(), (3, 2, 2), (1, 6)])
def test_each_command_answers_as_it_would_alone(lanes: tuple[int, ...]) -> None:
    """Alone, sshd's shell runs the command under the host's `timeout` (transports/ssh.py remote_command); so does
    each command of a batch whose reads run in lanes side by side."""
    nonce = batch.new_nonce()
    lines = [batch.command_line(argv, remote_command(argv, TIMEOUT)) for argv in ARGVS]
    answered = batch.results(ARGVS, lines, [TIMEOUT] * len(ARGVS), run_script(lines, nonce, lanes), nonce)
    for argv, line in zip(ARGVS, lines, strict=True):
        sent_alone = remote_command(argv, TIMEOUT)
        alone = subprocess.run(["sh", "-c", sent_alone], capture_output=True, text=True, stdin=subprocess.DEVNULL)
        got = answered[argv]
        assert (got.rc, got.stdout, got.stderr) == (alone.returncode, alone.stdout, alone.stderr), argv
        assert got.extra["remote_command"] == line and got.error is None and not got.timed_out
        assert "one SSH session" in got.extra["batch"]


def batched(
    argvs: list[tuple[str, ...]], timeout: float, lanes: tuple[int, ...] = ()
) -> dict[tuple[str, ...], CommandResult]:
    """What one batch of ``argvs`` answers, each with the limit ``timeout``, as SSHTransport sends them."""
    nonce = batch.new_nonce()
    lines = [batch.command_line(argv, remote_command(argv, timeout)) for argv in argvs]
    return batch.results(argvs, lines, [timeout] * len(argvs), run_script(lines, nonce, lanes), nonce)


def alone(argv: tuple[str, ...], timeout: float = TIMEOUT) -> tuple[int, str, str]:
    """(exit status, stdout, stderr) of ``argv`` sent alone: sshd's shell runs it under the host's `timeout`."""
    done = subprocess.run(
        ["sh", "-c", remote_command(argv, timeout)], capture_output=True, text=True, stdin=subprocess.DEVNULL
    )
    return done.returncode, done.stdout, done.stderr


@pytest.mark.parametrize("status", [124, 137])
def test_an_exit_the_hosts_timeout_gives_runs_alone(status: int) -> None:
    """Alone, under the host's `timeout`, exit 124 or 137 is that timeout ending the command (a hang): in a batch,
    which runs it bare, the same exit is left to the command run alone, which judges it as alone."""
    argvs = [("sh", "-c", f"echo before; exit {status}"), ("printf", "after it")]
    assert list(batched(argvs, TIMEOUT)) == [argvs[1]]


def test_a_program_the_host_does_not_have_answers_as_alone() -> None:
    """A program the shell cannot find runs as it is sent alone (under the host's `timeout`, which says so in its
    own words, exit 127): that answer is taken. One the shell finds but cannot run (exit 126 from the shell,
    whose words alone would be `timeout`'s) is left to run alone."""
    argvs = [("no-such-tool-here", "-x"), ("printf", "after it"), ("/dev/null",)]
    answered = batched(argvs, TIMEOUT)
    assert list(answered) == argvs[:2]
    missing = answered[argvs[0]]
    assert (missing.rc, missing.stdout, missing.stderr) == alone(argvs[0]) and missing.rc == 127
    assert "timeout" in missing.stderr


@pytest.mark.parametrize(
    "argv",
    [
        ("exit", "0"),  # a builtin alone is a program `timeout` cannot find: never the session shell's exit
        ("A=b", "printf", "x"),  # alone, `timeout` runs a program named A=b: never an assignment
        ("set", "-e"),
        ("cd", "/"),
    ],
)
def test_a_word_the_shell_would_take_for_its_own_is_a_program_as_alone(argv: tuple[str, ...]) -> None:
    """The session's shell never runs a command as a builtin, an assignment or a function: what it answers is what
    the program `timeout` would look for gives alone, or nothing (run alone then); the commands after it answer."""
    answered = batched([argv, ("printf", "after it")], TIMEOUT)
    assert answered[("printf", "after it")].stdout == "after it"
    if argv in answered:
        assert (answered[argv].rc, answered[argv].stdout, answered[argv].stderr) == alone(argv)


def test_a_command_whose_limit_is_shorter_than_the_session_runs_alone() -> None:
    """The session took 0.5 s (run_script): a command with a 0.2 s limit may have run past it, where alone the
    host's `timeout` would have ended it, so its answer is not taken; one with a limit of 1 s is."""
    nonce = batch.new_nonce()
    argvs = [("printf", "quick"), ("printf", "also quick")]
    lines = [batch.command_line(argv, remote_command(argv, 1.0)) for argv in argvs]
    answered = batch.results(argvs, lines, [0.2, 1.0], run_script(lines, nonce), nonce)
    assert list(answered) == [argvs[1]]


def test_a_command_killed_by_a_signal_runs_alone() -> None:
    """Alone, sshd reports the signal (no exit status); here the shell would turn it into 128+n and a note of its
    own in the errors: not the same answer, so none."""
    argvs = [("sh", "-c", "echo partial; kill -SEGV $$"), ("printf", "fine")]
    assert list(batched(argvs, TIMEOUT)) == [argvs[1]]


def test_a_frame_cut_short_leaves_every_command_to_run_alone() -> None:
    """A frame not whole may be where a lane's output was written early (``_side_by_side``): its other parts may sit
    in frames that look whole, so none is taken."""
    nonce = batch.new_nonce()
    lines = [shlex.join(argv) for argv in ARGVS[:3]]
    whole = run_script(lines, nonce)
    assert list(batch.results(ARGVS[:3], lines, [0] * 3, whole, nonce)) == ARGVS[:3]
    cut_at = whole.stdout.index(f"{nonce} 1 end")
    cut = CommandResult(whole.argv, 0, whole.stdout[:cut_at], whole.stderr, 0.0, 0.5)
    assert batch.results(ARGVS[:3], lines, [0] * 3, cut, nonce) == {}


@pytest.mark.parametrize(
    "problem",
    [
        {"rc": None, "error": "timed out after 9s", "timed_out": True},
        {"rc": 1},  # the session itself failed
        {"stdout_truncated_bytes": 10},
        {"late": "no answer by the deadline"},
    ],
)
def test_a_batch_that_failed_was_cut_or_late_answers_nothing(problem: dict) -> None:
    nonce = batch.new_nonce()
    lines = [shlex.join(argv) for argv in ARGVS[:2]]
    whole = run_script(lines, nonce)
    fields = {"argv": whole.argv, "rc": 0, "stdout": whole.stdout, "stderr": whole.stderr, "started": 0.0,
              "duration": 0.5} | problem  # fmt: skip
    assert batch.results(ARGVS[:2], lines, [0, 0], CommandResult(**fields), nonce) == {}


def test_a_cut_stderr_answers_nothing() -> None:
    nonce = batch.new_nonce()
    lines = [shlex.join(argv) for argv in ARGVS[:2]]
    whole = run_script(lines, nonce)
    cut = CommandResult(whole.argv, 0, whole.stdout, whole.stderr, 0.0, 0.5, extra={"stderr_truncated_bytes": "9"})
    assert batch.results(ARGVS[:2], lines, [0, 0], cut, nonce) == {}


def test_another_nonce_frames_nothing() -> None:
    """An output that holds a frame of another batch (a log that recorded one) is not read as one."""
    nonce, other = batch.new_nonce(), batch.new_nonce()
    assert nonce != other
    lines = [shlex.join(argv) for argv in ARGVS[:2]]
    assert batch.split(run_script(lines, nonce).stdout, "", 2, other) is None


def test_each_command_is_timed_by_the_hosts_clock() -> None:
    """The host's clock (/proc/uptime, by the shell's own ``read``) around each command: its own time, not the
    session's, so a kept connection knows which reads take long (transports/kept.py ``lanes``)."""
    argvs = [("sleep", "0.3"), ("true",)]
    answered = batched(argvs, TIMEOUT)
    slow, fast = answered[argvs[0]].host_seconds, answered[argvs[1]].host_seconds
    assert slow is not None and 0.25 <= slow <= 1.0
    assert fast is not None and fast < 0.1
    assert answered[argvs[0]].duration == 0.5  # the session's (run_script's), as the manifest's note says


@pytest.mark.parametrize("clock", ["", " ", "12.50", "12.50 x", "12.50 12.40", "1 2 3"])
def test_a_clock_that_cannot_be_read_leaves_the_time_unknown_and_the_answer_whole(clock: str) -> None:
    """No /proc/uptime (another kernel, a jail), a reading cut or going backwards: the command's answer stands,
    its own time is unknown (None: never split on it)."""
    nonce = "nightowl-test"
    stdout = f"{nonce} 0\nout\n\n{nonce} 0 end 0 {clock}\n"
    stderr = f"{nonce} 0\n\n{nonce} 0 end\n"
    whole = CommandResult(("sh",), 0, stdout, stderr, 0.0, 0.5)
    answered = batch.results([("true",)], ["true"], [TIMEOUT], whole, nonce)
    assert answered[("true",)].stdout == "out\n" and answered[("true",)].host_seconds is None
    good = batch.split(stdout.replace(f"end 0 {clock}", "end 0 12.50 12.75"), stderr, 1, nonce)
    assert good is not None and good[0].seconds == 0.25


def _first_bytes_after(
    lines: list[str], path: str, lanes: tuple[int, ...] = ()
) -> tuple[float, list[batch.Framed] | None]:
    """Seconds until the batch's stdout first has bytes to read, run with ``path`` as its PATH; and its frames."""
    nonce = batch.new_nonce()
    started = time.monotonic()
    child = subprocess.Popen(
        ["/bin/sh", "-c", batch.script(lines, nonce, lanes)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={**os.environ, "PATH": path},
        text=True,
    )
    assert child.stdout is not None
    select.select([child.stdout], [], [], 5)
    waited = time.monotonic() - started
    out, err = child.communicate(timeout=10)
    return waited, batch.split(out, err, len(lines), nonce)


def _bin(folder: Path, *programs: str) -> str:
    """A PATH of ``folder`` holding these programs (links to this machine's)."""
    folder.mkdir()
    for program in programs:
        (folder / program).symlink_to(shutil.which(program) or program)
    return str(folder)


SLOW = [batch.command_line(("echo", "first"), "echo first"), batch.command_line(("sleep", "1.5"), "sleep 1.5")]


def test_the_host_sends_a_batchs_output_in_one_piece_where_its_dd_can_gather_it(tmp_path: Path) -> None:
    """sshd sends each write it reads as a packet: the frames are gathered (``dd``) and written at the end, so the
    first command's output is not on its way while the second runs; a host without dd, or whose dd refuses to
    gather, sends them as they come. Each way the frames are whole."""
    waited, frames = _first_bytes_after(SLOW, _bin(tmp_path / "all", "echo", "sleep", "dd"))
    assert waited >= 1.4 and frames is not None and frames[0].stdout == "first\n"
    waited, frames = _first_bytes_after(SLOW, _bin(tmp_path / "no-dd", "echo", "sleep"))
    assert waited < 1.0 and frames is not None and frames[0].stdout == "first\n"
    waited, frames = _first_bytes_after(SLOW, str(tmp_path / "no-dd"), lanes=(1, 1))  # lanes in turn, as they come
    assert waited < 1.0 and frames is not None and frames[0].stdout == "first\n"
    waited, frames = _first_bytes_after(SLOW, str(tmp_path / "all"), lanes=(1, 1))
    assert waited >= 1.4 and frames is not None and frames[0].stdout == "first\n"
    refusing = _bin(tmp_path / "old-dd", "echo", "sleep")
    (Path(refusing) / "dd").write_text("#!/bin/sh\necho 'dd: unknown operand obs=1048576' >&2\nexit 1\n")
    (Path(refusing) / "dd").chmod(0o755)
    waited, frames = _first_bytes_after(SLOW, refusing)
    assert waited < 1.0 and frames is not None and frames[0].stdout == "first\n"


def test_lanes_run_side_by_side_and_each_read_is_timed_as_its_own() -> None:
    """Two reads of 1.5 s in two lanes take the session about 1.5 s, not 3; each frame's clock is its own."""
    argvs = [("sleep", "1.5"), ("sleep", "1.51"), ("printf", "quick")]
    started = time.monotonic()
    answered = batched(argvs, TIMEOUT, lanes=(1, 2))
    took = time.monotonic() - started
    assert list(answered) == argvs and answered[argvs[2]].stdout == "quick"
    assert all(1.45 <= (answered[argv].host_seconds or 0) <= 2.5 for argv in argvs[:2])
    assert took < 2.7  # one after the other: at least 3 s


@pytest.mark.parametrize(
    "spill",
    [
        "yes | head -c 1100000",  # its first MiB, with its frame's first line, lands in the first lane's first frame
        # its second MiB, with no frame line in it, lands in the first lane's second frame, which looks whole
        "yes x | head -c 1100000; sleep 0.45; yes y | head -c 1100000",
        "yes x | head -c 2200000 >&2",  # the same on stderr
    ],
)
def test_a_lane_that_outgrows_its_gather_while_the_lanes_before_it_run_answers_nothing(spill: str) -> None:
    """A lane beside the first holds its output until the first has ended, up to a gather (a MiB); past that,
    ``dd`` writes it early, among the first lane's frames, and nothing of the batch is taken: every read runs
    alone."""
    first = [("sh", "-c", "sleep 0.3; echo a"), ("sh", "-c", "sleep 0.6; echo b")]
    assert batched([*first, ("sh", "-c", spill)], TIMEOUT, lanes=(2, 1)) == {}
    small = [*first, ("sh", "-c", "echo small")]
    assert list(batched(small, TIMEOUT, lanes=(2, 1))) == small


def test_a_program_a_later_lane_leaves_behind_holds_up_nothing() -> None:
    """A lane's program that leaves a child behind (its own output elsewhere) does not keep the session open: the
    lane holds no pipe of the lanes before it."""
    leaves = ("sh", "-c", "sleep 5 </dev/null >/dev/null 2>&1 &")
    for lanes in ((1, 1), (1, 1, 1)):
        argvs = [("printf", "a"), ("printf", "b"), leaves][-sum(lanes) :]
        started = time.monotonic()
        assert list(batched(argvs, 10, lanes)) == argvs
        assert time.monotonic() - started < 3, lanes


def test_lanes_must_hold_the_commands() -> None:
    for lanes in ((1, 2), (2, 0), (3, -1)):  # more or fewer than the commands; an empty lane
        with pytest.raises(ValueError, match="do not hold"):
            batch.script(["true", "true"], batch.new_nonce(), lanes)
