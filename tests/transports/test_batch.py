"""Several commands in one session (nightowl/transports/batch.py): each command's output, errors and exit
status come back as it would alone, whatever the output holds, and what did not come back whole is left to
run alone. The script runs here under a real ``sh``, as sshd runs it on a host."""

from __future__ import annotations

import shlex
import subprocess

import pytest

from nightowl.transports import batch
from nightowl.transports.base import CommandResult
from nightowl.transports.ssh import remote_command


def run_script(lines: list[str], nonce: str) -> CommandResult:
    started = 0.0
    done = subprocess.run(
        ["sh", "-c", batch.script(lines, nonce)], capture_output=True, text=True, input="stdin is not theirs\n"
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
TIMEOUT = 3  # the host's own limit on each, as SSHTransport wraps a command (coreutils `timeout -k`)


def test_each_command_answers_as_it_would_alone() -> None:
    nonce = batch.new_nonce()
    lines = [remote_command(argv, TIMEOUT) for argv in ARGVS]
    answered = batch.results(ARGVS, lines, [TIMEOUT] * len(ARGVS), run_script(lines, nonce), nonce)
    for argv, line in zip(ARGVS, lines, strict=True):
        alone = subprocess.run(["sh", "-c", line], capture_output=True, text=True, stdin=subprocess.DEVNULL)
        got = answered[argv]
        assert (got.rc, got.stdout, got.stderr) == (alone.returncode, alone.stdout, alone.stderr), argv
        assert got.extra["remote_command"] == line and got.error is None and not got.timed_out
        assert "one SSH session" in got.extra["batch"]


def test_a_command_the_hosts_timeout_ended_is_a_timed_out_answer_not_run_again() -> None:
    """The host's own hang, as transports/ssh.py reports one alone: timed out, no exit status, what it printed."""
    argvs = [("sh", "-c", "echo started; sleep 5"), ("printf", "after it")]
    nonce = batch.new_nonce()
    lines = [remote_command(argv, 1) for argv in argvs]
    answered = batch.results(argvs, lines, [1, 1], run_script(lines, nonce), nonce)
    hung = answered[argvs[0]]
    assert hung.timed_out and hung.rc is None and hung.stdout == "started\n"
    assert hung.error == "timed out after 1s (ended by the host's own timeout: exit 124)"
    assert answered[argvs[1]].stdout == "after it"  # the commands after it still answer


def test_without_the_hosts_timeout_an_exit_124_is_an_exit_124() -> None:
    argvs = [("sh", "-c", "exit 124")]
    nonce = batch.new_nonce()
    lines = [remote_command(argvs[0], 0)]
    answered = batch.results(argvs, lines, [0], run_script(lines, nonce), nonce)
    assert answered[argvs[0]].rc == 124 and not answered[argvs[0]].timed_out


def test_a_command_killed_by_a_signal_runs_alone() -> None:
    """Alone, sshd reports the signal (no exit status); here the shell would turn it into 128+n and a note of its
    own in the errors: not the same answer, so none."""
    argvs = [("sh", "-c", "echo partial; kill -SEGV $$"), ("printf", "fine")]
    nonce = batch.new_nonce()
    lines = [remote_command(argv, TIMEOUT) for argv in argvs]
    answered = batch.results(argvs, lines, [TIMEOUT] * 2, run_script(lines, nonce), nonce)
    assert list(answered) == [argvs[1]]


def test_a_frame_cut_short_leaves_that_command_and_the_rest_to_run_alone() -> None:
    nonce = batch.new_nonce()
    lines = [shlex.join(argv) for argv in ARGVS[:3]]
    whole = run_script(lines, nonce)
    cut_at = whole.stdout.index(f"{nonce} 1 end")
    cut = CommandResult(whole.argv, 0, whole.stdout[:cut_at], whole.stderr, 0.0, 0.5)
    answered = batch.results(ARGVS[:3], lines, [0] * 3, cut, nonce)
    assert list(answered) == [ARGVS[0]]


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
    assert batch.split(run_script(lines, nonce).stdout, "", 2, other) == [None, None]


def test_a_command_the_hosts_timeout_had_to_kill_is_a_timed_out_answer() -> None:
    """One that ignores SIGTERM: `timeout -k` kills it (exit 137), as transports/ssh.py judges it alone."""
    argvs = [("sh", "-c", "trap '' TERM; echo stubborn; sleep 9"), ("printf", "after it")]
    nonce = batch.new_nonce()
    lines = [remote_command(argv, 1) for argv in argvs]
    answered = batch.results(argvs, lines, [1, 1], run_script(lines, nonce), nonce)
    killed = answered[argvs[0]]
    assert killed.timed_out and killed.rc is None and killed.stdout == "stubborn\n"
    assert killed.error == "timed out after 1s (ended by the host's own timeout: exit 137)"
    assert answered[argvs[1]].stdout == "after it"
