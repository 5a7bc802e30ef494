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


@pytest.fixture(autouse=True)
def short_margins(monkeypatch: pytest.MonkeyPatch) -> None:
    """The host's timeout SIGKILLs 1 s after it fires and nightowl's deadline is right after: for a 0.5 s
    timeout the host ends the command at 1 s, nightowl gives up at 2 s (ssh.client_seconds)."""
    monkeypatch.setattr(ssh, "KILL_AFTER", 1)
    monkeypatch.setattr(ssh, "REPORT_SLACK", 0.0)


def test_the_host_reports_before_nightowl_gives_up() -> None:
    assert ssh.client_seconds(0.5) == 2.0 and ssh.remote_command(("nvidia-smi",), 0.5) == "timeout -k 1 1 nvidia-smi"
    assert ssh.client_seconds(0.5, remote_timeout=False) == 0.5  # without the wrapper nightowl's clock is all


def test_a_host_that_answered_while_the_reader_was_held_is_late(fleet: Fleet, monkeypatch: pytest.MonkeyPatch) -> None:
    expected = (RECORDED / "healthy-l40s" / "nvidia-smi.out").read_bytes()
    with open_host(fleet, "healthy") as transport:
        hold_reader(monkeypatch, 2.5)
        result = transport.run(NVSMI, timeout=0.5, kind="nvidia-smi")
    assert not result.timed_out and result.rc == 0 and not result.ok
    assert result.late == f"nightowl was overloaded (read 0 of {len(expected)} bytes in 0.5 s)"


def test_a_request_held_back_before_it_was_sent_is_no_answer_not_a_hang(
    fleet: Fleet, monkeypatch: pytest.MonkeyPatch
) -> None:
    """nightowl stalled before the command reached the host (a saturated client): its deadline passes with
    no exit status and no byte, the host's own timeout never reported. No answer, never timed out."""
    real = ssh._open_session

    def stalled(transport: Any, deadline: float) -> Any:
        channel = real(transport, deadline + 10)
        time.sleep(max(0.0, deadline - time.monotonic()) + 0.1)
        return channel

    monkeypatch.setattr(ssh, "_open_session", stalled)
    with open_host(fleet, "hang") as transport:
        result = transport.run(NVSMI, timeout=0.5, kind="nvidia-smi")
    assert not result.timed_out and result.rc is None
    assert result.late is not None and result.late.startswith(
        "no answer from the host in 2.0 s (0 bytes, no exit status)"
    )


def test_a_command_the_hosts_own_timeout_ended_is_timed_out(fleet: Fleet, monkeypatch: pytest.MonkeyPatch) -> None:
    # The host's `timeout` fires at ceil(0.5) = 1 s; the reader wakes after it, finds exit 124 waiting.
    with open_host(fleet, "hang") as transport:
        hold_reader(monkeypatch, 1.5)
        result = transport.run(NVSMI, timeout=0.5, kind="nvidia-smi")
    assert result.timed_out and result.late is None and result.rc is None
    assert result.error == "timed out after 0.5s (ended by the host's own timeout: exit 124)"


def test_a_hang_the_host_ended_is_timed_out_without_nightowl_waiting_out_its_deadline(fleet: Fleet) -> None:
    with open_host(fleet, "hang") as transport:
        result = transport.run(NVSMI, timeout=0.5, kind="nvidia-smi")
    assert result.timed_out and result.late is None
    assert result.error == "timed out after 0.5s (ended by the host's own timeout: exit 124)"
    assert result.duration < ssh.client_seconds(0.5)  # the host said so first


def test_a_command_that_hangs_with_nothing_unread_is_timed_out(fleet: Fleet, monkeypatch: pytest.MonkeyPatch) -> None:
    with open_host(fleet, "hang") as transport:
        hold_reader(monkeypatch, 0.8)
        result = transport.run(NVSMI, timeout=0.5, kind="nvidia-smi")
    assert result.timed_out and result.late is None
