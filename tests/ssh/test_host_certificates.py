"""Host certificates: known_hosts' @cert-authority, here and in the system-wide file, against a real sshd
whose host key is signed by a CA (ssh-keygen -s -h), and the certificate checks one by one."""

from __future__ import annotations

import base64
import getpass
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from nightowl.transports import host_certs
from nightowl.transports.hostspec import parse_host_spec
from nightowl.transports.ssh import SSHConnectError, SSHOptions, SSHTransport
from tests.fleet.daemons import Daemon, free_port, wait_for
from tests.ssh.fleet import SSH_KEYGEN, SSHD

# Starts real sshd processes: `pytest -m "not integration"` leaves it out.
pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(not SSHD.exists(), reason=f"{SSHD} missing (Debian package openssh-server)"),
]


def keygen(path: Path) -> Path:
    subprocess.run([SSH_KEYGEN, "-q", "-t", "ed25519", "-N", "", "-f", str(path)], check=True, capture_output=True)
    return path


def sign(ca: Path, key: Path, *args: str) -> bytes:
    """Sign ``key.pub`` with ``ca``; the certificate blob."""
    subprocess.run(
        [SSH_KEYGEN, "-q", "-s", str(ca), "-I", "test-cert", *args, f"{key}.pub"], check=True, capture_output=True
    )
    return base64.b64decode(Path(f"{key}-cert.pub").read_text().split()[1])


def ca_line(ca: Path, pattern: str) -> str:
    key_type, blob = Path(f"{ca}.pub").read_text().split()[:2]
    return f"@cert-authority {pattern} {key_type} {blob}\n"


def ca_blob(ca: Path) -> bytes:
    return base64.b64decode(Path(f"{ca}.pub").read_text().split()[1])


@pytest.fixture(scope="module")
def signed_sshd(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, object]]:
    root = tmp_path_factory.mktemp("cert-sshd")
    ca, host, user = keygen(root / "ca"), keygen(root / "host"), keygen(root / "user")
    sign(ca, host, "-h", "-n", "127.0.0.1,gpu-17", "-V", "-5m:+1h")
    (root / "authorized_keys").write_text(Path(f"{user}.pub").read_text())
    port = free_port()
    config = root / "sshd_config"
    config.write_text(
        f"ListenAddress 127.0.0.1:{port}\nHostKey {host}\nHostCertificate {host}-cert.pub\n"
        f"PidFile {root / 'sshd.pid'}\nAuthorizedKeysFile {root / 'authorized_keys'}\nUsePAM no\nStrictModes no\n"
        "PasswordAuthentication no\nKbdInteractiveAuthentication no\nPermitRootLogin prohibit-password\n"
    )
    daemon = Daemon("sshd", [str(SSHD), "-D", "-e", "-f", str(config)], root)
    wait_for("sshd listening", lambda: "Server listening" in daemon.log.read_text(), 10, [daemon])
    yield {"root": root, "ca": ca, "user": user, "port": port}
    daemon.stop()


def user_options(sshd: dict[str, object], known: Path, global_known: Path | None = None) -> SSHOptions:
    """The test user's key and only the known_hosts files given: no agent, no ~/.ssh keys."""
    return SSHOptions(
        known_hosts=known,
        global_known_hosts=global_known,
        identity_files=(Path(str(sshd["user"])),),
        use_agent=False,
        look_for_keys=False,
    )


def connect(sshd: dict[str, object], known: Path, global_known: Path | None = None) -> None:
    spec = parse_host_spec(f"ssh://{getpass.getuser()}@127.0.0.1:{sshd['port']}")
    options = user_options(sshd, known, global_known)
    with SSHTransport(spec, options) as transport:
        transport.connect()
        assert transport.run(["true"], timeout=10).rc == 0


def test_a_host_certificate_from_a_trusted_ca_is_accepted_strictly(signed_sshd: dict, tmp_path: Path) -> None:
    known = tmp_path / "known_hosts"
    known.write_text(ca_line(signed_sshd["ca"], f"[127.0.0.1]:{signed_sshd['port']}"))
    connect(signed_sshd, known)
    assert known.read_text().count("\n") == 1  # nothing appended: the CA vouched for the host


def test_the_system_wide_known_hosts_is_read_too(signed_sshd: dict, tmp_path: Path) -> None:
    system = tmp_path / "ssh_known_hosts"
    system.write_text(ca_line(signed_sshd["ca"], "[127.0.0.1]:*"))
    connect(signed_sshd, tmp_path / "empty_known_hosts", system)
    assert not (tmp_path / "empty_known_hosts").exists()


