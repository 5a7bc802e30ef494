"""Keep secrets out of bundles, and names out of drafts that leave the team.

``scrub_secrets`` runs on every raw output before it is written to a bundle (bearer tokens,
passwords, API keys in command lines, environment dumps and logs). ``Redactor`` is for
``postmortem --redact``: host names, IP addresses, serial numbers and GPU UUIDs become
placeholders, the same original always getting the same placeholder across the whole draft.
"""

from __future__ import annotations

import base64
import binascii
import bisect
import ipaddress
import re
from collections.abc import Iterable
from dataclasses import dataclass, field

from nightowl.knowledge import compile_pattern, read_csv

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


# Token shapes recognised wherever they appear; group "secret" is what gets masked. Data, one row per shape
# with the document that defines the format (nightowl/knowledge/secret_shapes.csv).
TOKEN_SHAPES: tuple[SecretPattern, ...] = tuple(
    SecretPattern(row["name"], compile_pattern(row["pattern"], f"secret_shapes.csv: {row['name']}"), row["source"])
    for row in read_csv("secret_shapes.csv", required=("name", "pattern", "source"))
)

# name=value, name: value, "name": "value", 'name': 'value', --name value, --name=value.
# A value in brackets (password=[hunter2]) is masked whole: cut at "]" it left a stray "]" behind.
_ASSIGNMENT = re.compile(
    r"(?P<key>(?P<q>[\"']?)" + _NAME_START + _SECRET_NAME + r"(?P=q)\s*(?:=|:(?!//))\s*)"
    r"(?P<secret>\"[^\"\n]*\"|'[^'\n]*'|\[[^\[\]\n]*\](?![^\s,;&\"'}\])])|[^\s,;&\"'}\])]+)",
    re.IGNORECASE,
)
# A lone "-" after the flag is the next item of a YAML list (``- --api-key`` / ``- value``), not its value.
_CLI_FLAG = re.compile(
    r"(?P<key>(?<![\w-])--?" + _SECRET_NAME + r"(?:=|\s+))(?P<secret>\"[^\"\n]*\"|'[^'\n]*'|(?!-\s)[^\s\"']+)",
    re.IGNORECASE,
)


