"""The one case runner: every recorded case of every registered kind (tests/collectors/cases/<kind>/*.json).

A case is {"input": "<path from the repo root>", "expected": {...}, "facts": {...}}: ``expected`` is a
subset of the parse result (of the facts for the kinds in ``EXPECTED_IN_FACTS``), ``facts`` (or
``expected_facts``) a subset of the collector's facts, both written by reading the sample
(tests/helpers.py:load_cases). Every case also keeps the collector contract: the result names its kind,
its warnings are a list, the facts are strict JSON and hold the contract JSON unchanged (docs/reference.md#kinds).
What one kind alone promises on every case is in ``KIND_CHECKS``; every recorded sample of a family
(``FAMILIES``) has a case of its kind. The kind's own file holds the rest.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest

from nightowl.collectors import MODULES, get_collector
from nightowl.collectors.base import to_jsonable
from nightowl.collectors.gpu import kernel_log
from nightowl.collectors.serving.engine_log import OOM_PHASES, PHASE_ORDER
from nightowl.collectors.serving.metrics import HISTOGRAMS
from tests.helpers import CASES, ROOT, assert_subset, load_cases

# Kinds whose case files state ``expected`` against the facts (contract JSON plus derived keys).
EXPECTED_IN_FACTS = frozenset({"dcgmi-diag", "gpu-topology", "nvlink", "nccl-log", "nccl-ras", "nccl-tests"})
# Contract keys the facts restate in another shape (free-space: derived percentages per filesystem;
# nccl-ras: mismatches with their judgement).
RESHAPED_IN_FACTS: dict[str, frozenset[str]] = {
    "free-space": frozenset({"filesystems"}),
    "nccl-ras": frozenset({"mismatches"}),
}
KINDS = sorted(p.name for p in CASES.iterdir() if p.is_dir())
ALL_CASES = [(kind, name, case) for kind in KINDS for name, case in load_cases(kind)]
KERNEL_EVENT_KEYS = {"kind", "code", "pci", "time", "pid", "process", "text"}


def _engine_log(data: dict[str, Any], facts: dict[str, Any]) -> None:
    assert data["last_phase"] in (*PHASE_ORDER, None)
    # None only for an excerpt without any marker or traceback frame (tests/collectors/serving/test_engine_log_eras.py)
    assert data["oom"] is None or data["oom"]["phase"] in (*OOM_PHASES, None)


def _metrics(data: dict[str, Any], facts: dict[str, Any]) -> None:
    assert set(data["histograms"]) == set(HISTOGRAMS)


def _kernel_log(data: dict[str, Any], facts: dict[str, Any]) -> None:
    for event in data["events"]:
        assert set(event) >= KERNEL_EVENT_KEYS
        assert event["kind"] in kernel_log.EVENT_KINDS
        assert event["count"] >= 1


KIND_CHECKS: dict[str, Callable[[dict[str, Any], dict[str, Any]], None]] = {
    "engine-log": _engine_log,
    "metrics": _metrics,
    "kernel-log": _kernel_log,
}


def test_every_case_folder_is_a_registered_kind_of_json_cases() -> None:
    assert KINDS and set(KINDS) <= set(MODULES)
    for kind in KINDS:
        folder = CASES / kind
        assert [p.name for p in folder.iterdir() if p.suffix != ".json"] == [], kind
        assert load_cases(kind), kind


@dataclass(frozen=True)
class Family:
    """The recorded samples of one output family, which cases of ``kinds`` must read."""

    kinds: tuple[str, ...]
    globs: tuple[str, ...]  # below the repo root
    unless: str = ""  # a sample whose name holds this belongs to another family
    only: bool = False  # the kinds' cases read these samples and no other


KERNEL_LOG_GLOBS = ("dmesg-*", "fallen-off-bus-*", "gsp-*", "xid*-*", "k8s-device-plugin-*", "nvlink-postrx-*")
FAMILIES: dict[str, Family] = {
    "bench-serve": Family(("bench-serve",), ("fixtures/corpus/serving/*bench*",), only=True),
    "dcgmi-diag": Family(("dcgmi-diag",), ("fixtures/corpus/gpu/dcgmi-diag-*",)),
    "engine-log": Family(("engine-log",), ("fixtures/corpus/serving/*.txt",), unless="metrics|bench"),
    "fabric": Family(("ib-ports", "fabric"), ("fixtures/corpus/fabric/*.txt",)),
    "gpu-topology": Family(("gpu-topology",), ("fixtures/corpus/gpu/topo-*",)),
    "kernel-log": Family(("kernel-log",), tuple(f"fixtures/corpus/gpu/{glob}" for glob in KERNEL_LOG_GLOBS)),
    "metrics": Family(("metrics",), ("fixtures/corpus/serving/*metrics*.txt",)),
    "nccl-log": Family(("nccl-log",), ("fixtures/corpus/nccl/*.txt",), unless="nccl-tests_"),
    "nccl-ras": Family(("nccl-ras",), ("fixtures/corpus-extra/nccl-ras/*.txt",), only=True),
    "nccl-tests": Family(("nccl-tests",), ("fixtures/corpus/nccl/nccl-tests_*.txt",)),
    "nvidia-smi": Family(("nvidia-smi",), ("fixtures/corpus/gpu/nvsmi-*",), unless="query-gpu-csv"),
    "nvidia-smi-query": Family(("nvidia-smi-query",), ("fixtures/corpus/gpu/nvsmi-query-gpu-csv-*",)),
    "nvlink": Family(("nvlink",), ("fixtures/corpus/gpu/nvlink-*", "fixtures/corpus/gpu/dcgmi-nvlink-*")),
}


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_every_sample_of_a_family_has_a_case_of_its_kind(family: str) -> None:
    """tests/collectors/test_corpus_coverage.py asks for some case per sample; this asks for the right kind's."""
    spec = FAMILIES[family]
    others = [word for word in spec.unless.split("|") if word]
    samples = {
        path.relative_to(ROOT).as_posix()
        for glob in spec.globs
        for path in ROOT.glob(glob)
        if not any(word in path.name for word in others)
    }
    inputs = {case["input"] for kind in spec.kinds for _, case in load_cases(kind)}
    assert samples, family
    assert sorted(samples - inputs) == []
    if spec.only:
        assert sorted(inputs - samples) == []