def test_a_certificate_from_another_ca_is_refused(signed_sshd: dict, tmp_path: Path) -> None:
    other = keygen(tmp_path / "other-ca")
    known = tmp_path / "known_hosts"
    known.write_text(ca_line(other, f"[127.0.0.1]:{signed_sshd['port']}"))
    with pytest.raises(SSHConnectError, match="unknown host key.*CA that known_hosts does not trust"):
        connect(signed_sshd, known)


def test_certificate_checks(tmp_path: Path) -> None:
    ca, host = keygen(tmp_path / "ca"), keygen(tmp_path / "host")
    trusted = [ca_blob(ca)]
    good = sign(ca, host, "-h", "-n", "gpu-17", "-V", "-5m:+1h")
    assert host_certs.problem(good, "gpu-17", trusted) is None
    assert "not valid for gpu-18" in str(host_certs.problem(good, "gpu-18", trusted))
    assert "does not trust" in str(host_certs.problem(good, "gpu-17", [ca_blob(keygen(tmp_path / "x"))]))
    assert "validity" in str(host_certs.problem(good, "gpu-17", trusted, now=time.time() + 7200))
    tampered = good.replace(b"gpu-17", b"gpu-99")
    assert "signature" in str(host_certs.problem(tampered, "gpu-99", trusted))
    user_cert = sign(ca, host, "-n", "gpu-17", "-V", "-5m:+1h")  # no -h: a user certificate
    assert "user certificate" in str(host_certs.problem(user_cert, "gpu-17", trusted))
    no_principals = sign(ca, host, "-h", "-V", "-5m:+1h")
    assert "principals: none" in str(host_certs.problem(no_principals, "gpu-17", trusted))
    assert "unreadable" in str(host_certs.problem(b"garbage", "gpu-17", trusted))


def test_a_certificate_from_a_revoked_ca_is_not_trusted(tmp_path: Path) -> None:
    """`@revoked` on the CA's key withdraws its trust: its certificates are judged as unknown keys."""
    from nightowl.transports.known_hosts import KnownHosts

    ca, host = keygen(tmp_path / "ca"), keygen(tmp_path / "host")
    certificate = sign(ca, host, "-h", "-n", "gpu-17", "-V", "-5m:+1h")
    key_type, blob = Path(f"{host}.pub").read_text().split()[:2]
    trusted = tmp_path / "trusted"
    trusted.write_text(ca_line(ca, "gpu-17"))
    revoked = tmp_path / "revoked"
    ca_type, ca_b64 = Path(f"{ca}.pub").read_text().split()[:2]
    revoked.write_text(ca_line(ca, "gpu-17") + f"@revoked gpu-17 {ca_type} {ca_b64}\n")
    judge = {"hostname": "gpu-17", "certificate": certificate}
    assert KnownHosts.load(trusted).verdict("gpu-17", key_type, base64.b64decode(blob), **judge)[0] == "ok"
    assert KnownHosts.load(revoked).verdict("gpu-17", key_type, base64.b64decode(blob), **judge)[0] == "unknown"


# --- issue 30, item 19: @revoked <certificate> and RevokedHostKeys (a KRL) are honoured ---------------
def _krl(tmp_path: Path, spec: str, ca: Path | None = None, name: str = "krl") -> Path:
    (tmp_path / f"{name}.spec").write_text(spec)
    args = [SSH_KEYGEN, "-q", "-k", "-f", str(tmp_path / name)] + (["-s", f"{ca}.pub"] if ca else [])
    subprocess.run([*args, str(tmp_path / f"{name}.spec")], check=True, capture_output=True)
    return tmp_path / name


def test_a_revoked_certificate_line_in_known_hosts_is_refused(tmp_path: Path) -> None:
    from nightowl.transports.known_hosts import KnownHosts

    ca, host = keygen(tmp_path / "ca"), keygen(tmp_path / "host")
    certificate = sign(ca, host, "-h", "-n", "gpu-17", "-V", "-5m:+1h")
    key_type, blob = Path(f"{host}.pub").read_text().split()[:2]
    cert_type, cert_b64 = Path(f"{host}-cert.pub").read_text().split()[:2]
    known = tmp_path / "known_hosts"
    known.write_text(ca_line(ca, "gpu-17") + f"@revoked * {cert_type} {cert_b64}\n")
    verdict, detail = KnownHosts.load(known).verdict(
        "gpu-17", key_type, base64.b64decode(blob), certificate=certificate, hostname="gpu-17"
    )
    assert verdict == "mismatch" and "host certificate of gpu-17 is marked @revoked" in detail


