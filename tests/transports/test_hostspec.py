"""Host specs: URL and short forms, ssh config resolution, and clear refusals."""

from __future__ import annotations

from pathlib import Path

import pytest

from nightowl.transports.hostspec import HostSpec, parse_host_spec

SSH_CONFIG = """
Host gpu-17
    HostName 10.0.0.17
    User ops
    Port 2200
    IdentityFile ~/.ssh/fleet_ed25519
    ProxyJump bastion

Host bastion
    HostName 10.0.0.1
    User jump

Host deep
    ProxyJump bastion,inner

Host inner
    HostName 10.9.0.1

Host loop-a
    ProxyJump loop-b

Host loop-b
    ProxyJump loop-a

Host *.lab
    User labuser
"""


@pytest.fixture
def config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("HOME", str(tmp_path))  # ~ in IdentityFile, and no real ~/.ssh
    path = tmp_path / "ssh_config"
    path.write_text(SSH_CONFIG)
    return path


@pytest.fixture
def empty(tmp_path: Path) -> Path:
    path = tmp_path / "empty_config"
    path.write_text("")
    return path


@pytest.mark.parametrize(
    ("text", "hostname", "port", "user"),
    [
        ("ssh://root@gpu-17:2222", "gpu-17", 2222, "root"),
        ("ssh://gpu-17", "gpu-17", 22, None),
        ("ssh://GPU-17.Example.com", "GPU-17.Example.com", 22, None),
        ("ssh://root@[fd00::17]:2200", "fd00::17", 2200, "root"),
        ("root@gpu-17:2222", "gpu-17", 2222, "root"),
        ("root@gpu-17", "gpu-17", 22, "root"),
        ("gpu-17:2222", "gpu-17", 2222, None),
        ("gpu-17", "gpu-17", 22, None),
        ("10.1.2.3", "10.1.2.3", 22, None),
        ("[::1]:2200", "::1", 2200, None),
        ("admin@[fe80::1%eth0]", "fe80::1%eth0", 22, "admin"),
        ("::1", "::1", 22, None),
    ],
)
def test_forms(empty: Path, text: str, hostname: str, port: int, user: str | None) -> None:
    spec = parse_host_spec(text, empty)
    assert (spec.name, spec.hostname, spec.port, spec.user, spec.kind) == (text, hostname, port, user, "ssh")
    assert spec.jump is None


def test_url_options(empty: Path) -> None:
    spec = parse_host_spec("ssh://root@gpu-17:2222?jump=ops@bastion:2022&identity=/keys/fleet&profile=h100-sxm", empty)
    assert spec.jump == HostSpec(name="ops@bastion:2022", hostname="bastion", port=2022, user="ops")
    assert spec.identity_file == Path("/keys/fleet")
    assert spec.profile == "h100-sxm"
    assert spec.describe() == "root@gpu-17:2222 via ops@bastion:2022"
    assert spec.address == "[gpu-17]:2222"


def test_local() -> None:
    spec = parse_host_spec("local")
    assert spec.is_local and spec.kind == "local" and spec.name == "local"


def test_plain_name_resolves_through_ssh_config(config: Path, tmp_path: Path) -> None:
    spec = parse_host_spec("gpu-17", config)
    assert (spec.hostname, spec.port, spec.user) == ("10.0.0.17", 2200, "ops")
    assert spec.identity_file == tmp_path / ".ssh" / "fleet_ed25519"
    assert spec.jump is not None
    assert (spec.jump.name, spec.jump.hostname, spec.jump.user) == ("bastion", "10.0.0.1", "jump")


def test_what_the_spec_says_wins_over_the_config(config: Path) -> None:
    spec = parse_host_spec("ssh://root@gpu-17:22?jump=none", config)
    assert (spec.hostname, spec.port, spec.user, spec.jump) == ("10.0.0.17", 22, "root", None)
    assert parse_host_spec("other@gpu-17", config).user == "other"


def test_config_patterns_apply(config: Path) -> None:
    assert parse_host_spec("node3.lab", config).user == "labuser"


def test_proxyjump_chain_is_nested_first_hop_innermost(config: Path) -> None:
    spec = parse_host_spec("deep", config)
    assert spec.jump is not None and spec.jump.hostname == "10.9.0.1"
    assert spec.jump.jump is not None and spec.jump.jump.hostname == "10.0.0.1"
    assert spec.jump.jump.jump is None


def test_proxyjump_loop_is_refused(config: Path) -> None:
    with pytest.raises(ValueError, match="ProxyJump loop"):
        parse_host_spec("loop-a", config)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "empty host spec"),
        ("   ", "empty host spec"),
        ("http://gpu-17", "unsupported scheme 'http'"),
        ("ssh://", "no host name"),
        ("ssh://gpu-17/path", "unexpected path"),
        ("ssh://root:secret@gpu-17", "passwords"),
        ("ssh://gpu-17?timeout=3", "unknown option 'timeout'"),
        ("ssh://gpu-17?jump=", "needs exactly one value"),
        ("ssh://gpu-17:99999", "out of range"),
        ("gpu-17:0", "port '0'"),
        ("gpu-17:ssh", "port 'ssh'"),
        ("@gpu-17", "empty user"),
        ("root@", "invalid host name ''"),
        ("gpu 17", "whitespace"),
        ("gpu-17;reboot", "invalid host name"),
        ("$(reboot)", "invalid host name"),
        ("-oProxyCommand=reboot", "invalid host name"),
        ("[::1", "unclosed"),
        ("ssh://gpu-17?jump=local", "'local' cannot be a jump host"),
        ("ssh://gpu-17?jump=bad%20host", "jump host"),
    ],
)
def test_invalid_specs_say_why(empty: Path, text: str, message: str) -> None:
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace("$", r"\$")):
        parse_host_spec(text, empty)


def test_missing_config_file_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="does not exist"):
        parse_host_spec("gpu-17", tmp_path / "nope")


def test_default_config_is_home_ssh_config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    assert parse_host_spec("gpu-17").hostname == "gpu-17"  # no ~/.ssh/config: nothing to apply
    (tmp_path / ".ssh").mkdir()
    (tmp_path / ".ssh" / "config").write_text("Host gpu-17\n  HostName 10.0.0.17\n")
    assert parse_host_spec("gpu-17").hostname == "10.0.0.17"


def test_spec_is_hashable_and_frozen(empty: Path) -> None:
    spec = parse_host_spec("root@gpu-17", empty)
    assert len({spec, parse_host_spec("root@gpu-17", empty)}) == 1
    with pytest.raises(AttributeError):
        spec.port = 2  # type: ignore[misc]
