"""The one never-raise contract suite: every registered kind's parser on arbitrary input.

The collector contract (nightowl/collectors/base.py, docs/reference.md#kinds): ``parse`` never raises;
odd output becomes a warning. On random text, random bytes, cut samples and samples with junk inserted,
every kind's result names its kind, its warnings are a list and say nothing of a "parser error", and its
facts name the kind and are JSON. Budgets per kind are the ones its own suite had (``FUZZ``); a kind no
suite fuzzed before gets ``Fuzz()``. What one kind alone promises on any input is in ``KIND_CHECKS``.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from nightowl.collectors import MODULES, get_collector
from nightowl.collectors.base import DerivedCollector, to_jsonable
from nightowl.collectors.gpu import kernel_log
from tests.collectors.gpu.test_dcgmi_diag import DCGM3_JSON, DCGM4_JSON, FULL_3X, HEALTH_JSON, HEALTH_TREE
from tests.collectors.gpu.test_gpu_topology import TABBED
from tests.collectors.gpu.test_nvidia_smi import TEXT_ACTIVE_SLOWDOWN, VOLTA_XML, XML_V12
from tests.collectors.gpu.test_nvidia_smi_query import NOHEADER
from tests.collectors.gpu.test_nvlink import DCGMI_ERRORS, DCGMI_STATUS_SWITCH, MIXED
from tests.helpers import CASES, ROOT, load_cases


@dataclass(frozen=True)
class Fuzz:
    """How hard one kind is fuzzed (examples per property; None: that property is not run)."""

    text: int = 100
    text_size: int | None = None
    binary: int | None = 100
    binary_size: int = 2000
    cut: int = 100
    prefixes: tuple[str, ...] = ()  # a header the parser keys on, put before the random text
    extra: tuple[str, ...] = ()  # layouts with no recorded case, cut like the recorded samples
    junk: str = ""  # alphabet of the junk inserted into samples ("" : not run)
    junk_examples: int = 60


FUZZ: dict[str, Fuzz] = {
    "bench-serve": Fuzz(text=200, binary=None, prefixes=("============ Serving Benchmark Result ============\n",)),
    "dcgmi-diag": Fuzz(
        text=150, cut=150, extra=(FULL_3X, DCGM4_JSON, DCGM3_JSON, HEALTH_TREE, HEALTH_JSON), junk='|+-: \n{}[]"'
    ),
    "dev-shm": Fuzz(text=200, prefixes=("  1B-blocks       Avail\n", "Filesystem Size Used Avail Use% Mounted on\n")),
    "engine-log": Fuzz(text=50, text_size=400, binary=50, binary_size=400, cut=50),
    "gpu-topology": Fuzz(text=150, cut=150, extra=(TABBED,)),
    "kernel-log": Fuzz(text=150, binary=150, cut=150),
    "nccl-log": Fuzz(text=60, binary=60, cut=60),
    "nccl-tests": Fuzz(text=60, binary=60, cut=60),
    "metrics": Fuzz(text=60, text_size=400, binary=60, binary_size=400, cut=60),
    "nccl-ras": Fuzz(text=200, prefixes=("#0-0 (ab) MISMATCH\n", "Errors\n======\nINCOMPLETE\n")),
    "nvidia-smi": Fuzz(
        text=150, binary=150, cut=150, extra=(XML_V12, VOLTA_XML, TEXT_ACTIVE_SLOWDOWN), junk="<>:|/ \t\n[]!&x0"
    ),
    "nvidia-smi-query": Fuzz(text=150, binary=150, binary_size=1000, cut=100, extra=(NOHEADER,)),
    "replica-metrics": Fuzz(text=80, text_size=400),
    "nvlink": Fuzz(text=150, cut=150, extra=(MIXED, DCGMI_ERRORS, DCGMI_STATUS_SWITCH)),
}
# Kinds computed from other kinds' facts parse no output (DerivedCollector.parse raises by design).
KINDS = sorted(kind for kind in MODULES if not isinstance(get_collector(kind), DerivedCollector))
# Collectors that run another command of a kind and parse it with that kind's parser.
PARSES_AS = {"dcgmi-diag-drained": "dcgmi-diag", "nccl-tests-run": "nccl-tests"}
RESULT_WITHOUT_KIND = frozenset({"replica-metrics"})  # a metrics scrape; its facts name the kind
OTHER_KINDS_EXAMPLES = 50  # a new property (issue 21): no earlier suite had a budget for it
DCGMI_OVERALL = {"pass", "fail", "warn", "incomplete", "not_run"}


def _samples(kind: str) -> list[str]:
    """The recorded inputs of the kind's cases (none for a kind without a case folder) and its extra layouts."""
    recorded = [(ROOT / case["input"]).read_text(encoding="utf-8") for _, case in load_cases(kind)]
    return recorded + list(FUZZ.get(kind, Fuzz()).extra)


