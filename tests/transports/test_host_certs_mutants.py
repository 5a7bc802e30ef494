"""transports/host_certs.py without a server (issue 30 mutation figures): each certificate check and its
exact refusal, the validity window's edges, and what a KRL or a key list revokes. Certificates and KRLs
come from ssh-keygen (OpenSSH), as the SSH tests' do; none starts sshd, so the quick loop runs them."""

from __future__ import annotations

import base64
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from nightowl.transports import host_certs

pytestmark = pytest.mark.skipif(shutil.which("ssh-keygen") is None, reason="needs OpenSSH's ssh-keygen")
NOW = 1_800_000_000  # 2027-01-15, inside the windows below


def keygen(path: Path, kind: str = "ed25519") -> Path:
    subprocess.run(["ssh-keygen", "-q", "-t", kind, "-N", "", "-f", str(path)], check=True, capture_output=True)
    return path


def blob(pub: Path) -> bytes:
    return base64.b64decode(pub.read_text().split()[1])


def sign(ca: Path, host: Path, *args: str, key_id: str = "gpu-17-host") -> bytes:
    subprocess.run(["ssh-keygen", "-q", "-s", str(ca), "-I", key_id, *args, f"{host}.pub"], check=True,
                   capture_output=True)  # fmt: skip
    return blob(Path(f"{host}-cert.pub"))


@pytest.fixture
def keys(tmp_path: Path) -> dict[str, Path]:
    return {name: keygen(tmp_path / name) for name in ("ca", "host", "other")}


WINDOW = ("-V", "20270101:20270201")  # ssh-keygen reads these as UTC days


def test_parse_reads_every_field(keys: dict[str, Path]) -> None:
    cert = sign(keys["ca"], keys["host"], "-h", "-n", "gpu-17,gpu-17.corp", "-z", "42", *WINDOW)
    parsed = host_certs.parse(cert)
    assert parsed.cert_type == "ssh-ed25519-cert-v01@openssh.com"
    assert (parsed.serial, parsed.kind, parsed.key_id) == (42, host_certs.HOST_CERT, "gpu-17-host")
    assert parsed.principals == ("gpu-17", "gpu-17.corp")
    assert parsed.valid_before - parsed.valid_after == 31 * 86400
    assert parsed.critical_options == b""
    assert parsed.ca_blob == blob(Path(f"{keys['ca']}.pub"))
    assert cert.startswith(parsed.signed) and len(parsed.signed) < len(cert) and parsed.signature


def test_parse_reads_an_ecdsa_and_an_rsa_certificate(tmp_path: Path) -> None:
    ca = keygen(tmp_path / "ca")
    for kind, name in (("ecdsa", "ecdsa-sha2-nistp256-cert-v01@openssh.com"), ("rsa", "ssh-rsa-cert-v01@openssh.com")):
        host = keygen(tmp_path / kind, kind)
        cert = sign(ca, host, "-h", "-n", "gpu-17", "-z", "9", *WINDOW)
        parsed = host_certs.parse(cert)
        assert (parsed.cert_type, parsed.serial, parsed.principals) == (name, 9, ("gpu-17",))
        assert host_certs.problem(cert, "gpu-17", [blob(Path(f"{ca}.pub"))], now=NOW) is None


def test_parse_refuses_what_is_not_a_certificate(keys: dict[str, Path]) -> None:
    with pytest.raises(ValueError, match="^unsupported certificate type 'ssh-ed25519'$"):
        host_certs.parse(blob(Path(f"{keys['host']}.pub")))


