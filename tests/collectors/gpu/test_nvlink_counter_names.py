"""NVLink error counter names are data (nightowl/knowledge/nvlink_counter_names.csv), read once by
``nvlink.counter_names``: a name changed in the file changes the counter a line fills."""

from __future__ import annotations

from pathlib import Path

import pytest

from nightowl import knowledge
from nightowl.collectors.gpu import nvlink

SAMPLE = """GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-aaaa)
\t Link 0: Replay Errors: 3
\t Link 0: Recovery Errors: 0
\t Link 0: CRC Errors: 1
"""


def _counters(text: str) -> dict[str, object]:
    return dict(nvlink.facts(nvlink.parse_errors(text))["gpus"][0]["links"][0]["errors"])


def test_the_shipped_names_fill_the_result_counters() -> None:
    counters = _counters(SAMPLE)
    assert counters["replay"] == 3 and counters["recovery"] == 0 and counters["crc"] == 1
    assert set(nvlink.counter_names().values()) <= nvlink.ERROR_COUNTERS


def test_a_name_changed_in_the_file_changes_the_counter(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / nvlink.COUNTER_NAMES_FILE).write_text(
        "name,counter,confidence,source\nReplay Errors,recovery,M,test\n", encoding="utf-8"
    )
    monkeypatch.setattr(knowledge, "HERE", tmp_path)
    monkeypatch.setattr(nvlink, "counter_names", nvlink.counter_names.__wrapped__)  # uncached
    counters = _counters(SAMPLE)
    assert counters["recovery"] == 3  # the replay line now fills `recovery`
    assert counters.get("crc_errors") == 1  # an unlisted name keeps its own words


def test_a_row_without_a_source_is_an_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / nvlink.COUNTER_NAMES_FILE).write_text("name,counter,confidence,source\na,b,M,\n", encoding="utf-8")
    monkeypatch.setattr(knowledge, "HERE", tmp_path)
    with pytest.raises(knowledge.KnowledgeError, match="empty source"):
        nvlink.counter_names.__wrapped__()
