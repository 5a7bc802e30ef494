"""The rows of a benchmark's result block are data (nightowl/knowledge/bench_serve_rows.csv), read once by
``bench_serve.rows``: a row changed in the file changes what the parser reads."""

from __future__ import annotations

from pathlib import Path

import pytest

from nightowl import knowledge
from nightowl.collectors.serving import bench_serve

BLOCK = """============ Serving Benchmark Result ============
Backend:                                 sglang
Successful requests:                     200
Benchmark duration (s):                  12.5
==================================================
"""


def _rows_from(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, body: str) -> None:
    (tmp_path / bench_serve.ROWS_FILE).write_text("# test rows\nfield,label,value,confidence,source\n" + body)
    monkeypatch.setattr(knowledge, "HERE", tmp_path)
    monkeypatch.setattr(bench_serve, "rows", bench_serve.rows.__wrapped__)  # uncached: the shipped stay cached


def test_the_shipped_rows_read_text_integers_and_numbers() -> None:
    result = bench_serve.facts(bench_serve.parse(BLOCK))
    assert result["backend"] == "sglang" and result["successful_requests"] == 200
    assert isinstance(result["successful_requests"], int) and result["duration_s"] == 12.5
    assert {row.value for row in bench_serve.rows()} == set(bench_serve.VALUE_KINDS)
    assert all(row.source for row in bench_serve.rows())


def test_a_row_changed_in_the_file_changes_what_is_read(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _rows_from(
        tmp_path,
        monkeypatch,
        "backend,Backend,text,P,s\nsuccessful_requests,Successful requests,number,S,s\n"
        "total_input_tokens,Benchmark duration \\(s\\),number,M,s\n",
    )
    result = bench_serve.parse(BLOCK)
    assert result.successful_requests == 200.0 and isinstance(result.successful_requests, float)
    assert result.total_input_tokens == 12.5 and result.duration_s is None
    assert bench_serve.rows()[2].source == "[M] s"


@pytest.mark.parametrize(
    ("body", "error"),
    [
        ("backend,Backend,word,P,s\n", "value 'word' is not one of"),
        ("backend,Back(end,text,P,s\n", "bad regex"),
        ("backend,Backend,text,P,\n", "empty source"),
        ("backend,Backend,text,Q,s\n", "confidence 'Q'"),
        ("backend,Backend,text,,s\n", "confidence ''"),
    ],
)
def test_a_bad_row_is_an_error_naming_the_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, body: str, error: str
) -> None:
    _rows_from(tmp_path, monkeypatch, body)
    with pytest.raises(knowledge.KnowledgeError, match=error) as raised:
        bench_serve.rows()
    assert bench_serve.ROWS_FILE in str(raised.value)