def test_each_check_and_its_refusal(keys: dict[str, Path]) -> None:
    ca = [blob(Path(f"{keys['ca']}.pub"))]
    good = sign(keys["ca"], keys["host"], "-h", "-n", "gpu-17", *WINDOW)
    assert host_certs.problem(good, "gpu-17", ca, now=NOW) is None
    assert host_certs.problem(good, "GPU-17", ca, now=NOW) is None  # names compare without case
    assert host_certs.problem(good, "gpu-17", [blob(Path(f"{keys['other']}.pub"))], now=NOW) == (
        "host certificate signed by a CA that known_hosts does not trust for this host"
    )
    assert host_certs.problem(good, "gpu-17", [], now=NOW) == (
        "host certificate signed by a CA that known_hosts does not trust for this host"
    )
    assert host_certs.problem(good, "gpu-18", ca, now=NOW) == (
        "host certificate 'gpu-17-host' is not valid for gpu-18 (principals: gpu-17)"
    )
    two = sign(keys["ca"], keys["host"], "-h", "-n", "a,b", *WINDOW)
    assert host_certs.problem(two, "c", ca, now=NOW) == (
        "host certificate 'gpu-17-host' is not valid for c (principals: a, b)"
    )
    none = sign(keys["ca"], keys["host"], "-h", *WINDOW)
    assert host_certs.problem(none, "gpu-17", ca, now=NOW) == (
        "host certificate 'gpu-17-host' is not valid for gpu-17 (principals: none)"
    )
    user = sign(keys["ca"], keys["host"], "-n", "gpu-17", *WINDOW)
    assert host_certs.problem(user, "gpu-17", ca, now=NOW) == "a user certificate presented as a host key"
    unreadable = host_certs.problem(b"\x00\x00\x00\x03abc", "gpu-17", ca)
    assert unreadable is not None and unreadable.startswith("unreadable host certificate (")


def test_the_validity_window_includes_its_start_and_excludes_its_end(keys: dict[str, Path]) -> None:
    ca = [blob(Path(f"{keys['ca']}.pub"))]
    cert = sign(keys["ca"], keys["host"], "-h", "-n", "gpu-17", *WINDOW)
    parsed = host_certs.parse(cert)
    outside = "host certificate 'gpu-17-host' is outside its validity window"
    assert host_certs.problem(cert, "gpu-17", ca, now=parsed.valid_after) is None
    assert host_certs.problem(cert, "gpu-17", ca, now=parsed.valid_after - 1) == outside
    assert host_certs.problem(cert, "gpu-17", ca, now=parsed.valid_before - 1) is None
    assert host_certs.problem(cert, "gpu-17", ca, now=parsed.valid_before) == outside
    lasting = sign(keys["ca"], keys["host"], "-h", "-n", "gpu-17", "-V", "-5m:+1h")
    assert host_certs.problem(lasting, "gpu-17", ca) is None  # the clock's now when none is given
    assert host_certs.problem(lasting, "gpu-17", ca, now=time.time() + 7200) == outside


def test_a_tampered_certificate_does_not_verify(keys: dict[str, Path]) -> None:
    ca = [blob(Path(f"{keys['ca']}.pub"))]
    cert = sign(keys["ca"], keys["host"], "-h", "-n", "gpu-17", *WINDOW)
    tampered = cert.replace(b"gpu-17-host", b"gpu-99-host")
    assert host_certs.problem(tampered, "gpu-17", ca, now=NOW) == "host certificate signature does not verify"


def _krl(tmp_path: Path, spec: str, ca: Path | None = None) -> Revocations:
    (tmp_path / "krl.spec").write_text(spec)
    args = ["ssh-keygen", "-q", "-k", "-f", str(tmp_path / "krl")] + (["-s", f"{ca}.pub"] if ca else [])
    subprocess.run([*args, str(tmp_path / "krl.spec")], check=True, capture_output=True)
    return host_certs.read_revoked_keys(tmp_path / "krl")


Revocations = host_certs.Revocations


@pytest.mark.parametrize(
    ("spec", "revoked"),
    [
        ("serial: 7\n", True),
        ("serial: 1\nserial: 7\n", True),
        ("serial: 5-9\n", True),
        ("serial: 8-9\n", False),
        ("serial: 1-6\n", False),
        ("serial: 8\n", False),
        ("id: gpu-17-host\n", True),
        ("id: gpu-17\n", False),
    ],
)
def test_a_krl_revokes_certificates_of_its_ca(tmp_path: Path, keys: dict[str, Path], spec: str, revoked: bool) -> None:
    cert = sign(keys["ca"], keys["host"], "-h", "-n", "gpu-17", "-z", "7")
    plain = blob(Path(f"{keys['host']}.pub"))
    why = _krl(tmp_path, spec, keys["ca"]).why(plain, cert)
    assert why == ("host certificate 'gpu-17-host' (serial 7) is revoked" if revoked else None)
    assert _krl(tmp_path, spec, keys["other"]).why(plain, cert) is None  # another CA's list