# Every recorded sample of every kind: what a parser meets when a runbook points it at the wrong output.
ALL_SAMPLES = [
    (ROOT / case["input"]).read_text(encoding="utf-8")
    for p in sorted(CASES.iterdir())
    for _, case in load_cases(p.name)
]


def _kernel_log(result: Any, facts: dict[str, Any]) -> None:
    for event in to_jsonable(result)["events"]:
        assert event["kind"] in kernel_log.EVENT_KINDS


KIND_CHECKS: dict[str, Callable[[Any, dict[str, Any]], None]] = {
    "dcgmi-diag": lambda result, facts: _assert(result.overall in DCGMI_OVERALL, result.overall),
    "kernel-log": _kernel_log,
}


def _assert(condition: bool, what: object) -> None:
    assert condition, what


def _check(kind: str, text: str) -> None:
    collector = get_collector(kind)
    result = collector.parse(text)
    named = PARSES_AS.get(kind, kind)
    facts = collector.facts(result)
    assert facts["kind"] == named and isinstance(facts["warnings"], list)
    assert not any("parser error" in str(w) for w in facts["warnings"]), facts["warnings"]
    json.dumps(facts)
    if kind not in RESULT_WITHOUT_KIND:
        data = to_jsonable(result)
        assert data["kind"] == named and isinstance(data["warnings"], list)
    KIND_CHECKS.get(kind, lambda result, facts: None)(result, facts)


def _fuzz(examples: int, *strategies: st.SearchStrategy[Any]) -> Callable[[Callable[..., None]], None]:
    """Runs ``check`` on ``examples`` draws of ``strategies`` (the kind's own hypothesis budget)."""

    def run(check: Callable[..., None]) -> None:
        settings(max_examples=examples, deadline=None, suppress_health_check=[HealthCheck.too_slow])(
            given(*strategies)(check)
        )()

    return run


@pytest.mark.parametrize("kind", KINDS)
def test_random_text(kind: str) -> None:
    fuzz = FUZZ.get(kind, Fuzz())

    def check(text: str) -> None:
        for prefix in ("", *fuzz.prefixes):
            _check(kind, prefix + text)

    _fuzz(fuzz.text, st.text(max_size=fuzz.text_size))(check)


@pytest.mark.parametrize("kind", [kind for kind in KINDS if FUZZ.get(kind, Fuzz()).binary])
def test_random_bytes(kind: str) -> None:
    fuzz = FUZZ.get(kind, Fuzz())

    def check(data: bytes) -> None:
        _check(kind, data.decode("utf-8", errors="replace"))
        _check(kind, data.decode("latin-1"))

    _fuzz(fuzz.binary or 0, st.binary(max_size=fuzz.binary_size))(check)


@pytest.mark.parametrize("kind", [kind for kind in KINDS if _samples(kind)])
def test_cut_samples(kind: str) -> None:
    """Any slice of a recorded sample: a prefix (output cut short), a tail (log rotated), a middle."""

    def check(sample: str, start: float, length: float) -> None:
        begin = int(len(sample) * start)
        _check(kind, sample[begin : begin + int(len(sample) * length)])

    _fuzz(FUZZ.get(kind, Fuzz()).cut, st.sampled_from(_samples(kind)), st.floats(0, 1), st.floats(0, 1))(check)


@pytest.mark.parametrize("kind", [kind for kind in KINDS if FUZZ.get(kind, Fuzz()).junk])
def test_samples_with_junk_inserted(kind: str) -> None:
    fuzz = FUZZ[kind]

    def check(sample: str, junk: str, at: int) -> None:
        position = at % (len(sample) + 1)
        _check(kind, sample[:position] + junk + sample[position:])

    junk = st.text(alphabet=fuzz.junk, max_size=40)
    _fuzz(fuzz.junk_examples, st.sampled_from(_samples(kind)), junk, st.integers(0, 10_000))(check)


@pytest.mark.parametrize("kind", KINDS)
def test_other_kinds_samples(kind: str) -> None:
    """Another kind's recorded output, whole or cut (a wrong path or command in a runbook)."""

    def check(sample: str, length: float) -> None:
        _check(kind, sample[: int(len(sample) * length)])

    _fuzz(OTHER_KINDS_EXAMPLES, st.sampled_from(ALL_SAMPLES), st.floats(0, 1))(check)
