"""redact.py on its own (issue 30 mutation figures): the exact masks of each secret shape, what is left
alone, the trigger pre-check, and the placeholders of a --redact draft."""

from __future__ import annotations

import pytest

from nightowl.redact import MASK, Redactor, _has_trigger, _host_parts, scrub_secrets, secret_spans


@pytest.mark.parametrize(
    ("text", "scrubbed"),
    [
        ("password=hunter2", "password=[REDACTED]"),
        ("PASSWORD: hunter2", "PASSWORD: [REDACTED]"),
        ('"password": "hunter2"', '"password": "[REDACTED]"'),
        ("'token': 'abc'", "'token': '[REDACTED]'"),
        ("password=[hunter2]", "password=[REDACTED]"),
        ("x password=[a b] y", "x password=[REDACTED] y"),
        ("token=abc;next", "token=[REDACTED];next"),
        ("--api-key sk-abcdefabcdef12345678", "--api-key [REDACTED]"),
        ("--password=x1", "--password=[REDACTED]"),
        ("Authorization: Basic dXNlcjpwYXNz", "Authorization: [REDACTED]"),
        ("header Basic dXNlcjpwYXNz", "header Basic [REDACTED]"),
        ("url=https://user:pw@host/x", "url=https://user:[REDACTED]@host/x"),
        ("export HF_TOKEN=hf_abcdefghijklmnopqrstuvwxyz123456", "export HF_TOKEN=[REDACTED]"),
        ('{"name": "API_KEY", "value": "abc123"}', '{"name": "API_KEY", "value": "[REDACTED]"}'),
        ('{"value": "abc123", "name": "API_KEY"}', '{"value": "[REDACTED]", "name": "API_KEY"}'),
        ('["--api-key", "abc123"]', '["--api-key", "[REDACTED]"]'),
        ("- --api-key\n- abc123", "- --api-key\n- [REDACTED]"),
        ("password\n=\nhunter2", "password\n=\n[REDACTED]"),
        ("ghp_abcdefghijklmnopqrstuvwxyz0123456789", MASK),
        ("-----BEGIN RSA PRIVATE KEY-----\nMIIB\n-----END RSA PRIVATE KEY-----\nafter", "[REDACTED]\nafter"),
        ("before\n-----BEGIN PRIVATE KEY-----\nMIIBxx\nabc", "before\n[REDACTED]"),  # cut short: masked to the end
        ("a\npassword=x\nb\ntoken=y", "a\npassword=[REDACTED]\nb\ntoken=[REDACTED]"),
    ],
)
def test_each_secret_shape_is_masked_exactly(text: str, scrubbed: str) -> None:
    assert scrub_secrets(text) == scrubbed
    assert scrub_secrets(scrubbed) == scrubbed  # idempotent


@pytest.mark.parametrize(
    "text",
    [
        "",
        "password=none",
        'password=""',
        "password=null",
        "password=[REDACTED]",
        "header Basic bm9jb2xvbg==",  # decodes to no user:password pair
        "pass=a,b",
        "nvidia-smi -q",
        "Keyboard key pressed",
    ],
)
def test_what_is_left_alone(text: str) -> None:
    assert scrub_secrets(text) == text


def test_a_nul_in_the_text_keeps_lines_apart() -> None:
    text = "password=a\n\x00\ntoken=b"
    assert scrub_secrets(text) == "password=[REDACTED]\n\x00\ntoken=[REDACTED]"


def test_the_trigger_precheck() -> None:
    """scrub_secrets's early test (on the lowered text), by regular expression below 4 KB, by substrings past."""
    assert not _has_trigger("nvidia-smi -q")
    assert not _has_trigger("gpu 0: ok")
    assert not _has_trigger("x" * 5000)
    assert _has_trigger("token")
    assert _has_trigger("x" * 5000 + "token")
    assert _has_trigger("https://h")


def test_secret_spans_cover_the_lines_a_secret_may_lie_on() -> None:
    assert secret_spans("a\npassword=x\nb") == [(2, 14)]  # its last word holds a name: the next line too
    assert secret_spans("a\nthe password is set\nb") == [(2, 21)]
    assert secret_spans("a\n--api-key\n\n  v\nz") == [(2, 16)]  # a name ending its line: its value follows
    assert secret_spans("nothing here") == []
    assert secret_spans("token=a\ntoken=b") == [(0, 15)]  # touching stretches merge
    assert secret_spans('{"value": "x",\n"name": "API_KEY"}') == [(0, 33)]  # the line before a name


@pytest.mark.parametrize(
    ("name", "parts"),
    [
        ("ssh://root@gpu-17.corp:22", ["gpu-17.corp", "gpu-17"]),
        ("gpu-17", ["gpu-17"]),
        ("root@GPU-17:22/x?y", ["GPU-17"]),
        ("[fe80::1]:22", []),
        ("localhost", []),
        ("10.0.0.1", []),
        ("a.corp", ["a.corp"]),  # a one-letter short name is not hidden alone
        ("host.example.com", ["host.example.com"]),
        ("", []),
        (None, []),
    ],
)
def test_host_parts(name: str | None, parts: list[str]) -> None:
    assert _host_parts(name) == parts


def test_redactor_placeholders() -> None:
    redactor = Redactor()
    redactor.learn_hosts(["gpu-17.corp", "gpu-17.corp"])
    assert redactor.hosts == ["gpu-17.corp", "gpu-17"]
    text = (
        "Dec  1 10:00:00 gpu-17 kernel: NVRM: x on gpu-17.corp from 10.0.0.5 and 10.0.0.5 and 127.0.0.1 ::1 "
        "fe80::1%eth0 2001:db8::1 GPU-12345678-1234-1234-1234-123456789ABC serial number: 1320XYZ123 "
        "Serial=ABC12345 root@bastion:~ gpu-170 ok 999.1.1.1"
    )
    assert redactor.apply(text) == (
        "Dec  1 10:00:00 host-3 kernel: NVRM: x on host-1 from ip-1 and ip-1 and 127.0.0.1 ::1 "
        "ipv6-1 ipv6-2 gpu-uuid-1 serial number: serial-1 "
        "Serial=serial-2 root@host-2:~ gpu-170 ok 999.1.1.1"
    )
    assert redactor.mapping["gpu-12345678-1234-1234-1234-123456789abc"] == "gpu-uuid-1"
    assert redactor.placeholder("10.0.0.9", "ip") == "ip-2"
    assert redactor.placeholder("10.0.0.5", "ip") == "ip-1"


def test_redactor_learns_hosts_from_nccl_prefixes_and_fqdns_but_not_code() -> None:
    out = Redactor().apply("gpu-01:123:456 [0] NCCL INFO x\nnode.cluster.local and vllm.entrypoints.openai")
    assert out == "host-2:123:456 [0] NCCL INFO x\nhost-1 and vllm.entrypoints.openai"


def test_every_secret_shape_names_where_its_format_is_documented() -> None:
    from nightowl.redact import LIST_SHAPES, TOKEN_SHAPES

    shapes = (*TOKEN_SHAPES, *LIST_SHAPES)
    assert len({shape.name for shape in shapes}) == len(shapes)
    for shape in shapes:
        assert shape.name and len(shape.source) >= 10, shape
        assert "secret" in shape.pattern.groupindex, shape.name