def test_a_krl_serial_bitmap(tmp_path: Path, keys: dict[str, Path]) -> None:
    # ssh-keygen writes a bitmap section for scattered serials; each listed one is revoked, none between.
    spec = "".join(f"serial: {n}\n" for n in (100, 102, 105, 106, 110, 113))
    plain = blob(Path(f"{keys['host']}.pub"))
    found = _krl(tmp_path, spec, keys["ca"])
    for serial, revoked in ((100, True), (101, False), (105, True), (113, True), (114, False), (99, False)):
        cert = sign(keys["ca"], keys["host"], "-h", "-n", "gpu-17", "-z", str(serial))
        assert (found.why(plain, cert) is not None) is revoked, serial


def test_a_krl_revokes_keys_by_key_and_fingerprint(tmp_path: Path, keys: dict[str, Path]) -> None:
    plain = blob(Path(f"{keys['host']}.pub"))
    cert = sign(keys["ca"], keys["host"], "-h", "-n", "gpu-17")
    host_pub, ca_pub = Path(f"{keys['host']}.pub").read_text(), Path(f"{keys['ca']}.pub").read_text()
    for algorithm in ("sha256", "sha1"):
        fingerprint = subprocess.run(
            ["ssh-keygen", "-l", "-E", algorithm, "-f", f"{keys['host']}.pub"], check=True, capture_output=True,
            text=True,
        ).stdout.split()[1]  # fmt: skip
        found = _krl(tmp_path, f"sha1: {host_pub}" if algorithm == "sha1" else f"hash: {fingerprint}\n")
        assert found.why(plain, None) == "the host key is revoked", algorithm
    assert _krl(tmp_path, f"key: {host_pub}").why(plain, cert) == "the host key is revoked"
    assert _krl(tmp_path, f"key: {ca_pub}").why(plain, cert) == "the host certificate's CA key is revoked"
    assert _krl(tmp_path, f"key: {ca_pub}").why(plain, None) is None
    assert _krl(tmp_path, f"key: {ca_pub}").why(plain, b"not a certificate") is None


def test_a_plain_list_of_revoked_keys(tmp_path: Path, keys: dict[str, Path]) -> None:
    plain = blob(Path(f"{keys['host']}.pub"))
    listed = tmp_path / "revoked.pub"
    host_b64 = Path(f"{keys['host']}.pub").read_text().split()[1]
    other_pub = Path(f"{keys['other']}.pub").read_text()
    listed.write_text(f"# revoked\n\n{other_pub}{host_b64}\n")
    found = host_certs.read_revoked_keys(listed)
    assert found.why(plain, None) == "the host key is revoked"
    assert found.why(blob(Path(f"{keys['ca']}.pub")), None) is None
    bad = tmp_path / "bad.pub"
    bad.write_text("ssh-ed25519 not*base64 comment\n")
    with pytest.raises(ValueError, match=r"bad\.pub: cannot read the key on line 'ssh-ed25519 not\*base64 comment'"):
        host_certs.read_revoked_keys(bad)


def test_a_krl_that_cannot_be_read(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="^not an OpenSSH KRL"):
        host_certs.parse_krl(b"nothing")
    with pytest.raises(ValueError, match="^unsupported KRL format version$"):
        host_certs.parse_krl(host_certs.KRL_MAGIC + (2).to_bytes(4, "big") + bytes(40))
    header = host_certs.KRL_MAGIC + (1).to_bytes(4, "big") + bytes(24) + bytes(8)  # 3 int64, 2 empty strings
    assert host_certs.parse_krl(header).keys == set()
    with pytest.raises(ValueError, match="^unknown KRL section 9$"):
        host_certs.parse_krl(header + b"\x09" + bytes(4))
    signed = header + b"\x04" + bytes(4) + b"\x02" + (8).to_bytes(4, "big") + (4).to_bytes(4, "big") + b"abcd"
    assert host_certs.parse_krl(signed).keys == set()  # nothing after the signature section is read
    keyed = header + b"\x02" + (8).to_bytes(4, "big") + (4).to_bytes(4, "big") + b"abcd"
    assert host_certs.parse_krl(keyed).keys == {b"abcd"}
