"""Issue 14 items 1 and 7: secret scrubbing is linear on megabyte inputs and covers the secret shapes
listed by detect-secrets (https://github.com/Yelp/detect-secrets/tree/master/detect_secrets/plugins)
and gitleaks (https://github.com/gitleaks/gitleaks/blob/master/config/gitleaks.toml)."""

from __future__ import annotations

import pytest

from nightowl.redact import MASK, scrub_secrets
from tests.hostile.watchdog import watchdog

# (raw, the secret that must be gone, what must stay)
SHAPES = [
    ("redis://:pw0rd@cache:6379/0", "pw0rd", "@cache:6379"),
    ("amqp://u:pa/ss@h:5672/", "pa/ss", "@h:5672"),
    ("postgres://svc:hunter2@db:5432/x", "hunter2", "svc"),
    ("-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEA7bq\nAbCdEf+/==\n", "MIIEowIBAAKCAQEA7bq", ""),
    (
        "key: -----BEGIN OPENSSH PRIVATE KEY-----\\nb3BlbnNzaC1rZXk\\n-----END OPENSSH PRIVATE KEY-----",
        "b3BlbnNz",
        "key:",
    ),
    (
        "-----BEGIN PGP PRIVATE KEY BLOCK-----\nVersion: GnuPG v2\n\nlQOYBF0AbCdEfGh\n=abcd\n"
        "-----END PGP PRIVATE KEY BLOCK-----\nafter",
        "lQOYBF0AbCdEfGh",
        "after",
    ),
    ("-----BEGIN PGP PRIVATE KEY BLOCK-----\n\nlQOYBF0AbCdEfGh\n", "lQOYBF0AbCdEfGh", ""),
    ("STRIPE_KEY=abc123xyz", "abc123xyz", "STRIPE_KEY="),
    ("DB_PWD=s3cr3tpw", "s3cr3tpw", "DB_PWD="),
    ("REDIS_PASS=s3cr3tpw", "s3cr3tpw", "REDIS_PASS="),
    ("export MYSQL_ROOT_PASSWORD='x y z'", "x y z", "MYSQL_ROOT_PASSWORD="),
    ("Cookie: session=abcdef0123; csrftoken=zz", "abcdef0123", "Cookie:"),
    ("Set-Cookie: sid=31d4d96e407aad42; Path=/", "31d4d96e407aad42", "Set-Cookie:"),
    ("curl -H 'X-Auth: Basic dXNlcjpwYXNzd29yZA==' http://h", "dXNlcjpwYXNzd29yZA==", "http://h"),
    ("Authorization: Bearer abcdefgh12345678", "abcdefgh12345678", "Authorization:"),
    ("token ghp_abcdefghijklmnopqrstuvwxyz0123456789", "ghp_abcdefghijklmnopqrstuvwxyz0123456789", ""),
    ("glpat-abcdefghij0123456789", "glpat-abcdefghij0123456789", ""),
    ("//registry.npmjs.org/:_authToken=npm_" + "a" * 36, "npm_" + "a" * 36, ""),
    ("password pypi-AgEIcHlwaS5vcmc" + "x" * 60, "pypi-AgEIcHlwaS5vcmc", ""),
    ("sk_live_" + "4eC39HqLyjWDarjtT1zdp7dc", "4eC39HqLyjWDarjtT1zdp7dc", ""),
    ("SG." + "a" * 22 + "." + "b" * 43, "b" * 43, ""),
    ("hf_AbCdEfGhIjKlMnOpQrStUvWxYz012345", "hf_AbCdEfGhIjKlMnOpQrStUvWxYz012345", ""),
    ("AKIAIOSFODNN7EXAMPLE", "AKIAIOSFODNN7EXAMPLE", ""),
    ("--hf-token hf_x1234567", "hf_x1234567", "--hf-token"),
]
KEPT = [
    "basic information about the node",  # "basic" + a word that is not base64 of user:pass
    "PWD=/root",
    "key=value",
    "see http://host:8000/v1/models",
]


@pytest.mark.parametrize(("raw", "secret", "kept"), SHAPES, ids=[s[0][:30] for s in SHAPES])
def test_secret_shapes_are_masked(raw: str, secret: str, kept: str) -> None:
    scrubbed = scrub_secrets(raw)
    assert secret not in scrubbed
    assert MASK in scrubbed
    assert kept in scrubbed
    assert scrub_secrets(scrubbed) == scrubbed


@pytest.mark.parametrize("text", KEPT)
def test_not_secrets_are_kept(text: str) -> None:
    assert scrub_secrets(text) == text


MEGABYTE = [
    "token request id=" + "ab-" * 350_000,  # issue 14: 25 KB of this took 27 s
    "password " + "a." * 500_000,
    "a://b:" * 200_000,
    "-----BEGIN RSA PRIVATE KEY-----\n" * 40_000,
    "--x-" * 300_000 + " token",
    "x_" * 500_000 + "=token",
    "basic " * 200_000,
]


@pytest.mark.parametrize("text", MEGABYTE, ids=[t[:12] for t in MEGABYTE])
def test_megabyte_inputs_are_scrubbed_in_linear_time(text: str) -> None:
    with watchdog():
        scrubbed = scrub_secrets(text)
        assert scrub_secrets(scrubbed) == scrubbed  # idempotent: a second pass finds nothing left
    assert len(scrubbed) <= len(text)


def test_a_key_block_cut_short_is_masked_to_its_last_line_only() -> None:
    text = "before\n-----BEGIN EC PRIVATE KEY-----\nMHcCAQEEIBBBB\nAAAA==\nnvidia-smi: ok here"
    scrubbed = scrub_secrets(text)
    assert "MHcCAQEEIBBBB" not in scrubbed and "AAAA==" not in scrubbed
    assert scrubbed.startswith("before\n") and "nvidia-smi: ok here" in scrubbed
