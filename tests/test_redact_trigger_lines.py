"""Finding trigger lines by one collapsed pass (nightowl/redact.py ``_trigger_lines``) gives what the
substring search per trigger gave, and ``scrub_secrets`` gives what it gave, byte for byte, on random texts
built from trigger words, a secret of every shape in nightowl/knowledge/secret_shapes.csv, newlines,
separators and the characters case folding treats apart. The reference is ``scrub_secrets`` as it was on
main before this change (its helpers copied below; the patterns it applies are the module's own)."""

from __future__ import annotations

from pathlib import Path

from hypothesis import example, given, settings
from hypothesis import strategies as st

from nightowl import redact
from nightowl.knowledge import read_csv

# --- the reference: nightowl/redact.py before the collapsed pass (do not edit) ---------------------


def reference_trigger_lines(folded: str) -> list[int]:
    starts: set[int] = set()
    for trigger in redact._LINE_TRIGGERS:
        position = folded.find(trigger)
        while position >= 0:
            starts.add(folded.rfind("\n", 0, position) + 1)
            following = folded.find("\n", position)
            position = folded.find(trigger, following + 1) if following >= 0 else -1
    return sorted(starts)


def _line_end(text: str, position: int) -> int:
    found = text.find("\n", position)
    return len(text) if found < 0 else found


def _value_line_end(text: str, position: int) -> int:
    end = _line_end(text, position)
    while end < len(text):
        following = _line_end(text, end + 1)
        if not set(text[end + 1 : following].strip()) <= redact._SEPARATORS:
            return following
        end = following
    return end


def reference_spans(text: str, folded: str | None = None) -> list[tuple[int, int]]:
    folded = text.translate(redact._FOLD).lower() if folded is None else folded
    if len(folded) != len(text):
        return [(0, len(text))]
    spans: list[tuple[int, int]] = []
    for line in reference_trigger_lines(folded):
        line_end = _line_end(text, line)
        words = folded[line:line_end].split()
        start = text.rfind("\n", 0, line - 1) + 1 if line and "name" in folded[line:line_end] else line
        open_ended = bool(words) and (
            any(t in words[-1] for t in redact._LINE_TRIGGERS) or set(words[-1]) <= redact._SEPARATORS
        )
        end = _value_line_end(text, line) if open_ended else line_end
        if spans and start <= spans[-1][1] + 1:
            spans[-1] = (spans[-1][0], max(spans[-1][1], end))
        else:
            spans.append((start, end))
    return spans


def _has_trigger(lowered: str) -> bool:
    if len(lowered) > 4096:
        return any(trigger in lowered for trigger in redact._TRIGGERS)
    return redact._TRIGGER.search(lowered) is not None


def reference_scrub(text: str) -> str:
    if not text:
        return text
    lowered = text.lower()
    folded = lowered if len(text) > 4096 and not any(c in text for c in redact._FOLDED) else None
    if folded is None and not _has_trigger(lowered):
        return text
    if "private key" in lowered:
        text = redact._mask_private_keys(text)
        folded = None
    spans = reference_spans(text, folded)
    if not spans:
        return text
    scrubbed = redact._scrub_stretches([text[start:end] for start, end in spans], "\x00" in text)
    pieces: list[str] = []
    position = 0
    for (start, end), stretch in zip(spans, scrubbed, strict=True):
        pieces += [text[position:start], stretch]
        position = end
    pieces.append(text[position:])
    return "".join(pieces)


# --- the texts ---------------------------------------------------------------------------------------

# One secret of every shape in secret_shapes.csv (a shape added there without a sample here fails below).
SHAPE_SAMPLES = {
    "authorization-header": "Authorization: Basic dXNlcjpwYXNz",
    "cookie-header": "Set-Cookie: session=abc123def",
    "bearer": "Bearer abcdefgh12345678",
    "huggingface": "hf_" + "A1b2C3d4E5f6G7h8I9j0K",
    "aws-access-key-id": "AKIA" + "ABCDEFGHIJ012345",
    "github": "ghp_" + "a" * 36,
    "openai-style": "sk-proj-" + "b" * 24,
    "slack": "xoxb-1234567890-abcdef",
    "google-api-key": "AIza" + "c" * 35,
    "jwt": "eyJhbGciOiJI.eyJzdWIiOiIx.c2lnbmF0dXJl",
    "url-userinfo": "https://user:hunter2@example.com/x",
    "gitlab": "glpat-" + "d" * 20,
    "npm": "npm_" + "e" * 36,
    "pypi": "pypi-AgE" + "f" * 50,
    "stripe": "sk_live_" + "g" * 24,
    "sendgrid": "SG." + "h" * 22 + "." + "i" * 43,
}
WORDS = [
    *redact._TRIGGERS,
    *(trigger.upper() for trigger in redact._LINE_TRIGGERS),
    *("kernel", "Keyboard", "key", "KEY", "zz", "jy", "gpu", "hugepages", "x86", "/dev", "a_b", "kkk"),
    *("name", "value", "password", "API_KEY", "--api-key", "HF_TOKEN", "aws_secret_access_key", "privatekey"),
    *("asiakey", "aidatoken", "sessionkey", "signingkey", "encryptionkey", "licensekey", "masterkey"),
]
PIECES = ["\n", "\n\n", "\r\n", " ", "\t", "=", ":", '"', "'", ",", "-", "_", ".", "/", "\x00", "\x01", "x", "0"]
FOLDING = ["\u0130", "\u0131", "\u017f", "\u212a", "to\u212aen", "pa\u017f\u017f", "é", "\u2028", "ß", "\uffff"]
fragments = st.sampled_from([*WORDS, *SHAPE_SAMPLES.values(), *PIECES, *FOLDING])
texts = st.one_of(
    st.lists(fragments, max_size=60).map("".join),
    st.lists(st.one_of(fragments, st.text(max_size=6)), max_size=40).map("".join),
    # past the long-text threshold, where scrub_secrets takes the lowered text as the folded one
    st.lists(fragments, min_size=1, max_size=30).map(lambda parts: "kernel: boot line\n" * 300 + "".join(parts)),
)


