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


def batched(argvs: list[tuple[str, ...]], timeout: float) -> dict[tuple[str, ...], CommandResult]:
    """What one batch of ``argvs`` answers, each under the host's ``timeout`` as SSHTransport sends it."""
    nonce = batch.new_nonce()
    lines = [remote_command(argv, timeout) for argv in argvs]
    return batch.results(argvs, lines, [timeout] * len(argvs), run_script(lines, nonce), nonce)


@pytest.mark.parametrize(
    ("script", "printed", "status"),
    [
        ("echo started; sleep 5", "started\n", 124),  # ended by `timeout`'s TERM
        ("trap '' TERM; echo stubborn; sleep 9", "stubborn\n", 137),  # ignores TERM: `timeout -k` kills it
    ],
)
def test_a_command_the_hosts_timeout_ended_is_a_timed_out_answer_not_run_again(
    script: str, printed: str, status: int
) -> None:
    """The host's own hang, as transports/ssh.py reports one alone: timed out, no exit status, what it printed;
    the commands after it still answer."""
    argvs = [("sh", "-c", script), ("printf", "after it")]
    answered = batched(argvs, 1)
    hung = answered[argvs[0]]
    assert hung.timed_out and hung.rc is None and hung.stdout == printed
    assert hung.error == f"timed out after 1s (ended by the host's own timeout: exit {status})"
    assert answered[argvs[1]].stdout == "after it"


def test_without_the_hosts_timeout_an_exit_124_is_an_exit_124() -> None:
    answered = batched([("sh", "-c", "exit 124")], 0)
    assert answered[("sh", "-c", "exit 124")].rc == 124 and not answered[("sh", "-c", "exit 124")].timed_out


def test_a_command_killed_by_a_signal_runs_alone() -> None:
    """Alone, sshd reports the signal (no exit status); here the shell would turn it into 128+n and a note of its
    own in the errors: not the same answer, so none."""
    argvs = [("sh", "-c", "echo partial; kill -SEGV $$"), ("printf", "fine")]
    assert list(batched(argvs, TIMEOUT)) == [argvs[1]]


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

