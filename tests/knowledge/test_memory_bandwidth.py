"""Memory bandwidth per GPU has one home: ``memory_bandwidth`` of nightowl/knowledge/sku_profiles.yaml."""

from __future__ import annotations

from pathlib import Path

import pytest

from nightowl import knowledge
from nightowl.llmperf import floor
from tests.knowledge.bad_rows import load_error


def rows() -> list[dict[str, object]]:
    return list(knowledge.read_yaml("sku_profiles.yaml")["memory_bandwidth"])


def test_every_row_is_read_with_its_figure_basis_and_source() -> None:
    table = floor.GPU_BANDWIDTH
    assert [r.gpu for r in table] == [row["gpu"] for row in rows()]
    for row, entry in zip(table, rows(), strict=True):
        assert row.bytes_per_second == float(entry["gb_per_s"]) * 1e9  # type: ignore[arg-type]
        assert row.basis == entry["basis"]
        assert row.source == f"[{entry['confidence']}] {entry['source']}"


def test_every_row_not_read_from_the_vendor_says_why() -> None:
    for entry in rows():
        assert entry["confidence"] == "P" or entry.get("unverified"), entry["gpu"]
        assert entry["basis"] == "datasheet" or entry["confidence"] != "P", entry["gpu"]


def test_the_floor_code_holds_no_figure_of_its_own() -> None:
    code = Path(floor.__file__).read_text()
    assert "TB/s" not in code.split('"""', 2)[2]  # past the module docstring
    assert "3.35" not in code


@pytest.mark.parametrize(
    ("entry", "error"),
    [
        ("{gpu: X, gb_per_s: 0, basis: datasheet, confidence: P, source: s}", "gb_per_s must be a positive number"),
        ("{gpu: X, gb_per_s: fast, basis: datasheet, confidence: P, source: s}", "gb_per_s must be a positive number"),
        ("{gpu: X, gb_per_s: 10, basis: guessed, confidence: P, source: s}", "basis 'guessed'"),
        ("{gpu: X, gb_per_s: 10, basis: datasheet, source: s}", "confidence None"),
        ("{gpu: X, basis: datasheet, confidence: P, source: s}", "missing 'gb_per_s'"),
    ],
)
def test_a_bad_row_is_an_error_naming_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, entry: str, error: str
) -> None:
    text = f"memory_bandwidth:\n- {entry}\n"
    loader = floor.gpu_bandwidth.__wrapped__
    assert error in load_error(tmp_path, monkeypatch, "sku_profiles.yaml", text, loader, "memory_bandwidth[0]")
