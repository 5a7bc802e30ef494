"""Reads sent in one session (SSHTransport.run_batch, transports/batch.py) over a real sshd: each answers exactly
as the same command sent alone, a hang included (the host's own `timeout` ends it: the host's hang, as alone)."""

from __future__ import annotations

import pytest

from nightowl.transports.hostspec import parse_host_spec
from nightowl.transports.ssh import SSHTransport
from tests.ssh.fleet import SSHD, Fleet

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(not SSHD.exists(), reason=f"{SSHD} missing (Debian package openssh-server)"),
]


def answers(result: object) -> tuple[object, ...]:
    return tuple(getattr(result, name) for name in ("rc", "stdout", "stderr", "timed_out", "error", "late"))


def test_each_batched_read_answers_as_it_does_alone(fleet: Fleet) -> None:
    commands = [
        (("nvidia-smi", "-q"), 20.0),
        (("journalctl", "-k", "--no-pager"), 20.0),
        (("systemctl", "is-active", "nvidia-fabricmanager"), 20.0),
        (("sh", "-c", "printf 'no line break'; echo on-stderr >&2; exit 3"), 20.0),
    ]
    with SSHTransport(parse_host_spec(fleet.spec("healthy"), fleet.ssh_config), fleet.options()) as transport:
        batched = transport.run_batch(commands)
        for argv, timeout in commands:
            alone = transport.run(argv, timeout)
            assert answers(batched[argv]) == answers(alone), argv
            assert batched[argv].extra["remote_command"] == alone.extra["remote_command"]
        assert batched[commands[0][0]].stdout.strip()  # the recorded nvidia-smi, not nothing


def test_a_read_that_hangs_in_a_batch_is_the_hosts_hang_and_the_reads_after_it_still_answer(fleet: Fleet) -> None:
    hung, after = (("nvidia-smi", "-q"), 2.0), (("journalctl", "-k", "--no-pager"), 20.0)
    with SSHTransport(parse_host_spec(fleet.spec("nvsmi-hung"), fleet.ssh_config), fleet.options()) as transport:
        batched = transport.run_batch([hung, after])
        alone = transport.run(*hung)
        assert alone.timed_out and alone.rc is None
        assert answers(batched[hung[0]]) == answers(alone)
        assert answers(batched[after[0]]) == answers(transport.run(*after))
