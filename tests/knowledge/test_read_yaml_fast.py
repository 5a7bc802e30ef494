"""read_yaml reads with libyaml: the same data as the pure-Python loader on every data file, and a
malformed file's error is the pure-Python loader's, naming file and line."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from nightowl import knowledge

DATA_FILES = sorted(p.name for p in knowledge.HERE.glob("*.yaml"))


def typed(value: Any) -> Any:
    """The value with every scalar's type beside it (1 == 1.0 == True would hide a changed type)."""
    if isinstance(value, dict):
        return {typed(k): typed(v) for k, v in value.items()}
    if isinstance(value, list):
        return [typed(v) for v in value]
    return (type(value).__name__, value)


def test_there_are_data_files() -> None:
    assert len(DATA_FILES) >= 3


@pytest.mark.parametrize("name", DATA_FILES)
def test_fast_read_equals_pure_python_loader(name: str) -> None:
    with knowledge.path(name).open(encoding="utf-8") as handle:
        slow = yaml.load(handle, Loader=yaml.SafeLoader)  # noqa: S506 - the pure-Python safe loader
    assert typed(knowledge.read_yaml(name)) == typed(slow)


def test_malformed_file_error_is_the_pure_python_loaders(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("rules:\n  - a: 1\n  - b: [2\n  c: 3\n", encoding="utf-8")
    with bad.open(encoding="utf-8") as handle, pytest.raises(yaml.YAMLError) as expected:
        yaml.load(handle, Loader=yaml.SafeLoader)  # noqa: S506
    monkeypatch.setattr(knowledge, "HERE", tmp_path)
    with pytest.raises(knowledge.KnowledgeError) as raised:
        knowledge.read_yaml("bad.yaml")
    assert str(raised.value) == f"{bad}: {expected.value}"
    assert "line" in str(raised.value)