@pytest.mark.parametrize(
    ("spec", "by_ca", "revoked"),
    [
        ("serial: 7\n", True, True),
        ("serial: 5-9\n", True, True),
        ("serial: 8\n", True, False),
        ("id: gpu-17-host\n", True, True),
        ("id: other\n", True, False),
        ("serial: 7\n", False, False),  # another CA's serial 7 (signed with the other CA below)
    ],
)
def test_a_krl_revokes_host_certificates_by_serial_range_and_key_id(
    tmp_path: Path, spec: str, by_ca: bool, revoked: bool
) -> None:
    ca, other, host = keygen(tmp_path / "ca"), keygen(tmp_path / "other"), keygen(tmp_path / "host")
    subprocess.run(
        [SSH_KEYGEN, "-q", "-s", str(ca), "-I", "gpu-17-host", "-z", "7", "-h", "-n", "gpu-17", f"{host}.pub"],
        check=True,
        capture_output=True,
    )
    certificate = base64.b64decode(Path(f"{host}-cert.pub").read_text().split()[1])
    plain = base64.b64decode(Path(f"{host}.pub").read_text().split()[1])
    krl = _krl(tmp_path, spec, ca if by_ca else other)
    why = host_certs.read_revoked_keys(krl).why(plain, certificate)
    assert (why is not None) == revoked, why


def test_a_krl_revokes_plain_keys_and_cas_by_key_and_fingerprint(tmp_path: Path) -> None:
    ca, host, other = keygen(tmp_path / "ca"), keygen(tmp_path / "host"), keygen(tmp_path / "other")
    certificate = sign(ca, host, "-h", "-n", "gpu-17")
    plain = base64.b64decode(Path(f"{host}.pub").read_text().split()[1])
    fingerprint = subprocess.run(
        [SSH_KEYGEN, "-l", "-E", "sha256", "-f", f"{host}.pub"], check=True, capture_output=True, text=True
    ).stdout.split()[1]
    host_pub, ca_pub, other_pub = (Path(f"{k}.pub").read_text() for k in (host, ca, other))
    for spec in (f"key: {host_pub}", f"hash: {fingerprint}\n"):
        krl = _krl(tmp_path, spec, name="plain")
        assert host_certs.read_revoked_keys(krl).why(plain, None) == "the host key is revoked"
    krl = _krl(tmp_path, f"key: {ca_pub}", name="ca")
    assert "CA key is revoked" in str(host_certs.read_revoked_keys(krl).why(plain, certificate))
    listed = tmp_path / "revoked.pub"  # RevokedHostKeys may also be a plain list of keys
    listed.write_text(other_pub + host_pub)
    assert host_certs.read_revoked_keys(listed).why(plain, None) == "the host key is revoked"
    clean = _krl(tmp_path, f"key: {other_pub}", name="clean")
    assert host_certs.read_revoked_keys(clean).why(plain, certificate) is None


def test_revoked_host_keys_in_ssh_config_refuses_a_live_host(signed_sshd: dict, tmp_path: Path) -> None:
    known = tmp_path / "known_hosts"
    known.write_text(ca_line(Path(str(signed_sshd["ca"])), "*"))
    root = Path(str(signed_sshd["root"]))
    host_pub = (root / "host.pub").read_text()
    krl = _krl(tmp_path, f"key: {host_pub}")
    config = tmp_path / "ssh_config"
    config.write_text(f"Host 127.0.0.1\n  RevokedHostKeys {krl}\n")
    spec = parse_host_spec(f"ssh://{getpass.getuser()}@127.0.0.1:{signed_sshd['port']}", config)
    assert spec.revoked_host_keys == krl
    options = user_options(signed_sshd, known)
    with (
        pytest.raises(SSHConnectError, match="host key mismatch.*revoked by RevokedHostKeys"),
        SSHTransport(spec, options) as transport,
    ):
        transport.connect()
    (tmp_path / "empty").write_bytes(b"SSHKRL\n\0garbage")
    config.write_text(f"Host 127.0.0.1\n  RevokedHostKeys {tmp_path / 'empty'}\n")
    spec = parse_host_spec(f"ssh://{getpass.getuser()}@127.0.0.1:{signed_sshd['port']}", config)
    with pytest.raises(SSHConnectError, match="cannot read RevokedHostKeys"), SSHTransport(spec, options) as transport:
        transport.connect()
