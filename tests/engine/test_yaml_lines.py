"""load_with_lines: the fast path (built from the parser's events) gives exactly what the node path
gives, data and lines, and leaves every document it cannot build, and every error, to the node path."""

from __future__ import annotations

import math
from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from nightowl.engine import yaml_lines
from nightowl.engine.yaml_lines import YamlError, load_with_lines
from tests.helpers import ROOT


def _same(a: Any, b: Any) -> bool:
    """Equal with the same types and the same key order all the way down (NaN equals NaN)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, float) and math.isnan(a):
        return math.isnan(b)
    if isinstance(a, dict):
        return list(a) == list(b) and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    return bool(a == b)


def _outcome(load: Any, text: str) -> tuple[str, Any, Any]:
    try:
        data, lines = load(text)
    except YamlError as exc:
        return ("error", exc.message, exc.line)
    except ValueError as exc:  # PyYAML's own int constructor on `0b_`, whichever path meets it
        return ("ValueError", str(exc), None)
    return ("ok", data, list(lines.items()))


def _check_identical(text: str) -> None:
    fast, nodes = _outcome(load_with_lines, text), _outcome(yaml_lines._load_nodes, text)
    assert fast[0] == nodes[0] and fast[2] == nodes[2], text
    assert _same(fast[1], nodes[1]), text


# Scalars whose type YAML 1.1 decides from their text, and texts it quotes or refuses.
TRICKY = [
    "yes", "No", "on", "OFF", "~", "null", "", "0x1F", "0o17", "017", "0b101", "0b_", "1_000", "-0", "+12",
    "1:30", "190:20:30", "1.5e3", ".5", "-.inf", ".NaN", "2001-12-14", "2001-12-14t21:59:43.10-05:00",
    "<<", "=", "!", "&", "*", "gpu-01", "10.0.0.1", "ssh://root@gpu-02:2222", "a: b", "#x", "- x", "[x]",
    "{x}", "'q'", '"q"', "x\ny", " lead", "trail ", "caf\u00e9", "\t",
]  # fmt: skip
SCALAR = st.sampled_from(TRICKY) | st.text(max_size=8)
KEY = st.sampled_from(TRICKY) | st.text(max_size=6) | st.integers(-3, 3) | st.booleans() | st.none()
DATA = st.recursive(
    SCALAR | st.integers() | st.floats() | st.booleans() | st.none(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(KEY, inner, max_size=4),
    max_leaves=20,
)


@settings(max_examples=300, deadline=None)
@given(data=DATA, flow=st.sampled_from([None, True, False]), width=st.sampled_from([80, 20]))
def test_dumped_documents_load_identically(data: Any, flow: bool | None, width: int) -> None:
    _check_identical(yaml.safe_dump(data, default_flow_style=flow, width=width, allow_unicode=True))


# Pieces of hand-written YAML, including what the fast path declines (anchors, aliases, merge keys,
# tags, timestamps, several documents) and what no path accepts (bad indentation, tabs, unclosed flows).
FRAGMENTS = [
    "a: 1\n", "a: 2\n", "b:\n", "  - x\n", "  - {name: n, port: 22}\n", "  c: d\n", "  c: [1, 2]\n",
    "- x\n", "- y: z\n", "? k\n: v\n", "base: &b {t: 5}\n", "use: *b\n", "m:\n  <<: *b\n", "<<: {x: 1}\n",
    "=: v\n", "t: 2001-12-14\n", "s: !!str 5\n", "u: !custom x\n", "w: ! 4\n", "---\n", "...\n",
    "# comment\n", "x: 'quoted'\n", 'y: "dq\\n"\n', "z: |\n  block\n  text\n", "bad: [1, 2\n", "\tx: 1\n",
    "  : lone\n", "[1, 2]: seq-key\n", "{a: b}: map-key\n", "n: 0b_\n", "deep: [[[[1]]]]\n", "f: .nan\n",
    ".nan: 1\n", "1: one\n", "true: t\n", "~: null-key\n", "e: \n", "key with space: v\n", "%YAML 1.1\n",
]  # fmt: skip


@settings(max_examples=500, deadline=None)
@given(pieces=st.lists(st.sampled_from(FRAGMENTS), max_size=8))
def test_handwritten_documents_load_identically(pieces: list[str]) -> None:
    _check_identical("".join(pieces))


def test_every_yaml_and_json_file_of_the_project_loads_identically() -> None:
    paths = [p for pattern in ("*.yaml", "*.yml", "*.json") for p in ROOT.glob(f"[!.]*/**/{pattern}")]
    assert len(paths) > 50
    for path in paths:
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            continue
        _check_identical(text)


@pytest.mark.parametrize(
    "text",
    [
        "a: &x 1\nb: *x\n",  # anchor and alias
        "a: !!str 1\n",  # explicit tag
        "m:\n  <<: {x: 1}\n",  # merge key
        "t: 2001-12-14\n",  # timestamp
        "[1]: x\n",  # a sequence as a key
        "a: 1\n---\nb: 2\n",  # two documents
        "x: " + "[" * (yaml_lines.MAX_PLAIN_DEPTH + 2) + "]" * (yaml_lines.MAX_PLAIN_DEPTH + 2),
        "a: [x, {y: [1, 2, 3]}]\nb: [1, 2, 3\n",  # a syntax error after good content
    ],
)
def test_the_fast_path_leaves_what_it_cannot_build_to_the_node_path(text: str) -> None:
    assert yaml_lines._load_plain(text) is None
    _check_identical(text)


def test_a_big_document_written_out_is_read_and_a_small_one_its_aliases_blow_up_is_refused() -> None:
    """10,000 hosts with labels are past MAX_EXPANDED_NODES written out in full: read, by either path."""
    hosts = "".join(
        f"  - {{name: n{i}, address: 10.0.{i // 250}.{i % 250}, labels: {{rack: r{i % 9}}}}}\n" for i in range(10_000)
    )
    big = "hosts:\n" + hosts
    data, lines = load_with_lines(big)
    assert len(data["hosts"]) == 10_000 and lines[("hosts", 9_999, "labels", "rack")] == 10_001
    assert yaml_lines._load_nodes(big)[0] == data
    with_anchor = big.replace("  - {name: n0,", "  - &first {name: n0,", 1)  # the node path, no alias used
    assert load_with_lines(with_anchor)[0] == data
    laughs = "a: &a [x, x, x, x, x, x, x, x, x, x]\n" + "".join(
        f"{chr(98 + i)}: &{chr(98 + i)} [{', '.join(['*' + chr(97 + i)] * 10)}]\n" for i in range(5)
    )
    with pytest.raises(YamlError, match="more than 100000 nodes"):
        load_with_lines(laughs)


def test_a_plain_document_is_built_by_the_fast_path_with_the_lines_of_its_keys() -> None:
    text = "hosts:\n  - {name: a, port: 22}\n  -\n    name: b\n    labels:\n      rack: r1\n"
    data, lines = yaml_lines._load_plain(text) or (None, {})
    assert data == {"hosts": [{"name": "a", "port": 22}, {"name": "b", "labels": {"rack": "r1"}}]}
    assert lines[("hosts",)] == 1 and lines[("hosts", 0)] == 2 and lines[("hosts", 0, "port")] == 2
    assert lines[("hosts", 1)] == 4 and lines[("hosts", 1, "labels", "rack")] == 6
    assert yaml_lines._load_plain("") == (None, {}) and yaml_lines._load_plain("# only\n") == (None, {})
