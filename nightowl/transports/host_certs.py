"""OpenSSH host certificates, checked against the ``@cert-authority`` lines of known_hosts.

paramiko negotiates a certificate host key (``ssh-ed25519-cert-v01@openssh.com`` ...) and checks
the key-exchange signature with the key inside it, but it does not check the certificate itself.
This module does, as OpenSSH's client does (PROTOCOL.certkeys in openssh-portable,
https://github.com/openssh/openssh-portable/blob/master/PROTOCOL.certkeys): signed by a trusted CA,
a *host* certificate, the host's name among its principals (an empty list is refused), within its
validity window, and no critical option (none is defined for host certificates).
"""

from __future__ import annotations

import time
from dataclasses import dataclass

CERT_SUFFIX = "-cert-v01@openssh.com"
HOST_CERT = 2  # SSH2_CERT_TYPE_HOST
# How many public-key fields follow the nonce, by certificate type (PROTOCOL.certkeys).
_KEY_FIELDS = {
    "ssh-rsa-cert-v01@openssh.com": ("mpint", "mpint"),
    "ssh-ed25519-cert-v01@openssh.com": ("string",),
    "ecdsa-sha2-nistp256-cert-v01@openssh.com": ("string", "string"),
    "ecdsa-sha2-nistp384-cert-v01@openssh.com": ("string", "string"),
    "ecdsa-sha2-nistp521-cert-v01@openssh.com": ("string", "string"),
}
# Host-key algorithms to ask for first when a CA is trusted for the host (OpenSSH orders them so too).
CERT_HOSTKEY_ALGORITHMS = [
    "ssh-ed25519-cert-v01@openssh.com",
    "ecdsa-sha2-nistp256-cert-v01@openssh.com",
    "ecdsa-sha2-nistp384-cert-v01@openssh.com",
    "ecdsa-sha2-nistp521-cert-v01@openssh.com",
    "rsa-sha2-512-cert-v01@openssh.com",
    "rsa-sha2-256-cert-v01@openssh.com",
]


@dataclass(frozen=True)
class HostCertificate:
    cert_type: str
    serial: int
    kind: int
    key_id: str
    principals: tuple[str, ...]
    valid_after: int
    valid_before: int
    critical_options: bytes
    ca_blob: bytes
    signature: bytes
    signed: bytes


def parse(blob: bytes) -> HostCertificate:
    """The fields of a certificate blob; ValueError when it is not one this module knows."""
    from paramiko.message import Message

    message = Message(blob)
    cert_type = message.get_text()
    fields = _KEY_FIELDS.get(cert_type)
    if fields is None:
        raise ValueError(f"unsupported certificate type {cert_type!r}")
    message.get_string()  # nonce
    for field in fields:
        message.get_mpint() if field == "mpint" else message.get_string()
    serial, kind, key_id = message.get_int64(), message.get_int(), message.get_text()
    principals_message = Message(message.get_string())
    principals = []
    while principals_message.get_remainder():
        principals.append(principals_message.get_text())
    valid_after, valid_before = message.get_int64(), message.get_int64()
    critical, _extensions, _reserved = message.get_string(), message.get_string(), message.get_string()
    ca_blob = message.get_string()
    signed = blob[: len(blob) - len(message.get_remainder())]
    signature = message.get_string()
    return HostCertificate(
        cert_type,
        serial,
        kind,
        key_id,
        tuple(principals),
        valid_after,
        valid_before,
        critical,
        ca_blob,
        signature,
        signed,
    )


def problem(blob: bytes, hostname: str, trusted_cas: list[bytes], now: float | None = None) -> str | None:
    """Why the certificate does not vouch for ``hostname``, or None when it does."""
    try:
        cert = parse(blob)
    except Exception as exc:  # noqa: BLE001 - a malformed blob from the network is a refusal, never a crash
        return f"unreadable host certificate ({exc})"
    if cert.ca_blob not in trusted_cas:
        return "host certificate signed by a CA that known_hosts does not trust for this host"
    if not _signature_ok(cert):
        return "host certificate signature does not verify"
    if cert.kind != HOST_CERT:
        return "a user certificate presented as a host key"
    if hostname.lower() not in {p.lower() for p in cert.principals}:
        names = ", ".join(cert.principals) or "none"
        return f"host certificate {cert.key_id!r} is not valid for {hostname} (principals: {names})"
    current = int(time.time() if now is None else now)
    if not cert.valid_after <= current < cert.valid_before:
        return f"host certificate {cert.key_id!r} is outside its validity window"
    if cert.critical_options:
        return f"host certificate {cert.key_id!r} carries critical options"
    return None


def _signature_ok(cert: HostCertificate) -> bool:
    from paramiko.message import Message
    from paramiko.pkey import PKey

    try:
        ca_type = Message(cert.ca_blob).get_text()
        ca_key = PKey.from_type_string(ca_type, cert.ca_blob)
        return bool(ca_key.verify_ssh_sig(cert.signed, Message(cert.signature)))
    except Exception:  # noqa: BLE001 - an unknown CA key type or a bad signature encoding: not verified
        return False
