"""The lines of the ncclras report are data (nightowl/knowledge/nccl_ras_lines.yaml), read once by
``nccl_ras.line_patterns``: every line the reader asks for is in the file and every line in the file is
asked for; a line changed in the file changes what the parser reads."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from nightowl import knowledge
from nightowl.collectors.nccl import nccl_ras

DEAD_BLOCK = """DEAD
  2 job processes are considered dead (unreachable via the RAS network)
  Process 5150 on node 10.0.0.4 managing GPUs 2,3 (NVML 6,7)
"""


def _shipped() -> dict:
    return yaml.safe_load((Path(knowledge.HERE) / nccl_ras.LINES_FILE).read_text(encoding="utf-8"))


def _lines_from(document: dict, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / nccl_ras.LINES_FILE).write_text(yaml.safe_dump(document), encoding="utf-8")
    monkeypatch.setattr(knowledge, "HERE", tmp_path)
    monkeypatch.setattr(nccl_ras, "line_patterns", nccl_ras.line_patterns.__wrapped__)  # uncached


def test_the_file_holds_exactly_the_lines_the_reader_asks_for() -> None:
    asked = set(re.findall(r'_match\("([a-z_]+)"', Path(nccl_ras.__file__).read_text(encoding="utf-8")))
    assert asked and asked == set(nccl_ras.line_patterns())
    assert nccl_ras.facts(nccl_ras.parse(DEAD_BLOCK))["dead_process_count"] == 2


def test_a_line_changed_in_the_file_changes_what_is_read(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    document = _shipped()
    document["lines"]["dead_count"] = r"^(?P<count>\d+) job process(?:es)? (?:is|are) gone\b"
    _lines_from(document, tmp_path, monkeypatch)
    result = nccl_ras.facts(nccl_ras.parse(DEAD_BLOCK))
    assert result["dead_process_count"] != 2
    assert any("considered dead" in w for w in result["warnings"])  # no longer a known line: said, not dropped


def test_a_line_the_reader_needs_missing_from_the_file_is_an_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    document = _shipped()
    del document["lines"]["noise"]
    _lines_from(document, tmp_path, monkeypatch)
    with pytest.raises(knowledge.KnowledgeError, match="nccl_ras_lines.yaml: no line named 'noise'"):
        nccl_ras.parse("some line nobody knows\n")


def test_the_file_needs_a_source_and_a_confidence(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    document = _shipped()
    del document["confidence"]
    _lines_from(document, tmp_path, monkeypatch)
    with pytest.raises(knowledge.KnowledgeError, match="confidence None"):
        nccl_ras.line_patterns()
