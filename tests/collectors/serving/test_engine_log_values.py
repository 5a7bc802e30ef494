"""The values an engine logs at start-up are rows of nightowl/knowledge/engine_log.yaml: one row type,
one reader (``engine_log.values``), for the tables of every era."""

from __future__ import annotations

from pathlib import Path

import pytest

from nightowl.collectors.serving import engine_log
from tests.knowledge.bad_rows import load_error


def test_every_value_table_has_rows_of_the_one_row_type() -> None:
    rows = engine_log.VALUES
    assert {row.table for row in rows} == set(engine_log.VALUE_TABLES)
    assert all(isinstance(row, engine_log.Value) and row.source for row in rows)
    assert all(row.pattern.groups >= 1 for row in rows), "each row reads its value from the first group"


def test_the_last_occurrence_wins_and_numbers_are_numbers() -> None:
    lines = ["# GPU blocks: 100, # CPU blocks: 7", "restart", "# GPU blocks: 2048"]
    assert engine_log.values(lines, "kv_cache") == {"gpu_blocks": 2048, "cpu_blocks": 7}


def test_a_float_row_casts_and_a_text_row_keeps_its_text() -> None:
    assert engine_log.values(["--gpu-memory-utilization 1"], "settings") == {"gpu_memory_utilization": 1.0}
    assert isinstance(engine_log.values(["--gpu-memory-utilization 1"], "settings")["gpu_memory_utilization"], float)
    line = "The following component could not be created: KvCacheManager  "
    assert engine_log.values([line], "startup_limits") == {"component_failed": "KvCacheManager"}


def test_a_row_that_matches_no_number_reads_nothing() -> None:
    assert engine_log.values(["Available KV cache memory: . GiB"], "kv_cache") == {}


def test_tables_read_only_their_own_rows() -> None:
    line = "Using 4096 tokens in paged KV cache"  # a kv_extras wording (TensorRT-LLM)
    assert engine_log.values([line], "kv_extras") == {"tokens": 4096}
    assert engine_log.values([line], "settings") == {}


@pytest.mark.parametrize(
    ("row", "error"),
    [
        ('{table: kv_cash, field: tokens, regex: "(\\\\d+)", source: s}', "'kv_cash' is not one of"),
        ('{table: kv_cache, field: tokens, regex: "(\\\\d+)", cast: int, source: s}', "'int' is not one of"),
        ('{table: kv_cache, regex: "(\\\\d+)", source: s}', "missing 'field'"),
        ('{table: kv_cache, field: tokens, regex: "(\\\\d+"}', "missing 'source'"),
    ],
)
def test_a_bad_value_row_is_an_error_naming_the_row(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, row: str, error: str
) -> None:
    text = f"values:\n- {row}\n"
    assert error in load_error(
        tmp_path, monkeypatch, "engine_log.yaml", text, engine_log.tables.__wrapped__, "values[0]"
    )


def test_engine_signatures_are_rows_of_the_data_file_only() -> None:
    signatures = engine_log.ENGINE_SIGNATURES
    phases = engine_log.ENGINE_PHASES
    assert len(signatures) >= 6 and {engine for engine, _ in signatures} <= set(phases)
    for module in ("engine_log.py", "engine_log_eras.py"):
        code = (Path(engine_log.__file__).parent / module).read_text()
        assert "ENGINE_SIGNATURES: tuple" not in code, module  # no second home in code


def test_a_signature_line_votes_for_its_engine() -> None:
    assert engine_log.parse("INFO  multiproc_executor.py:123] starting\n").engine == "vllm"
    assert engine_log.parse("[TRT-LLM] [I] loading\n").engine == "tensorrt-llm"
