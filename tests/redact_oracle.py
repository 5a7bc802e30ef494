"""The oracle for tests/test_redact_property.py: ``scrub_secrets`` exactly as it was before the line
prefilter (nightowl/redact.py at commit 66f4beb), every pattern passed over the whole text. Do not edit:
the property test proves the new scrubber gives what this one gives."""

# ruff: noqa
from __future__ import annotations

import base64
import binascii
import bisect
import ipaddress
import re
from collections.abc import Iterable
from dataclasses import dataclass, field

MASK = "[REDACTED]"

# Values that say "no secret set": replacing them would hide a useful fact and protect nothing.
_EMPTY_VALUES = frozenset({"", "none", "null", "nil", "''", '""', "<none>", "unset", "false"})

# Words that make a key or variable name secret-bearing (HF_TOKEN, AWS_SECRET_ACCESS_KEY,
# OPENAI_API_KEY, WANDB_API_KEY, DB_PASSWORD, DB_PWD, REDIS_PASS, STRIPE_KEY, client_secret, api-key ...).
# The name must end with the word: max_num_batched_tokens, tokenizer, PWD and key= alone are not secrets.
# The name is matched only from the start of a run of name characters, and its prefix greedily, so the
# scan is linear: a lazy prefix tried again at every "-" or "." of a 100 KB token was quadratic.
_NAME_START = r"(?<![A-Za-z0-9_.-])"
_SECRET_NAME = (
    r"[A-Za-z0-9_.-]*(?:token|secret|passw(?:or)?d|passphrase|credentials?|apikey"
    r"|(?:api|access|secret|private|auth|session|signing|encryption|master|license)[_-]?key"
    r"|[_.-](?:key|pwd|pass))"
    r"(?![A-Za-z0-9_])"
)


@dataclass(frozen=True)
class SecretPattern:
    name: str
    pattern: re.Pattern[str]
    source: str  # why this shape is a secret: where the format is documented


def _p(name: str, regex: str, source: str, flags: int = 0) -> SecretPattern:
    return SecretPattern(name, re.compile(regex, flags), source)


# Token shapes recognised wherever they appear; group "secret" is what gets masked.
TOKEN_SHAPES: tuple[SecretPattern, ...] = (
    _p(
        "authorization-header",
        r"(?im)(?P<key>\b(?:proxy-)?authorization[\"']?\s*[:=]\s*[\"']?)(?P<secret>[^\r\n\"']+)",
        "RFC 9110 s11.6.2 Authorization header (any scheme)",
    ),
    _p(
        "cookie-header",
        r"(?im)(?P<key>\b(?:set-)?cookie[\"']?\s*[:=]\s*[\"']?)(?P<secret>[^\r\n\"']+)",
        "RFC 6265 s4 Cookie and Set-Cookie headers",
    ),
    _p("bearer", r"(?i)(?P<key>\bbearer\s+)(?P<secret>[A-Za-z0-9._~+/=-]{8,})", "RFC 6750 bearer tokens"),
    _p("huggingface", r"(?P<secret>\bhf_[A-Za-z0-9]{20,})", "Hugging Face user access tokens (hf_ prefix)"),
    _p(
        "aws-access-key-id",
        r"(?P<secret>\b(?:AKIA|ASIA|AGPA|AIDA|AROA|ANPA)[0-9A-Z]{16}\b)",
        "AWS IAM unique ID prefixes (IAM user guide, reference_identifiers)",
    ),
    _p(
        "github",
        r"(?P<secret>\b(?:gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{30,}))",
        "GitHub token prefixes (ghp_, gho_, ghu_, ghs_, ghr_, github_pat_)",
    ),
    _p("openai-style", r"(?P<secret>\bsk-(?:proj-|ant-)?[A-Za-z0-9_-]{20,})", "OpenAI / Anthropic sk- keys"),
    _p("slack", r"(?P<secret>\bxox[abposr]-[A-Za-z0-9-]{10,})", "Slack token prefixes"),
    _p("google-api-key", r"(?P<secret>\bAIza[0-9A-Za-z_-]{35})", "Google API keys"),
    _p("jwt", r"(?P<secret>\beyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,})", "RFC 7519 JWTs"),
    _p(
        "url-userinfo",
        # The user may be empty (redis://:pw@host) and the password may hold "/" (amqp://u:pa/ss@h);
        # both are bounded so that a long run of "a://a://..." stays linear.
        r"(?P<key>(?<![A-Za-z0-9+.-])[A-Za-z][A-Za-z0-9+.-]*://[^\s:/@]{0,256}:)(?P<secret>[^\s@]{1,256})(?=@)",
        "RFC 3986 s3.2.1 user:password@ in URLs",
    ),
    _p("gitlab", r"(?P<secret>\bgl(?:pat|dt|rt|ptt)-[A-Za-z0-9_-]{20,})", "GitLab token prefixes (glpat-, ...)"),
    _p("npm", r"(?P<secret>\bnpm_[A-Za-z0-9]{36})", "npm access tokens (npm_ prefix)"),
    _p("pypi", r"(?P<secret>\bpypi-AgE[A-Za-z0-9_-]{50,})", "PyPI API tokens (pypi- macaroons)"),
    _p("stripe", r"(?P<secret>\b[rs]k_(?:live|test)_[A-Za-z0-9]{16,})", "Stripe secret and restricted keys"),
    _p(
        "sendgrid",
        r"(?P<secret>\bSG\.[A-Za-z0-9_-]{22}\.[A-Za-z0-9_-]{43})",
        "SendGrid API keys (gitleaks sendgrid-api-token)",
    ),
)