def test_every_secret_shape_has_a_sample() -> None:
    names = {row["name"] for row in read_csv("secret_shapes.csv", required=("name", "pattern", "source"))}
    assert names == set(SHAPE_SAMPLES)
    for shape in redact.TOKEN_SHAPES:
        assert shape.pattern.search(SHAPE_SAMPLES[shape.name]), shape.name


@settings(max_examples=2000, deadline=None)
@given(texts)
@example("kernel: Key type dns_resolver registered\nhid: Keyboard\n")
@example("x_key\nzapikey\n\x01en\nto\x01en\nto\u212aen")
@example("npm_\nnpmx\n:/\n://")
def test_trigger_lines_are_those_of_one_search_per_trigger(text: str) -> None:
    folded = text.translate(redact._FOLD).lower()
    assert redact._trigger_lines(folded) == reference_trigger_lines(folded)
    lowered = text.lower()
    assert redact._trigger_lines(lowered) == reference_trigger_lines(lowered)


@settings(max_examples=1500, deadline=None)
@given(texts)
@example("password\n=\n\n'hunter2'")
@example("kernel: boot line\n" * 300 + "HF_TOKEN=" + "hf_" + "A" * 22)
def test_scrub_secrets_gives_what_it_gave(text: str) -> None:
    expected = reference_scrub(text)
    assert redact.scrub_secrets(text) == expected
    assert redact.scrub_secrets(text) == expected  # a short string's kept answer is the same answer
    assert redact.secret_spans(text) == reference_spans(text)


def test_the_real_size_boot_log_is_scrubbed_as_before() -> None:
    from bench.real_evidence import kernel_log

    log = kernel_log()
    leaky = log + "kernel: cmdline HF_TOKEN=hf_" + "Q" * 30 + " api-key=abc\n" + log[:5000]
    for text in (log, leaky):
        assert redact.scrub_secrets(text) == reference_scrub(text)


def test_kept_answers_stay_bounded() -> None:
    for number in range(redact._SHORT_ANSWERS_MAX + 10):
        assert redact.scrub_secrets(f"token={number}x") == f"token={redact.MASK}"
    assert len(redact._SHORT_ANSWERS) <= redact._SHORT_ANSWERS_MAX
    long_text = "api_key=abc " * (redact._SHORT // 8)
    assert redact.scrub_secrets(long_text) == reference_scrub(long_text)
    assert long_text not in redact._SHORT_ANSWERS


# Real outputs: every recorded text under fixtures/ (copied from public reports, each with its SOURCE),
# not only texts this file builds.
_FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
_RECORDED = sorted(
    p for p in _FIXTURES.rglob("*") if p.is_file() and p.suffix in (".out", ".err", ".log", ".txt", ".xml", ".json")
)


def test_every_recorded_output_is_scrubbed_as_before() -> None:
    assert len(_RECORDED) > 100
    changed = 0
    for path in _RECORDED:
        text = path.read_text(errors="replace")
        expected = reference_scrub(text)
        assert redact.scrub_secrets(text) == expected, path
        lowered = text.translate(redact._FOLD).lower()
        assert redact._trigger_lines(lowered) == reference_trigger_lines(lowered), path
        changed += expected != text
    assert changed > 0  # some recorded outputs hold a secret shape: the comparison is not only of no-ops


@settings(max_examples=1000, deadline=None)
@given(texts)
@example("kernel: Key type dns_resolver registered")
@example("npm_\nsk-\n://")
def test_the_trigger_precheck_finds_what_a_substring_test_per_trigger_finds(text: str) -> None:
    lowered = text.lower()
    assert (redact._TRIGGER.search(lowered) is not None) == any(t in lowered for t in redact._TRIGGERS)


@settings(max_examples=500, deadline=None)
@given(
    st.lists(st.text(alphabet="ab-.(|", min_size=1, max_size=4), min_size=1, max_size=8),
    st.text(alphabet="ab-.(|x\n", max_size=40),
)
@example(["key", "keyboard"], "a keyboar")
def test_a_trie_of_words_finds_where_any_word_is(words: list[str], text: str) -> None:
    # words that are prefixes of others, and characters a pattern must escape
    assert (redact._any_of(words).search(text) is not None) == any(word in text for word in words)
