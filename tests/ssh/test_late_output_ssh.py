"""Late output over SSH (CONTRACT section 6): the reader is held back at the transport's one wait for
output, as a saturated sweep holds it; no timing is asserted. A host that answered at once is "nightowl
was overloaded"; a command that ran long on the host (its own ``timeout`` fired there) stays timed out."""

from __future__ import annotations

import time
from typing import Any

import pytest

from nightowl.transports import ssh
from nightowl.transports.hostspec import parse_host_spec
from nightowl.transports.ssh import SSHTransport
from tests.ssh.conftest import RECORDED
from tests.ssh.fleet import SSHD, Fleet

pytestmark = pytest.mark.skipif(not SSHD.exists(), reason=f"{SSHD} missing (Debian package openssh-server)")

NVSMI = ("nvidia-smi", "-q")


def hold_reader(monkeypatch: pytest.MonkeyPatch, seconds: float) -> None:
    """The first wait for output sleeps ``seconds`` and reads nothing."""
    real = ssh._wait_readable
    held = {"left": 1}

    def starved(channel: Any, timeout: float) -> None:
        if held["left"]:
            held["left"] = 0
            time.sleep(seconds)
            return
        real(channel, timeout)

    monkeypatch.setattr(ssh, "_wait_readable", starved)


def open_host(fleet: Fleet, name: str) -> SSHTransport:
    return SSHTransport(parse_host_spec(fleet.spec(name), fleet.ssh_config), fleet.options())


def test_a_host_that_answered_while_the_reader_was_held_is_late(fleet: Fleet, monkeypatch: pytest.MonkeyPatch) -> None:
    expected = (RECORDED / "healthy-l40s" / "nvidia-smi.out").read_bytes()
    with open_host(fleet, "healthy") as transport:
        hold_reader(monkeypatch, 1.5)
        result = transport.run(NVSMI, timeout=0.5, kind="nvidia-smi")
    assert not result.timed_out and result.rc == 0 and not result.ok
    assert result.late == f"nightowl was overloaded (read 0 of {len(expected)} bytes in 0.5 s)"


def test_a_command_the_hosts_own_timeout_ended_is_timed_out(fleet: Fleet, monkeypatch: pytest.MonkeyPatch) -> None:
    # The host's `timeout` fires at ceil(0.5) + 1 = 2 s; the reader wakes after it, finds exit 124 waiting.
    with open_host(fleet, "hang") as transport:
        hold_reader(monkeypatch, 3.0)
        result = transport.run(NVSMI, timeout=0.5, kind="nvidia-smi")
    assert result.timed_out and result.late is None and result.rc is None
    assert result.error == "timed out after 0.5s (ended by the host's own timeout: exit 124)"


def test_a_command_that_hangs_with_nothing_unread_is_timed_out(fleet: Fleet, monkeypatch: pytest.MonkeyPatch) -> None:
    with open_host(fleet, "hang") as transport:
        hold_reader(monkeypatch, 0.8)
        result = transport.run(NVSMI, timeout=0.5, kind="nvidia-smi")
    assert result.timed_out and result.late is None
