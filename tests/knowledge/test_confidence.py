"""One notation for confidence in every data file of nightowl/knowledge (README.md there)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from nightowl import knowledge
from nightowl.collectors.gpu import sku_profiles
from nightowl.llmperf import floor

DATA = sorted(p for p in knowledge.HERE.iterdir() if p.suffix in (".csv", ".yaml"))
# The old inline notations: "[P]" after a source, "[DS url]" / "[M: detail]" inside one.
INLINE_MARKER = re.compile(r"\[(?:[PSMC]|DS\b[^\]]*|M:[^\]]*)\]")


def confidences(path: Path) -> list[str]:
    if path.suffix == ".csv":
        return [row["confidence"] for row in knowledge.read_csv(path.name) if "confidence" in row]
    found: list[str] = []

    def walk(node: object) -> None:
        if isinstance(node, dict):
            if "confidence" in node:
                found.append(node["confidence"])
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(yaml.safe_load(path.read_text()))
    return found


@pytest.mark.parametrize("path", DATA, ids=lambda p: p.name)
def test_no_data_file_writes_confidence_inline(path: Path) -> None:
    body = "\n".join(line for line in path.read_text().splitlines() if not line.lstrip().startswith("#"))
    assert not INLINE_MARKER.findall(body)


@pytest.mark.parametrize("path", DATA, ids=lambda p: p.name)
def test_every_confidence_is_in_the_one_notation(path: Path) -> None:
    bad = [value for value in confidences(path) if not knowledge.CONFIDENCE.match(str(value))]
    assert not bad


def test_the_files_that_mark_confidence_are_the_known_ones() -> None:
    marked = {path.name for path in DATA if confidences(path)}
    assert {"engine_log.yaml", "sku_profiles.yaml", "metric_aliases.csv", "xid_catalog.csv"} <= marked


def test_readers_show_the_confidence_before_the_source() -> None:
    assert all(re.match(r"\[[PSMC](?:/[PSMC])*\] \S", p.source) for p in sku_profiles.PROFILES)
    assert all(re.match(r"\[[PSMC](?:/[PSMC])*\] \S", row.source) for row in floor.GPU_BANDWIDTH)


@pytest.mark.parametrize("value", ["DS", "p", "P/", "P,S", 1])
def test_a_confidence_outside_the_notation_is_an_error(value: object) -> None:
    with pytest.raises(knowledge.KnowledgeError, match="is not P, S, M or C"):
        knowledge.sourced({"source": "x", "confidence": value}, "t.yaml: rows[0]")


def test_a_required_confidence_that_is_missing_is_an_error() -> None:
    assert knowledge.sourced({"source": "x"}, "t") == "x"
    with pytest.raises(knowledge.KnowledgeError, match="t: confidence None"):
        knowledge.sourced({"source": "x"}, "t", required=True)
