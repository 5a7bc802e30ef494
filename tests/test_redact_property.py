"""The line prefilter changes no result: ``scrub_secrets`` gives what it gave before (tests/redact_oracle.py,
every pattern over the whole text) on any text, apart from the shapes it now masks on purpose (a bracketed
value whole, pod env name/value pairs, argv lists, a YAML list item after a secret flag)."""

from __future__ import annotations

import re

from hypothesis import example, given, settings
from hypothesis import strategies as st

from nightowl.redact import LIST_SHAPES, scrub_secrets, secret_spans
from tests import redact_oracle

FRAGMENTS = [
    *("token", "TOKEN", "secret", "passwd", "password", "pass", "pwd", "key", "api_key", "API-KEY", "apikey"),
    *("credentials", "cookie", "Set-Cookie", "authorization", "Authorization", "bearer ", "Bearer ", "Basic "),
    *("dXNlcjpwYXNz", "hf_" + "A" * 22, "AKIA" + "B" * 16, "ghp_" + "c" * 31, "sk-" + "d" * 21, "xoxb-1234567890"),
    *("eyJabcdefgh.eyJabcdefgh.abcdefgh", "AIza" + "e" * 35, "glpat-" + "f" * 20, "sk_live_" + "g" * 16, "SG."),
    *("https://", "redis://:pw@h", "u:p@", "://", "@", "private key", "-----BEGIN PRIVATE KEY-----"),
    *("-----END PRIVATE KEY-----", "MIIEvQ", "name", "value", "--", "-", "=", ":", '"', "'", ",", ";", "}", ")"),
    *("{", "(", " ", "  ", "\t", "\n", "\n\n", "\r\n", "\x0b", "\x85", "\u2028", "x", "abc123", "hunter2", "é"),
    *("\u017f", "\u212a", "\u0130", "\u0131", "pa\u017f\u017fword", "to\u212aen", "None", "PWD", "max_tokens"),
]
texts = st.one_of(
    st.lists(st.sampled_from(FRAGMENTS), max_size=40).map("".join),
    st.text(max_size=200),
    st.lists(st.one_of(st.sampled_from(FRAGMENTS), st.text(max_size=8)), max_size=30).map("".join),
)
# The shapes masked on purpose since the oracle: a bracketed value, a lone YAML "-" after a secret flag.
_CHANGED = re.compile(r"\[|--?[^\s\"']*\s+-\s")


def changed_on_purpose(text: str) -> bool:
    before = redact_oracle.scrub_secrets(text)
    return bool(_CHANGED.search(text)) or any(s.pattern.search(t) for s in LIST_SHAPES for t in (text, before))


@settings(max_examples=1500, deadline=None)
@given(texts)
@example("password\n=\n\n'hunter2'")
@example("x\nAuthorization\n:\n\n  abc")
@example("pa\u017f\u017fword=abc\n\n\nkey")
@example("\u0130\u0130 token=abc")
def test_scrub_secrets_gives_what_the_whole_text_passes_gave(text: str) -> None:
    if changed_on_purpose(text):
        return
    assert scrub_secrets(text) == redact_oracle.scrub_secrets(text)


@settings(max_examples=500, deadline=None)
@given(texts)
def test_spans_are_whole_lines_in_order_and_disjoint(text: str) -> None:
    spans = secret_spans(text)
    for index, (start, end) in enumerate(spans):
        assert start == 0 or text[start - 1] == "\n"
        assert end == len(text) or text[end] == "\n"
        assert index + 1 == len(spans) or end < spans[index + 1][0]


def test_the_oracle_is_the_old_scrubber() -> None:
    # what the old scrubber did with a bracketed value: the case the new one fixes
    assert redact_oracle.scrub_secrets("password=[hunter2]") == "password=[REDACTED]]"
    assert scrub_secrets("password=[hunter2]") == "password=[REDACTED]"


@settings(max_examples=500, deadline=None)
@given(st.lists(st.sampled_from([*FRAGMENTS, "\x00", "\n\x00\n"]), max_size=40).map("".join))
def test_a_text_holding_nul_is_scrubbed_the_same(text: str) -> None:
    if changed_on_purpose(text):
        return
    assert scrub_secrets(text) == redact_oracle.scrub_secrets(text)
