"""How workers' reports of one start-up value combine is an attribute of its row in
nightowl/knowledge/engine_log.yaml (``across_workers``), read by the one reader ``engine_log.values``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from nightowl import knowledge
from nightowl.collectors.serving import engine_log
from tests.knowledge.bad_rows import load_error

# Two workers of one start (TP1 reports first), then TP1 again: the next start.
ONE_START = [
    "(Worker_TP1 pid=2) INFO [gpu_worker.py:298] Available KV cache memory: -3.86 GiB",
    "(Worker_TP0 pid=1) INFO [gpu_worker.py:298] Available KV cache memory: 9.90 GiB",
]
RESTART = [*ONE_START, "(Worker_TP1 pid=7) INFO [gpu_worker.py:298] Available KV cache memory: 5.00 GiB"]
BLOCKS = ["(Worker_TP0 pid=1) num_gpu_blocks is: 900", "(Worker_TP1 pid=2) num_gpu_blocks is: 400"]


def _shipped() -> dict[str, Any]:
    return yaml.safe_load((Path(knowledge.HERE) / "engine_log.yaml").read_text(encoding="utf-8"))


def _tables_from(document: dict[str, Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """engine_log.values reads ``document`` instead of the shipped file (for this test only)."""
    (tmp_path / "engine_log.yaml").write_text(yaml.safe_dump(document), encoding="utf-8")
    monkeypatch.setattr(knowledge, "HERE", tmp_path)
    monkeypatch.setattr(engine_log, "tables", engine_log.tables.__wrapped__)  # uncached: the shipped stay cached


def test_the_shipped_kv_budget_rows_take_the_smallest_worker() -> None:
    rows = [row for row in engine_log.VALUES if row.field == "kv_cache_gib"]
    assert rows and all(row.across_workers == "min" for row in rows)
    assert engine_log.values(ONE_START, "kv_cache")["kv_cache_gib"] == -3.86
    assert engine_log.values(RESTART, "kv_cache")["kv_cache_gib"] == 5.0
    assert engine_log.values(BLOCKS, "kv_cache")["gpu_blocks"] == 400  # not marked: the last occurrence wins


def test_dropping_the_attribute_from_the_row_makes_the_last_report_win(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    document = _shipped()
    for row in document["values"]:
        row.pop("across_workers", None)
    _tables_from(document, tmp_path, monkeypatch)
    assert engine_log.values(ONE_START, "kv_cache")["kv_cache_gib"] == 9.90


def test_marking_another_row_makes_it_the_per_worker_minimum(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    document = _shipped()
    for row in document["values"]:
        if row["field"] == "gpu_blocks":
            row["across_workers"] = "min"
    _tables_from(document, tmp_path, monkeypatch)
    assert engine_log.values([*BLOCKS, "(Worker_TP0 pid=1) num_gpu_blocks is: 950"], "kv_cache")["gpu_blocks"] == 950
    assert engine_log.values(BLOCKS, "kv_cache")["gpu_blocks"] == 400
    blocks_reversed = list(reversed(BLOCKS))
    assert engine_log.values(blocks_reversed, "kv_cache")["gpu_blocks"] == 400  # the last line says 900


def test_an_unknown_way_of_combining_is_an_error_naming_the_row(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    text = 'values:\n- {table: kv_cache, field: tokens, regex: "(\\\\d+)", source: s, across_workers: max}\n'
    error = load_error(tmp_path, monkeypatch, "engine_log.yaml", text, engine_log.tables.__wrapped__, "values[0]")
    assert "'max' is not one of" in error
