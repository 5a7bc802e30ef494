"""Reads sent in one session (SSHTransport.run_batch, transports/batch.py) over a real sshd: each answers exactly
as the same command sent alone; a hang holds up the batch until the host's `timeout` of the whole session (the
longest limit) ends it, and then nothing of it is taken (each read runs alone, where its own limit judges it)."""

from __future__ import annotations

import shlex
import time

import pytest

from nightowl.transports.batch import command_line
from nightowl.transports.hostspec import parse_host_spec
from nightowl.transports.ssh import SSHTransport, client_seconds, remote_command
from tests.ssh.fleet import SSHD, Fleet

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(not SSHD.exists(), reason=f"{SSHD} missing (Debian package openssh-server)"),
]


def answers(result: object) -> tuple[object, ...]:
    return tuple(getattr(result, name) for name in ("rc", "stdout", "stderr", "timed_out", "error", "late"))


@pytest.mark.parametrize("lanes", [(), (2, 3)])
def test_each_batched_read_answers_as_it_does_alone(fleet: Fleet, lanes: tuple[int, ...]) -> None:
    """One after the other, or in lanes side by side (transports/kept.py ``lanes``)."""
    commands = [
        (("nvidia-smi", "-q"), 20.0),
        (("journalctl", "-k", "--no-pager"), 20.0),
        (("systemctl", "is-active", "nvidia-fabricmanager"), 20.0),  # nothing recorded: the stand-in exits 127
        (("sh", "-c", "printf 'no line break'; echo on-stderr >&2; exit 3"), 20.0),
        (("ibstat",), 20.0),  # no such program on the host: run as alone, under `timeout`, which says so
    ]
    with SSHTransport(parse_host_spec(fleet.spec("healthy"), fleet.ssh_config), fleet.options()) as transport:
        batched = transport.run_batch(commands, lanes)
        for argv, timeout in commands:
            alone = transport.run(argv, timeout)
            if argv not in batched:  # the stand-in's own 127 (found, it exits so): a shell's 127 is not taken
                assert alone.rc == 127 and argv[0] == "systemctl", argv
                continue
            assert answers(batched[argv]) == answers(alone), argv
            assert batched[argv].extra["remote_command"] == command_line(argv, remote_command(argv, timeout))
            assert alone.extra["remote_command"].endswith(" " + shlex.join(argv))  # alone: under its own
            took = batched[argv].host_seconds  # by the host's clock
            assert took is not None and 0 <= took <= batched[argv].duration + 0.01
        assert batched[commands[0][0]].stdout.strip()  # the recorded nvidia-smi, not nothing
        assert len(batched) == 4 and batched[("ibstat",)].rc == 127


def test_a_read_that_hangs_holds_up_the_batch_until_its_limit_and_nothing_of_it_is_taken(fleet: Fleet) -> None:
    hung, after = (("nvidia-smi", "-q"), 1.0), (("journalctl", "-k", "--no-pager"), 1.0)
    with SSHTransport(parse_host_spec(fleet.spec("nvsmi-hung"), fleet.ssh_config), fleet.options()) as transport:
        started = time.monotonic()
        assert transport.run_batch([hung, after]) == {}
        assert time.monotonic() - started < client_seconds(1.0) + 3  # the session's limit (the longest) ended it
        alone = transport.run(*hung)
        assert alone.timed_out and alone.rc is None  # alone, its own limit judges the hang