_QUOTED = r"(?:\"[^\"\n]*\"|'[^'\n]*')"
# Secrets set by name in a pod spec or a container inspect, which an assignment never shows: the name and
# the value are two fields (JSON ``{"name": "API_KEY", "value": "..."}`` or YAML ``- name: API_KEY`` /
# ``value: ...``, either order), or an argv list holds the flag and its value as two items
# (``["--api-key", "..."]``, YAML ``- --api-key`` / ``- ...``).
_ENV_NAME = r"[\"']?name[\"']?\s*:\s*[\"']?" + _NAME_START + _SECRET_NAME + r"[\"']?"
LIST_SHAPES: tuple[SecretPattern, ...] = (
    _p(
        "env-name-then-value",
        r"(?P<key>" + _ENV_NAME + r"\s*,?\s*[\"']?value[\"']?\s*:\s*)(?P<secret>" + _QUOTED + r"|[^\s,}\"']+)",
        "Kubernetes EnvVar (name, value): kubectl get pod -o json / -o yaml, docker inspect Config.Env",
        re.IGNORECASE,
    ),
    _p(
        "env-value-then-name",
        r"(?P<key>[\"']?value[\"']?\s*:\s*)(?P<secret>" + _QUOTED + r"|[^\s,}\"']+)(?=\s*,?\s*" + _ENV_NAME + r")",
        "Kubernetes EnvVar with its fields in the other order",
        re.IGNORECASE,
    ),
    _p(
        "argv-list",
        r"(?P<key>(?P<q>[\"'])--?" + _SECRET_NAME + r"(?P=q)\s*,\s*)(?P<secret>" + _QUOTED + ")",
        "argv as a JSON or Python list (pod args, /proc/PID/cmdline dumps, container inspect)",
        re.IGNORECASE,
    ),
    _p(
        "argv-yaml",
        r"(?P<key>(?<![^\s])-[ \t]+[\"']?--?" + _SECRET_NAME + r"[\"']?[ \t]*\r?\n[ \t]*-[ \t]+)"
        r"(?P<secret>" + _QUOTED + r"|[^\s\"']+)",
        "argv as a YAML block list (pod args in kubectl get pod -o yaml)",
        re.IGNORECASE,
    ),
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


# A word as a trie pattern reads it: the path to spell out (from its anchor on, below) and the whole word
# (for a look-behind where the path starts inside it).
_Entry = tuple[str, str]


def _trie_pattern(entries: list[_Entry], depth: int = 0) -> str:
    """The entries' paths (from ``depth`` on) as nested alternatives; where one ends, a look-behind for
    its whole text (tried after the longer paths), or nothing when the path is the whole text."""
    ends = sorted({whole for path, whole in entries if len(path) == depth})
    if any(len(whole) == depth for whole in ends):
        return ""  # a find already: the longer paths on from here need not be read
    following: dict[str, list[_Entry]] = {}
    for path, whole in entries:
        if len(path) > depth:
            following.setdefault(path[depth], []).append((path, whole))
    alternatives = [re.escape(char) + _trie_pattern(group, depth + 1) for char, group in sorted(following.items())]
    alternatives += [f"(?<={re.escape(whole)})" for whole in ends]
    return alternatives[0] if len(alternatives) == 1 else "(?:" + "|".join(alternatives) + ")"


def _any_of(words: Iterable[str]) -> re.Pattern[str]:
    """A pattern finding where any of ``words`` occurs, as a trie (``t(?:oken|est)``): a flat alternation
    tries every word at every position, the trie one branch per next letter."""
    return re.compile(_trie_pattern([(word, word) for word in words]))


# One pass over the text for every trigger (the per-trigger `in` loop was most of a sweep bundle's
# scrubbing time: every short JSON string went through ~40 substring scans).
_TRIGGER = _any_of(_TRIGGERS)


# Past this length one str.find per trigger (a fast substring search each) beats the alternation, which
# Python's re tries position by position; below it, one regex call beats forty method calls.
_LONG_TEXT = 4096


def _has_trigger(lowered: str) -> bool:
    if len(lowered) > _LONG_TEXT:
        return any(trigger in lowered for trigger in _TRIGGERS)
    return _TRIGGER.search(lowered) is not None


# A bundle's JSON documents are scrubbed string by string (17k strings in a 32-host sweep), and most of
# those strings recur across hosts and documents (PCI addresses, GPU names, units, verdict texts): a short
# string's answer is kept, so each costs one dict look-up after its first time. Bounded: cleared when full.
_SHORT = 512
# cache: keyed by the input string, whose redacted form the fixed patterns alone decide.
_SHORT_ANSWERS: dict[str, str] = {}
_SHORT_ANSWERS_MAX = 16384


def scrub_secrets(text: str) -> str:
    """Mask secrets in command lines, environment dumps and logs. Idempotent; never raises.

    Only the lines that can hold a secret meet the patterns (``secret_spans``): one pass for the
    trigger words finds them, so a 750 KB boot log costs about that one pass, not twenty."""
    if len(text) > _SHORT:
        return _scrub(text)
    answer = _SHORT_ANSWERS.get(text)
    if answer is None:
        answer = _scrub(text)
        if len(_SHORT_ANSWERS) >= _SHORT_ANSWERS_MAX:
            _SHORT_ANSWERS.clear()
        _SHORT_ANSWERS[text] = answer
    return answer


def _scrub(text: str) -> str:
    if not text:
        return text
    lowered = text.lower()
    # A long text without the characters _FOLD maps folds to ``lowered`` itself, and every line trigger
    # holds a trigger: finding the trigger lines (or none) is then the early test too, one pass, not two.
    folded = lowered if len(text) > _LONG_TEXT and not any(c in text for c in _FOLDED) else None
    if folded is None and not _has_trigger(lowered):
        return text
    if "private key" in lowered:
        text = _mask_private_keys(text)
        folded = None  # the text changed
    spans = secret_spans(text, folded)
    if not spans:
        return text
    scrubbed = _scrub_stretches([text[start:end] for start, end in spans], "\x00" in text)
    pieces: list[str] = []
    position = 0
    for (start, end), stretch in zip(spans, scrubbed, strict=True):
        pieces += [text[position:start], stretch]
        position = end
    pieces.append(text[position:])
    return "".join(pieces)


# Joins the stretches so that each pattern runs once over all of them (a call per stretch and pattern
# was most of the cost): no pattern matches across a line holding only NUL, so none spans two stretches.
_JOIN = "\n\x00\n"


def _scrub_stretches(stretches: list[str], holds_nul: bool) -> list[str]:
    if len(stretches) <= 1 or holds_nul:  # a NUL of the text's own could be taken for a join
        return [_scrub_lines(stretch) for stretch in stretches]
    parts = _scrub_lines(_JOIN.join(stretches)).split(_JOIN)
    if len(parts) != len(stretches):  # cannot happen (see _JOIN); if it did, one stretch at a time
        return [_scrub_lines(stretch) for stretch in stretches]
    return parts


def _scrub_lines(text: str) -> str:
    """Every pattern, in order, over lines that may hold a secret."""
    for shape in TOKEN_SHAPES:
        text = shape.pattern.sub(_mask, text)
    text = _BASIC.sub(_mask_basic, text)
    text = _CLI_FLAG.sub(_mask, text)
    text = _ASSIGNMENT.sub(_mask, text)
    for shape in LIST_SHAPES:
        text = shape.pattern.sub(_mask, text)
    return text


# The characters ``re.IGNORECASE`` matches to an ASCII letter although ``str.lower`` does not give it
# (Python's re documentation): folded first, so a trigger is found wherever a pattern can match.
_FOLD = str.maketrans({"\u0130": "i", "\u0131": "i", "\u017f": "s", "\u212a": "k"})
_FOLDED = ("\u0130", "\u0131", "\u017f", "\u212a")
# What may stand alone on a line between a secret's name and its value (``password`` / ``=`` / ``x``).
_SEPARATORS = frozenset("=:\"',")


def secret_spans(text: str, folded: str | None = None) -> list[tuple[int, int]]:
    """The stretches of whole lines every match of a secret pattern lies in, in order, disjoint.

    Every match holds a trigger word and starts on the trigger's line, or on the line before it (an
    environment value written before its name, where the line names it). A match that goes on past its
    line's end does so from a name that ends the line (``--api-key``, ``password``, ``"HF_TOKEN",``) or a
    lone ``=`` or ``:``, over whitespace, separators and quotes, to its value, which is on one line. So
    each trigger line gives a stretch from that line (or the one before) to the line's end, or then to
    the first following line that holds anything else; stretches that touch are merged."""
    folded = text.translate(_FOLD).lower() if folded is None else folded
    if len(folded) != len(text):  # a character whose lower case is longer: positions no longer line up
        return [(0, len(text))]
    spans: list[tuple[int, int]] = []
    for line in _trigger_lines(folded):
        line_end = _line_end(text, line)
        words = folded[line:line_end].split()
        # the line before: an environment value written before its name ({"value": "x", "name": "API_KEY"})
        start = text.rfind("\n", 0, line - 1) + 1 if line and "name" in folded[line:line_end] else line
        # the lines after: only when a name ends the line (or a lone "=" or ":" does), its value may follow
        open_ended = bool(words) and (any(t in words[-1] for t in _LINE_TRIGGERS) or set(words[-1]) <= _SEPARATORS)
        end = _value_line_end(text, line) if open_ended else line_end
        if spans and start <= spans[-1][1] + 1:
            spans[-1] = (spans[-1][0], max(spans[-1][1], end))
        else:
            spans.append((start, end))
    return spans


# The triggers that find lines: "key" alone is too wide for that ("Keyboard", "kernel key"), and every
# pattern that needs it needs one of these (_SECRET_NAME: api_key, api-key, apikey, .key, accesskey ...).
_KEY_WORDS = ("api", "access", "secret", "private", "auth", "session", "signing", "encryption", "master", "license")
_LINE_TRIGGERS = (*(t for t in _TRIGGERS if t != "key"), "_key", "-key", ".key", *(f"{w}key" for w in _KEY_WORDS))


def _trigger_lines(folded: str) -> list[int]:
    """The start of every line holding a trigger word, in order (a line is listed once however many
    triggers it holds).

    A substring search per trigger was ~50 passes over the text. Instead the characters that all the
    triggers but two hold one of (``_ANCHORS``) are turned into one byte, so that one regular expression
    whose first character is that byte (a fast scan in C, most anchors failing at the next byte) finds
    where such a trigger may be; each find is then matched, in C, against the triggers whose first anchor
    is there (``_AT_ANCHOR``: the same pattern on the text itself). The two others get a substring search
    each."""
    # latin-1 with "?" for wider characters keeps one byte per character, and no trigger holds either.
    collapsed = folded.encode("latin-1", "replace").translate(_COLLAPSE)
    starts: set[int] = set()
    search = _ANCHORED.search
    at_anchor = _AT_ANCHOR.match
    position = 0
    while (found := search(collapsed, position)) is not None:
        anchor = found.start()
        if at_anchor(folded, anchor) is None:  # an anchor inside a find that is no trigger is one to try
            position = anchor + 1
        else:
            starts.add(folded.rfind("\n", 0, anchor) + 1)
            position = _line_end(folded, anchor) + 1  # this line is listed: on to the next
    for trigger in _UNANCHORED:
        position = folded.find(trigger)
        while position >= 0:
            starts.add(folded.rfind("\n", 0, position) + 1)
            following = folded.find("\n", position)
            position = folded.find(trigger, following + 1) if following >= 0 else -1
    return sorted(starts)


# Characters of the trigger words that are rare in command output: a boot log has "k" in "kernel" on
# every line, and still fewer of these than of any other choice that leaves few triggers without one.
# Each anchor costs a try of the pattern (one alternative per next byte): no "b" or "z", as every
# trigger holding one holds an "a" (basic, bearer, github_pat_, aiza, authorization), which cut a boot
# log's trigger search by a fifth; and without "z", "giga" and "high" no longer collapse to what "aiza" does.
# No "_" either: every trigger holding one holds another anchor (hf_, ghp_, k_live_, _key) or none that can
# start a search ("npm_"), and XML tags and call traces are full of them: an 8-GPU `nvidia-smi -q -x` has a
# "_" in every "<supported_graphics_clock>", where "_graph" collapsed as "ghr_" does (half its search time).
_ANCHORS = "kjwyhgx/a"
_ANCHOR = "\x01"


def _collapse_table() -> bytes:
    table = bytearray(range(256))
    table[ord(_ANCHOR)] = 0  # a \x01 of the text's own must not pass for an anchor
    for char in _ANCHORS:
        table[ord(char)] = ord(_ANCHOR)
    return bytes(table)


_COLLAPSE = _collapse_table()


def _anchor_patterns(triggers: Iterable[str]) -> tuple[re.Pattern[bytes], re.Pattern[str], tuple[str, ...]]:
    """The triggers holding an anchor, from their first anchor on, as a trie of literals (most anchors
    fail at the next character), with a look-behind for what comes before the anchor where a trigger
    ends: once collapsed as the text is (a find there may be no trigger, the anchors being one byte), and
    once as written (a match there is one). Also the triggers without an anchor."""
    collapsed_entries: list[_Entry] = []
    written_entries: list[_Entry] = []
    unanchored: list[str] = []
    for trigger in triggers:
        collapsed = trigger.encode("latin-1").translate(_COLLAPSE).decode("latin-1")
        anchor = collapsed.find(_ANCHOR)
        if anchor < 0 or anchor == len(collapsed) - 1 > 0:  # none, or nothing after it to read ("npm_"):
            unanchored.append(trigger)  # a look-behind at every anchor would cost more than a search
            continue
        collapsed_entries.append((collapsed[anchor:], collapsed))
        written_entries.append((trigger[anchor:], trigger))
    anchored = re.compile(_trie_pattern(collapsed_entries).encode("latin-1"))
    return anchored, re.compile(_trie_pattern(written_entries)), tuple(unanchored)


_ANCHORED, _AT_ANCHOR, _UNANCHORED = _anchor_patterns(_LINE_TRIGGERS)


def _value_line_end(text: str, position: int) -> int:
    """The end of the first line after ``position``'s that holds more than whitespace and separators."""
    end = _line_end(text, position)
    while end < len(text):
        following = _line_end(text, end + 1)
        if not set(text[end + 1 : following].strip()) <= _SEPARATORS:
            return following
        end = following
    return end


def _line_end(text: str, position: int) -> int:
    found = text.find("\n", position)
    return len(text) if found < 0 else found


# --- --redact: names, addresses, serials ---------------------------------------------------------
_IPV4 = re.compile(r"(?<![\w.])(?:\d{1,3}\.){3}\d{1,3}(?![\w.]*\d)")
# A v6 address has "::" or all eight groups; that keeps PCI addresses (0000:a1:00), MACs and
# clock times (21:29:39) out.
_IPV6 = re.compile(
    r"(?<![\w:])(?:(?:[0-9A-Fa-f]{1,4}:){7}[0-9A-Fa-f]{1,4}"
    r"|(?:[0-9A-Fa-f]{1,4}:){1,7}:(?:[0-9A-Fa-f]{1,4}(?::[0-9A-Fa-f]{1,4}){0,6})?"
    r"|::(?:[0-9A-Fa-f]{1,4}:){0,6}[0-9A-Fa-f]{1,4})(?:%\w+)?(?![\w:])"
)
_GPU_UUID = re.compile(r"\b(?:GPU|MIG)-[0-9a-fA-F]{8}(?:-[0-9a-fA-F]{4}){3}-[0-9a-fA-F]{12}\b")
_SERIAL = re.compile(
    r"(?P<key>(?i:serial(?:[ _]?number)?)(?:\s*(?:is|:|=)\s*|>\s*|\s+))(?P<value>(?=[A-Za-z-]*\d)[A-Za-z0-9-]{6,})"
)
# Where logs name the host they came from (syslog/journal prefix, shell prompt, NCCL line prefix).
_HOST_SOURCES = (
    re.compile(
        r"^\s*(?:[A-Z][a-z]{2}\s+\d{1,2}\s+\d\d:\d\d:\d\d(?:\.\d+)?|\d{4}-\d\d-\d\dT\S+)\s+"
        r"(?P<host>[A-Za-z0-9][A-Za-z0-9._-]*)\s+[A-Za-z0-9_./-]+(?:\[\d+\])?:\s",
        re.M,
    ),
    re.compile(r"\b[a-z_][a-z0-9_-]*@(?P<host>[A-Za-z0-9][A-Za-z0-9.-]*[A-Za-z0-9])(?=[:\s]|$)", re.M),
    re.compile(r"^(?P<host>[A-Za-z][A-Za-z0-9.-]*):\d+:\d+ \[\d+\] NCCL ", re.M),
)
# Fully qualified names under suffixes that are hosts, not code (vllm.entrypoints.openai is code).
_FQDN = re.compile(
    r"(?<![\w.-])(?:[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?\.)+"
    r"(?:com|net|org|io|ai|dev|cloud|internal|local|lan|corp|intra|svc|cluster\.local|home\.arpa)(?![\w-])"
)
_NOT_HOSTS = frozenset({"localhost", "kernel", "local", "unknown", "none", "null", "host"})
_ALWAYS_KEPT_IPS = frozenset({"127.0.0.1", "0.0.0.0", "::1", "::"})


@dataclass
class Redactor:
    """Consistent placeholders for one draft: ``host-1``, ``ip-1``, ``serial-1``, ``gpu-uuid-1``."""

    hosts: list[str] = field(default_factory=list)
    mapping: dict[str, str] = field(default_factory=dict)
    _counters: dict[str, int] = field(default_factory=dict)

    def learn_hosts(self, names: Iterable[str | None]) -> None:
        for name in names:
            for part in _host_parts(name):
                if part not in self.hosts:
                    self.hosts.append(part)

    def learn_from_text(self, text: str) -> None:
        """Host names the text itself reveals (log prefixes, prompts, FQDNs)."""
        for pattern in _HOST_SOURCES:
            self.learn_hosts(m.group("host") for m in pattern.finditer(text))
        self.learn_hosts(m.group(0) for m in _FQDN.finditer(text))

    def placeholder(self, original: str, kind: str) -> str:
        if original not in self.mapping:
            self._counters[kind] = self._counters.get(kind, 0) + 1
            self.mapping[original] = f"{kind}-{self._counters[kind]}"
        return self.mapping[original]

    def apply(self, text: str) -> str:
        self.learn_from_text(text)
        text = _GPU_UUID.sub(lambda m: self.placeholder(m.group(0).lower(), "gpu-uuid"), text)
        text = _SERIAL.sub(lambda m: m.group("key") + self.placeholder(m.group("value"), "serial"), text)
        text = _IPV6.sub(lambda m: self._ip(m.group(0), "ipv6"), text)
        text = _IPV4.sub(lambda m: self._ip(m.group(0), "ip"), text)
        for name in sorted(self.hosts, key=len, reverse=True):
            pattern = re.compile(r"(?<![A-Za-z0-9-])" + re.escape(name) + r"(?![A-Za-z0-9-])", re.IGNORECASE)
            text = pattern.sub(self.placeholder(name.lower(), "host"), text)
        return text

    def _ip(self, candidate: str, kind: str) -> str:
        try:
            address = ipaddress.ip_address(candidate.split("%")[0])
        except ValueError:
            return candidate
        if str(address) in _ALWAYS_KEPT_IPS:
            return candidate
        return self.placeholder(str(address), kind)


def _host_parts(name: str | None) -> list[str]:
    """A host spec or name -> the names to hide (``ssh://root@gpu-17.corp:22`` -> gpu-17.corp, gpu-17)."""
    if not name:
        return []
    value = name.strip()
    if "://" in value:
        value = value.split("://", 1)[1]
    value = value.rsplit("@", 1)[-1].split("/", 1)[0].split("?", 1)[0]
    if value.startswith("["):  # [v6]:port: the IP pass handles it
        return []
    value = value.rsplit(":", 1)[0] if value.count(":") == 1 else value
    if not value or value.lower() in _NOT_HOSTS or _looks_like_ip(value):
        return []
    parts = [value]
    short = value.split(".", 1)[0]
    if short != value and short.lower() not in _NOT_HOSTS and len(short) > 1:
        parts.append(short)
    return parts


def _looks_like_ip(value: str) -> bool:
    try:
        ipaddress.ip_address(value)
    except ValueError:
        return False
    return True
