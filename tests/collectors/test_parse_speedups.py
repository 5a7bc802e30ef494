"""The parsing shortcuts of issue 22 change no result: each gives what the code before it gave, on every
fixture the parser reads and on random mixtures. The references are the code as it was (copied here; fabric's
text reader: test_smi_parse_equivalence.reference_fabric_text)."""

from __future__ import annotations

import dataclasses
import random
import re
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nightowl.collectors import base, escapes
from nightowl.collectors.gpu import fabric, nvlink
from nightowl.collectors.gpu.kernel_log import kernel_log, patterns
from nightowl.collectors.gpu.nvidia_smi import nvidia_smi
from tests.collectors.gpu.test_smi_parse_equivalence import reference_fabric_text

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "fixtures"
TEXTS = sorted(p for p in FIXTURES.rglob("*") if p.is_file() and p.suffix in (".out", ".log", ".txt", ".xml"))
SMI = [p for p in TEXTS if p.name.startswith("nvidia-smi") and p.stat().st_size < 2_000_000]
LOGS = [p for p in TEXTS if p.name.startswith("kernel-log") and p.stat().st_size < 2_000_000]
NVLINK = [p for p in TEXTS if p.name.startswith("nvlink")]


def read(path: Path) -> str:
    return path.read_text(errors="replace")


# --- references: the code before the shortcuts (do not edit) -----------------------------------------


def reference_to_jsonable(value: Any) -> Any:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: reference_to_jsonable(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, dict):
        return {str(k): reference_to_jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [reference_to_jsonable(v) for v in value]
    return value


def reference_strip_escapes(text: str) -> str:
    if not isinstance(text, str) or not any(hint in text for hint in escapes._HINTS):
        return text
    return escapes._SEQUENCE.sub("", text).replace("\x1b", "")


# --- to_jsonable -------------------------------------------------------------------------------------


def test_fixtures_are_there() -> None:
    assert len(SMI) > 20 and len(LOGS) > 20 and NVLINK


@pytest.mark.parametrize("path", SMI + LOGS + NVLINK, ids=lambda p: str(p.relative_to(FIXTURES)))
def test_to_jsonable_gives_what_it_gave_on_every_fixture_result(path: Path) -> None:
    parse = {"n": nvidia_smi.parse, "k": kernel_log.parse}.get(path.name[0], nvlink.parse)
    result = parse(read(path))
    assert base.to_jsonable(result) == reference_to_jsonable(result)
    if path in SMI:
        fabric_result = fabric.parse(read(path))
        assert base.to_jsonable(fabric_result) == reference_to_jsonable(fabric_result)


@dataclasses.dataclass
class _Point:
    x: Any
    y: Any = None
    z: dataclasses.InitVar[int] = 0


class _Tuple(tuple):  # noqa: SLOT001 - a tuple subclass, as a NamedTuple is
    pass


class _Dict(dict):  # type: ignore[type-arg]
    pass


_leaves = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False), st.text(max_size=5))
_values = st.recursive(
    _leaves,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.lists(inner, max_size=4).map(tuple),
        st.lists(inner, max_size=3).map(_Tuple),
        st.dictionaries(st.one_of(st.text(max_size=3), st.integers()), inner, max_size=3),
        st.dictionaries(st.text(max_size=3), inner, max_size=3).map(_Dict),
        st.builds(_Point, inner, inner),
        st.just(_Point),  # a dataclass *type* is left as it is
    ),
    max_leaves=20,
)


@settings(max_examples=400, deadline=None)
@given(_values)
def test_to_jsonable_gives_what_it_gave_on_random_values(value: Any) -> None:
    assert base.to_jsonable(value) == reference_to_jsonable(value)


# --- strip_escapes -----------------------------------------------------------------------------------


@pytest.mark.parametrize("path", TEXTS[::3], ids=lambda p: str(p.relative_to(FIXTURES)))
def test_strip_escapes_gives_what_it_gave_on_fixtures(path: Path) -> None:
    text = read(path)
    assert escapes.strip_escapes(text) == reference_strip_escapes(text)


_escape_pieces = st.sampled_from(
    ["#", "#0", "#03", "#033", "#033[0;36m", "^", "^[", "^[[1m", "\x1b", "\x1b[4m", "\x1b]0;t\x07", "x", "\n", "[", "3"]
)


@settings(max_examples=500, deadline=None)
@given(st.lists(_escape_pieces, max_size=40).map("".join), st.integers(min_value=0, max_value=1200))
def test_strip_escapes_gives_what_it_gave_on_random_texts(text: str, hashes: int) -> None:
    for candidate in (text, "#" * hashes + text, "^" * hashes + text + "#" * hashes):
        assert escapes.strip_escapes(candidate) == reference_strip_escapes(candidate)


# --- the AER detail test, the fabric section test ----------------------------------------------------

_AER_LINES = [
    "pcieport 0000:00:01.0: AER: Corrected error received: 0000:01:00.0",
    "nvidia 0000:01:00.0: PCIe Bus Error: severity=Corrected, type=Physical Layer, (Receiver ID)",
    "nvidia 0000:01:00.0:   device [10de:2330] error status/mask=00000001/0000e000",
    "nvidia 0000:01:00.0:    [ 0] RxErr                  (First)",
    "pcieport 0000:00:01.0: AER: device recovery successful",
    "nvidia 0000:01:00.0: AER: can't recover (no error_detected callback)",
    "pcieport 0000:00:01.0: AER-aware driver",
    "nvidia 0000:01:00.0:   TLP Header: 4a000001 0100000f 02000010 00000000",
    "x:\t[7] y",
    "a] b",
]


def test_aer_detail_in_is_the_pattern_on_every_fixture_line() -> None:
    lines = [line for path in LOGS for line in read(path).splitlines()] + _AER_LINES
    assert sum(patterns.aer_detail_in(line) for line in lines) > 5
    for line in lines:
        assert patterns.aer_detail_in(line) == (patterns._AER_DETAIL.search(line) is not None), line
        assert kernel_log.may_continue_report(line) == patterns.aer_detail_in(line)


@pytest.mark.parametrize("seed", range(20))
def test_aer_detail_in_is_the_pattern_on_random_mixtures(seed: int) -> None:
    rng = random.Random(seed)
    words = [w for line in _AER_LINES for w in re.split(r"(\s+|:|\[|\])", line) if w] + ["AER", "] ", "\t"]
    for _ in range(300):
        line = "".join(rng.choice(words) for _ in range(rng.randint(0, 12)))
        assert patterns.aer_detail_in(line) == (patterns._AER_DETAIL.search(line) is not None), line


@pytest.mark.parametrize("path", SMI, ids=lambda p: str(p.relative_to(FIXTURES)))
def test_fabric_reads_every_fixture_as_before(path: Path) -> None:
    text = read(path)
    assert fabric._parse_text(text, []) == reference_fabric_text(text, [])


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(["    ", "\t", "Fabric", "Health", " : ", ":", "State", "Completed", "x", "\n"])))
def test_fabric_reads_random_blocks_as_before(parts: list[str]) -> None:
    text = "GPU 00000000:18:00.0\n" + "".join(parts)
    assert fabric._parse_text(text, []) == reference_fabric_text(text, [])
