"""The cipher nightowl asks for first (transports/ssh.py AEAD_CIPHERS): AES-GCM where the server offers it,
the same bytes read as with paramiko's default, and the default order kept when GCM is not on offer."""

from __future__ import annotations

from typing import Any

import pytest

from nightowl.transports import ssh
from nightowl.transports.hostspec import parse_host_spec
from nightowl.transports.ssh import SSHTransport
from tests.ssh.fleet import SSHD, Fleet

# Starts real sshd processes: `pytest -m "not integration"` leaves it out.
pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(not SSHD.exists(), reason=f"{SSHD} missing (Debian package openssh-server)"),
]


def _read(fleet: Fleet, name: str, argv: tuple[str, ...]) -> tuple[str, Any]:
    transport = SSHTransport(parse_host_spec(fleet.spec(name), fleet.ssh_config), fleet.options())
    with transport:
        result = transport.run(argv, 20)
        assert result.ok, result
        return result.stdout, transport._transport.remote_cipher  # type: ignore[union-attr]


def test_gcm_is_negotiated_and_reads_what_the_default_cipher_reads(
    fleet: Fleet, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name, argv in (("healthy", ("journalctl", "-k", "--no-pager")), ("xid79", ("nvidia-smi", "-q"))):
        with_gcm, cipher = _read(fleet, name, argv)
        assert cipher == "aes128-gcm@openssh.com"
        with monkeypatch.context() as patch:
            patch.setattr(ssh, "AEAD_CIPHERS", ())  # paramiko's own order: aes128-ctr with HMAC
            with_default, default_cipher = _read(fleet, name, argv)
        assert default_cipher == "aes128-ctr"
        assert with_gcm == with_default and with_gcm.strip()


class _Options:
    def __init__(self, ciphers: tuple[str, ...]) -> None:
        self.ciphers = ciphers


class _Transport:
    def __init__(self, ciphers: tuple[str, ...]) -> None:
        self.options = _Options(ciphers)

    def get_security_options(self) -> _Options:
        return self.options


def test_without_gcm_on_offer_the_order_is_left_as_it_was() -> None:
    plain = _Transport(("aes128-ctr", "aes256-ctr"))
    ssh._prefer_aead_ciphers(plain)
    assert list(plain.options.ciphers) == ["aes128-ctr", "aes256-ctr"]
    mixed = _Transport(("aes128-ctr", "aes256-gcm@openssh.com", "aes128-gcm@openssh.com"))
    ssh._prefer_aead_ciphers(mixed)
    assert list(mixed.options.ciphers) == ["aes128-gcm@openssh.com", "aes256-gcm@openssh.com", "aes128-ctr"]