# name=value, name: value, "name": "value", 'name': 'value', --name value, --name=value.
_ASSIGNMENT = re.compile(
    r"(?P<key>(?P<q>[\"']?)" + _NAME_START + _SECRET_NAME + r"(?P=q)\s*(?:=|:(?!//))\s*)"
    r"(?P<secret>\"[^\"\n]*\"|'[^'\n]*'|[^\s,;&\"'}\])]+)",
    re.IGNORECASE,
)
_CLI_FLAG = re.compile(
    r"(?P<key>(?<![\w-])--?" + _SECRET_NAME + r"(?:=|\s+))(?P<secret>\"[^\"\n]*\"|'[^'\n]*'|[^\s\"']+)",
    re.IGNORECASE,
)


def _mask(match: re.Match[str]) -> str:
    secret = match.group("secret")
    if secret.strip("\"'").strip().lower() in _EMPTY_VALUES or secret.lstrip("\"'").startswith(MASK[:-1]):
        return match.group(0)
    key = match.groupdict().get("key") or ""
    quote = secret[0] if secret[:1] in "\"'" and secret[-1:] == secret[:1] and len(secret) > 1 else ""
    return f"{key}{quote}{MASK}{quote}"


# "Basic" followed by base64 that decodes to user:password (RFC 7617), wherever it appears.
_BASIC = re.compile(r"(?i)(?P<key>\bbasic\s+)(?P<secret>[A-Za-z0-9+/]{6,}={0,2})(?![A-Za-z0-9+/=])")


def _mask_basic(match: re.Match[str]) -> str:
    try:
        decoded = base64.b64decode(match.group("secret"), validate=True)
    except (ValueError, binascii.Error):
        return match.group(0)
    return match.group("key") + MASK if b":" in decoded else match.group(0)


# RFC 7468 PEM and RFC 4880 s6.2 OpenPGP armored private keys. A block cut short (truncated output,
# no END line) is masked through its last base64 or header line. END lines are found once, so many
# BEGIN lines without an END stay linear.
_KEY_LABEL = r"(?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----"
_KEY_BEGIN = re.compile(r"-----BEGIN " + _KEY_LABEL)
_KEY_END = re.compile(r"-----END " + _KEY_LABEL)
_KEY_LINE_END = r"(?=\r?\n|\\r?\\n|\Z)"
_KEY_BODY = re.compile(
    r"(?:(?:\r?\n|\\r?\\n)[ \t]*(?:[A-Za-z0-9+/=]+|(?:Proc-Type|DEK-Info|Version|Comment|Hash|Charset):[^\r\n\\]*)?"
    r"[ \t]*" + _KEY_LINE_END + r")*"
)


def _mask_private_keys(text: str) -> str:
    ends = [m.end() for m in _KEY_END.finditer(text)]
    pieces: list[str] = []
    position = 0
    for begin in _KEY_BEGIN.finditer(text):
        if begin.start() < position:
            continue
        index = bisect.bisect_left(ends, begin.end())
        stop = ends[index] if index < len(ends) else _KEY_BODY.match(text, begin.end()).end()  # type: ignore[union-attr]
        pieces += [text[position : begin.start()], MASK]
        position = stop
    if not pieces:
        return text
    pieces.append(text[position:])
    return "".join(pieces)


# A text without any of these (lower-cased) cannot match a pattern above: each pattern needs one of
# them. One pass of substring tests spares the dozen substitutions on most outputs (nvidia-smi, dmesg).
_TRIGGERS = (
    "token",
    "secret",
    "pass",
    "pwd",
    "cookie",
    "basic",
    "glpat",
    "gldt",
    "glrt",
    "glptt",
    "npm_",
    "pypi-",
    "k_live_",
    "k_test_",
    "sg.",
    "credential",
    "key",
    "authorization",
    "bearer",
    "hf_",
    "akia",
    "asia",
    "agpa",
    "aida",
    "aroa",
    "anpa",
    "ghp_",
    "gho_",
    "ghu_",
    "ghs_",
    "ghr_",
    "github_pat_",
    "sk-",
    "xox",
    "aiza",
    "eyj",
    "://",
)


# One pass over the text for every trigger (the per-trigger `in` loop was most of a sweep bundle's
# scrubbing time: every short JSON string went through ~40 substring scans).
_TRIGGER = re.compile("|".join(re.escape(trigger) for trigger in _TRIGGERS))


def might_hold_secrets(text: str) -> bool:
    """False only when ``scrub_secrets`` would leave ``text`` and every part of it unchanged.

    Sound for a JSON document too (``json.dumps(..., ensure_ascii=False)``): each string appears in it
    as written apart from escaped quotes, backslashes and control characters, and no trigger holds one
    (tests/test_redact.py checks), so a trigger inside any string is a trigger inside the document."""
    return bool(_TRIGGER.search(text.lower()))


def scrub_secrets(text: str) -> str:
    """Mask secrets in command lines, environment dumps and logs. Idempotent; never raises."""
    if not text:
        return text
    lowered = text.lower()
    if not _TRIGGER.search(lowered):
        return text
    if "private key" in lowered:
        text = _mask_private_keys(text)
    for shape in TOKEN_SHAPES:
        text = shape.pattern.sub(_mask, text)
    text = _BASIC.sub(_mask_basic, text)
    text = _CLI_FLAG.sub(_mask, text)
    return _ASSIGNMENT.sub(_mask, text)
