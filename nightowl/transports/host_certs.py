"""OpenSSH host certificates, checked against the ``@cert-authority`` lines of known_hosts.

paramiko negotiates a certificate host key (``ssh-ed25519-cert-v01@openssh.com`` ...) and checks
the key-exchange signature with the key inside it, but it does not check the certificate itself.
This module does, as OpenSSH's client does (PROTOCOL.certkeys in openssh-portable,
https://github.com/openssh/openssh-portable/blob/master/PROTOCOL.certkeys): signed by a trusted CA,
a *host* certificate, the host's name among its principals (an empty list is refused), within its
validity window, and no critical option (none is defined for host certificates). Revocation as
OpenSSH does it: ``@revoked`` known_hosts lines naming a key, a CA or a certificate, and the
``RevokedHostKeys`` file of ssh_config (a KRL, PROTOCOL.krl, or a list of keys).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

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
    from nightowl.transports.paramiko_import import paramiko

    message = paramiko.Message(blob)
    cert_type = message.get_text()
    fields = _KEY_FIELDS.get(cert_type)
    if fields is None:
        raise ValueError(f"unsupported certificate type {cert_type!r}")
    message.get_string()  # nonce
    for field in fields:
        message.get_mpint() if field == "mpint" else message.get_string()
    serial, kind, key_id = message.get_int64(), message.get_int(), message.get_text()
    principals_message = paramiko.Message(message.get_string())
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
    from nightowl.transports.paramiko_import import paramiko

    try:
        ca_type = paramiko.Message(cert.ca_blob).get_text()
        ca_key = paramiko.PKey.from_type_string(ca_type, cert.ca_blob)
        return bool(ca_key.verify_ssh_sig(cert.signed, paramiko.Message(cert.signature)))
    except Exception:  # noqa: BLE001 - an unknown CA key type or a bad signature encoding: not verified
        return False


# --- revocation: @revoked lines and RevokedHostKeys files (a KRL or a list of keys) ------------------
# OpenSSH's key revocation list, PROTOCOL.krl in openssh-portable
# (https://github.com/openssh/openssh-portable/blob/master/PROTOCOL.krl); paramiko reads none of it.
KRL_MAGIC = b"SSHKRL\n\0"
_KRL_CERTIFICATES, _KRL_EXPLICIT_KEY, _KRL_SHA1, _KRL_SIGNATURE, _KRL_SHA256 = 1, 2, 3, 4, 5
_CERT_SERIAL_LIST, _CERT_SERIAL_RANGE, _CERT_SERIAL_BITMAP, _CERT_KEY_ID = 0x20, 0x21, 0x22, 0x23


@dataclass
class _CaRevocations:
    serials: set[int]
    ranges: list[tuple[int, int]]
    key_ids: set[str]

    def covers(self, cert: HostCertificate) -> bool:
        return (
            cert.serial in self.serials
            or any(low <= cert.serial <= high for low, high in self.ranges)
            or cert.key_id in self.key_ids
        )


@dataclass
class Revocations:
    """What a KRL (or a plain list of keys) revokes: keys, key fingerprints, certificates by CA."""

    keys: set[bytes]
    sha1: set[bytes]
    sha256: set[bytes]
    by_ca: dict[bytes, _CaRevocations]  # b"": certificates of any CA

    def key_revoked(self, blob: bytes) -> bool:
        import hashlib

        return (
            blob in self.keys
            or hashlib.sha1(blob).digest() in self.sha1  # noqa: S324 - the KRL's own fingerprint format
            or hashlib.sha256(blob).digest() in self.sha256
        )

    def why(self, plain: bytes, certificate: bytes | None) -> str | None:
        """Why the presented key is revoked (its plain key, its certificate, the certificate's CA), or None."""
        if self.key_revoked(plain):
            return "the host key is revoked"
        if certificate is None:
            return None
        try:
            cert = parse(certificate)
        except Exception:  # noqa: BLE001 - unreadable: the certificate check refuses it anyway
            return None
        if self.key_revoked(cert.ca_blob):
            return "the host certificate's CA key is revoked"
        for ca in (cert.ca_blob, b""):
            if ca in self.by_ca and self.by_ca[ca].covers(cert):
                return f"host certificate {cert.key_id!r} (serial {cert.serial}) is revoked"
        return None


def parse_krl(data: bytes) -> Revocations:
    """A binary KRL; ValueError when it cannot be read (OpenSSH then refuses every host key)."""
    from nightowl.transports.paramiko_import import paramiko

    if not data.startswith(KRL_MAGIC):
        raise ValueError("not an OpenSSH KRL (no SSHKRL magic)")
    message = paramiko.Message(data[len(KRL_MAGIC) :])
    if message.get_int() != 1:
        raise ValueError("unsupported KRL format version")
    message.get_int64(), message.get_int64(), message.get_int64()  # krl_version, generated_date, flags
    message.get_string(), message.get_string()  # reserved, comment
    found = Revocations(set(), set(), set(), {})
    while message.get_remainder():
        section = message.get_byte()[0]
        body = paramiko.Message(message.get_string())
        if section == _KRL_CERTIFICATES:
            _certificate_section(body, found)
        elif section in (_KRL_EXPLICIT_KEY, _KRL_SHA1, _KRL_SHA256):
            target = {_KRL_EXPLICIT_KEY: found.keys, _KRL_SHA1: found.sha1, _KRL_SHA256: found.sha256}[section]
            while body.get_remainder():
                target.add(body.get_string())
        elif section == _KRL_SIGNATURE:
            break  # signatures come last and cover what precedes; ssh does not require them
        else:
            raise ValueError(f"unknown KRL section {section}")
    return found


def _certificate_section(body: Any, found: Revocations) -> None:
    from nightowl.transports.paramiko_import import paramiko

    ca = body.get_string()
    body.get_string()  # reserved
    entry = found.by_ca.setdefault(ca, _CaRevocations(set(), [], set()))
    while body.get_remainder():
        kind = body.get_byte()[0]
        part = paramiko.Message(body.get_string())
        if kind == _CERT_SERIAL_LIST:
            while part.get_remainder():
                entry.serials.add(part.get_int64())
        elif kind == _CERT_SERIAL_RANGE:
            entry.ranges.append((part.get_int64(), part.get_int64()))
        elif kind == _CERT_SERIAL_BITMAP:
            offset, bitmap = part.get_int64(), part.get_mpint()
            bit = 0
            while bitmap:
                if bitmap & 1:
                    entry.serials.add(offset + bit)
                bitmap >>= 1
                bit += 1
        elif kind == _CERT_KEY_ID:
            while part.get_remainder():
                entry.key_ids.add(part.get_text())
        else:
            raise ValueError(f"unknown KRL certificate section {kind:#x}")


def read_revoked_keys(path: Path) -> Revocations:
    """A ``RevokedHostKeys`` file: a binary KRL, or public keys one a line (ssh_config(5)); OSError or
    ValueError when it cannot be read, and then, as ssh, no host key is accepted."""
    import base64
    import binascii

    data = path.read_bytes()
    if data.startswith(KRL_MAGIC):
        return parse_krl(data)
    found = Revocations(set(), set(), set(), {})
    for line in data.decode(errors="replace").splitlines():
        fields = line.split()
        if not fields or fields[0].startswith("#"):
            continue
        try:
            found.keys.add(base64.b64decode(fields[1] if len(fields) > 1 else fields[0], validate=True))
        except (binascii.Error, ValueError):
            raise ValueError(f"{path}: cannot read the key on line {line[:40]!r}") from None
    return found
