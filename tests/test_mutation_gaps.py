"""Behaviours a mutation sample found unguarded (issue 30, "Tests that would have caught these"): each
test here fails when the named expression is changed. Read-only allow-list, host certificates, the
receiver's rules and session cookie, and host names."""

from __future__ import annotations

import base64
import subprocess
from pathlib import Path

import pytest

from nightowl.collectors.readonly import allowed_shape, violations
from nightowl.hostnames import host_name_problem
from nightowl.receiver import auth
from nightowl.receiver.payload import Alert
from nightowl.receiver.rules import Matcher, Rule, _hostonly, render_host, split_host_template


# --- collectors/readonly.py -----------------------------------------------------------------------
def test_every_command_of_a_list_is_checked_not_only_up_to_the_first_allowed() -> None:
    problems = violations([("nvidia-smi", "-q", "-x"), ("reboot",), ("dmesg", "-C")])
    assert problems == [
        "`reboot` reboots the node",
        "`dmesg -C` clears the kernel ring buffer or changes console logging",
    ]


@pytest.mark.parametrize(
    ("argv", "why"),
    [
        (("rm", "-rf", "/var/log"), "deletes files"),
        (("sudo", "-u", "root", "dmesg"), "runs sudo with -u (only `sudo -n --` is allowed)"),
        (("sudo", "-n", "--", "reboot"), "reboots the node"),
        (("timeout", "5", "kill", "-9", "1"), "signals processes"),
        (("sh", "-c", "dmesg; reboot"), "runs a shell string that is not one fixed command"),
        (("sh", "-c", "echo 'unterminated"), "runs a shell string nightowl cannot read"),
        (("bash", "script.sh"), "runs a shell script"),
        (("systemctl", "restart", "vllm"), "changes services"),
        (("nvidia-smi", "-r"), "changes GPU state"),
        (("cat", "/etc/shadow"), "is not one of the read-only command shapes nightowl allows"),
    ],
)
def test_the_reason_given_for_a_refused_command(argv: tuple[str, ...], why: str) -> None:
    (problem,) = violations([argv])
    assert problem.startswith(f"`{' '.join(argv)}` {why}"), problem


@pytest.mark.parametrize(
    ("argv", "resolved", "allowed"),
    [
        (("journalctl", "-k", "-b", "--no-pager", "-o", "short-iso", "--since=-2h"), True, True),
        (("journalctl", "-k", "-b", "--no-pager", "-o", "short-iso", "--vacuum-size=1K"), True, False),
        (("journalctl", "-k", "-b", "--no-pager", "-o", "short-iso", "--since="), True, False),
        (("journalctl", "-k", "-b", "--no-pager", "-o", "short-iso", "--vacuum-size={since}"), False, False),
        (("journalctl", "-k", "-b", "--no-pager", "-o", "short-iso", "--since={since}"), False, True),
        (("journalctl", "-k", "-b", "--no-pager", "-o", "short-iso", "--since={since}x"), False, False),
        (("journalctl", "-u", "-vllm", "--no-pager", "-n", "5000"), True, False),  # a whole element: no option
        (("journalctl", "-u", "vllm", "--no-pager", "-n", "5000"), True, True),
    ],
)
def test_a_placeholder_takes_the_shapes_prefix_and_suffix(argv: tuple[str, ...], resolved: bool, allowed: bool) -> None:
    assert (allowed_shape(argv, resolved=resolved) is not None) == allowed


# --- transports/host_certs.py ---------------------------------------------------------------------
def _keygen(path: Path) -> Path:
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(path)], check=True, capture_output=True)
    return path


def _signed(tmp_path: Path, *args: str) -> tuple[bytes, bytes]:
    ca, host = _keygen(tmp_path / "ca"), _keygen(tmp_path / "host")
    subprocess.run(
        ["ssh-keygen", "-q", "-s", str(ca), "-I", "gpu-17-host", "-h", "-n", "gpu-17", *args, f"{host}.pub"],
        check=True,
        capture_output=True,
    )
    cert = base64.b64decode(Path(f"{host}-cert.pub").read_text().split()[1])
    return cert, base64.b64decode(Path(f"{ca}.pub").read_text().split()[1])


def test_a_certificate_with_critical_options_is_refused(tmp_path: Path) -> None:
    from nightowl.transports import host_certs

    cert, ca = _signed(tmp_path, "-O", "critical:foo=bar")
    assert host_certs.problem(cert, "gpu-17", [ca]) == "host certificate 'gpu-17-host' carries critical options"


def test_a_signature_that_cannot_be_parsed_or_does_not_verify_is_refused(tmp_path: Path) -> None:
    from nightowl.transports import host_certs

    cert, ca = _signed(tmp_path)
    assert host_certs.problem(cert, "gpu-17", [ca]) is None
    parsed = host_certs.parse(cert)
    cut = cert[: len(parsed.signed)] + (8).to_bytes(4, "big") + b"\x00\x00\x00\x07garb"  # a signature blob cut short
    assert host_certs.problem(cut, "gpu-17", [ca]) == "host certificate signature does not verify"
    flipped = bytearray(cert)
    flipped[len(parsed.signed) - 20] ^= 0x01  # inside the signed part (the CA key's bytes are the last ones)
    assert host_certs.problem(bytes(flipped), "gpu-17", [ca]) in (
        "host certificate signature does not verify",
        "host certificate signed by a CA that known_hosts does not trust for this host",
    )
    assert host_certs.problem(b"\x00\x00\x00\x03abc", "gpu-17", [ca]).startswith("unreadable host certificate")


