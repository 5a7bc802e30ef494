"""A kept connection between a sweep's rounds (SSHTransport.keep_alive): its reader thread looks up once every
ssh.IDLE_WAKE_SECONDS, not paramiko's every 0.1 s (1,000 idle connections woke 10,000 times a second, half a core);
it still answers at once, sends its keepalives, and closes without waiting for the thread."""

from __future__ import annotations

import time

import pytest

from nightowl.transports import ssh
from nightowl.transports.hostspec import parse_host_spec
from nightowl.transports.ssh import SSHTransport
from tests.ssh.fleet import SSHD, Fleet

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(not SSHD.exists(), reason=f"{SSHD} missing (Debian package openssh-server)"),
]


def test_a_kept_connection_sleeps_between_looks_and_still_answers_at_once(
    fleet: Fleet, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert ssh.IDLE_WAKE_SECONDS > 0.1  # longer than paramiko's own 0.1 s
    monkeypatch.setattr(ssh, "IDLE_WAKE_SECONDS", 1.0)  # a second here, so the keepalive below comes soon
    transport = SSHTransport(parse_host_spec(fleet.spec("healthy"), fleet.ssh_config), fleet.options())
    transport.connect()
    paramiko_transport = transport._transport
    assert paramiko_transport is not None and paramiko_transport.sock.gettimeout() == 0.1  # paramiko's own
    transport.keep_alive(1)
    assert paramiko_transport.sock.gettimeout() == ssh.IDLE_WAKE_SECONDS
    sent = []
    paramiko_transport.global_request = lambda kind, wait=True: sent.append(kind)  # type: ignore[method-assign]
    time.sleep(ssh.IDLE_WAKE_SECONDS * 2.5)  # idle past the keepalive's second: the reader still sends it
    assert "keepalive@lag.net" in sent
    started = time.monotonic()
    result = transport.run(("echo", "awake"), 10.0)
    assert result.ok and result.stdout == "awake\n"
    assert time.monotonic() - started < ssh.IDLE_WAKE_SECONDS  # a packet wakes the reader: no wait for its look
    started = time.monotonic()
    transport.close()
    assert time.monotonic() - started < ssh.IDLE_WAKE_SECONDS  # close does not wait for the sleeping reader