IDS = [f"{kind}/{name}" for kind, name, _ in ALL_CASES]


def _parsed(kind: str, case: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """The contract JSON and the facts of a case's input."""
    collector = get_collector(kind)
    result = collector.parse((ROOT / case["input"]).read_text(encoding="utf-8"))
    return to_jsonable(result), collector.facts(result)


@pytest.mark.parametrize(("kind", "name", "case"), ALL_CASES, ids=IDS)
def test_case(kind: str, name: str, case: dict[str, Any]) -> None:
    data, facts = _parsed(kind, case)
    assert_subset(facts if kind in EXPECTED_IN_FACTS else data, case["expected"])
    assert_subset(facts, case.get("facts", {}))
    assert_subset(facts, case.get("expected_facts", {}))


@pytest.mark.parametrize(("kind", "name", "case"), ALL_CASES, ids=IDS)
def test_case_keeps_the_contract(kind: str, name: str, case: dict[str, Any]) -> None:
    data, facts = _parsed(kind, case)
    assert data["kind"] == kind and facts["kind"] == kind
    assert isinstance(data["warnings"], list)
    json.dumps(data, allow_nan=False)  # strict JSON: an "inf" request rate stays text
    json.dumps(facts, allow_nan=False)
    reshaped = RESHAPED_IN_FACTS.get(kind, frozenset())
    assert {key: facts[key] for key in data if key not in reshaped} == {
        key: value for key, value in data.items() if key not in reshaped
    }  # facts = contract JSON + derived keys
    KIND_CHECKS.get(kind, lambda data, facts: None)(data, facts)