# --- receiver/rules.py ----------------------------------------------------------------------------
@pytest.mark.parametrize(
    "template",
    [
        "ssh://root@gpu-17?jump=ssh://{{ labels.j }}",
        "root@h?jump={{ labels.j }}",
        "ssh://root@h/{{ labels.j }}",
        "{{ labels.scheme }}://h",
        "ssh://{{ labels.user }}@h",
    ],
)
def test_a_slot_outside_the_host_name_is_refused_when_the_config_loads(template: str) -> None:
    with pytest.raises(ValueError, match="may fill only the host name"):
        split_host_template(template)


def _rule(host: str, *matchers: str) -> Rule:
    return Rule("r", tuple(Matcher.parse(m) for m in matchers or ("alertname=A",)), "xid", host)


def _alert(**labels: str) -> Alert:
    return Alert("alertmanager", "firing", {"alertname": "A", **labels}, {}, None, None, "f")


def test_a_bare_label_host_template_renders() -> None:
    assert render_host(_rule("{{ labels.instance }}"), _alert(instance="gpu-17")) == "gpu-17"
    assert render_host(_rule("{{ labels.instance | hostonly }}"), _alert(instance="gpu-17:9400")) == "gpu-17"
    assert render_host(_rule("ssh://root@[{{ labels.ip | hostonly }}]:22"), _alert(ip="[fe80::1]:9400")) == (
        "ssh://root@[fe80::1]:22"
    )
    with pytest.raises(ValueError, match="'local'"):
        render_host(_rule("{{ labels.instance }}"), _alert(instance="LOCAL"))


@pytest.mark.parametrize(
    ("value", "expected"),
    [("10.0.0.5:9400", "10.0.0.5"), ("[fe80::1]:9400", "fe80::1"), ("gpu-17", "gpu-17"), ("fe80::1", "fe80::1")],
)
def test_hostonly(value: str, expected: str) -> None:
    assert _hostonly(value) == expected


@pytest.mark.parametrize(
    ("matcher", "labels", "matches"),
    [
        ("severity!=info", {"severity": "critical"}, True),
        ("severity!=info", {"severity": "info"}, False),
        ("severity!~info|ok", {"severity": "critical"}, True),
        ("severity!~info|ok", {"severity": "ok"}, False),
        ("severity=~crit.*", {"severity": "critical"}, True),
        ("severity=~crit", {"severity": "critical"}, False),  # anchored
        ('team="gpu infra"', {"team": "gpu infra"}, True),
        ("team='gpu infra'", {"team": "gpu infra"}, True),
        ('team="gpu', {"team": '"gpu'}, True),  # one quote is part of the value
        ("missing!=x", {}, True),
    ],
)
def test_matchers(matcher: str, labels: dict[str, str], matches: bool) -> None:
    assert Matcher.parse(matcher).matches(labels) is matches


# --- receiver/auth.py -----------------------------------------------------------------------------
def test_the_secure_flag_follows_cookie_secure() -> None:
    assert auth.set_cookie("v", 60, True).endswith("; HttpOnly; SameSite=Strict; Secure")
    assert "Secure" not in auth.set_cookie("v", 60, False)
    assert auth.clear_cookie(True).endswith("; Secure") and "Max-Age=0" in auth.clear_cookie(True)
    assert "Secure" not in auth.clear_cookie(False)


# --- hostnames.py ---------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("name", "problem"),
    [
        ("a" * 60 + "." + "b" * 60 + "." + "c" * 60 + "." + "d" * 60 + "." + "e" * 56 + ".", "longer than 253"),
        ("gpu-17..corp.", "empty label"),
        ("gpu-17..corp", "empty label"),
        ("gpu-17.corp.", None),  # absolute: the final dot is no label
        ("a" * 63 + ".corp.", None),
        ("a" * 64 + ".corp.", "longer than 63"),
        ("a" * 63 + "." + "b" * 63 + "." + "c" * 63 + "." + "d" * 61 + ".", None),  # 253 and a final dot
        ("a" * 63 + "." + "b" * 63 + "." + "c" * 63 + "." + "d" * 62, "longer than 253"),
    ],
)
def test_the_final_dot_is_not_counted_and_hides_no_empty_label(name: str, problem: str | None) -> None:
    found = host_name_problem(name)
    assert (found is None) if problem is None else (found is not None and problem in found), found


@pytest.mark.parametrize(
    ("name", "problem"),
    [
        ("", "empty"),
        ("gpu 17", "whitespace or control characters"),
        ("gpu/17", "only letters, digits, '.', '-' and '_' (and ':' or '%' in an IPv6 address)"),
        ("-oProxyCommand", "starts with '-', as an option does"),
        ("fe80::1%eth 0", "whitespace or control characters"),
        ("fe80::1%e/0", "only letters, digits, '.', '-' and '_' (and ':' or '%' in an IPv6 address)"),
        ("fe80::1%:x", "an IPv6 zone after '%' is an interface name (letters, digits, '.', '_', '-')"),
        ("gpu-17:22", "':' and '%' belong only in an IPv6 address, and this is none"),
        ("_gpu", "starts with neither a letter nor a digit"),
        ("x" * 254, "longer than 253 characters"),
        ("gpu..corp", "an empty label or one longer than 63 characters"),
        ("gpu-17.b.", None),  # a one-letter last label before the final dot
        ("fe80::1%eth0", None),
    ],
)
def test_host_name_problems_say_exactly_what(name: str, problem: str | None) -> None:
    assert host_name_problem(name) == problem
