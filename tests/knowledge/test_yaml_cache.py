"""Shipped YAML data read from the user's cache (knowledge.load_yaml over nightowl/user_cache.py): the same
data as parsing, with types; a corrupt, foreign or shared entry is parsed again; off writes nothing."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from nightowl import knowledge
from tests.knowledge.test_read_yaml_fast import DATA_FILES, typed


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("NIGHTOWL_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("NIGHTOWL_CACHE", raising=False)
    return tmp_path / "cache"


@pytest.fixture
def parses(monkeypatch: pytest.MonkeyPatch) -> list[Path]:
    seen: list[Path] = []
    real = knowledge._parse_yaml

    def counting(file: Path, text: str) -> object:
        seen.append(file)
        return real(file, text)

    monkeypatch.setattr(knowledge, "_parse_yaml", counting)
    return seen


@pytest.mark.parametrize("name", DATA_FILES)
def test_cached_data_is_the_parsed_data(name: str, cache: Path, parses: list[Path]) -> None:
    parsed = knowledge.read_yaml(name)
    cached = knowledge.read_yaml(name)
    assert len(parses) == 1
    assert typed(cached) == typed(parsed)
    [entry] = cache.glob("data-*.marshal")
    assert (entry.stat().st_mode & 0o777) == 0o600 and (cache.stat().st_mode & 0o777) == 0o700


def test_a_corrupt_entry_is_parsed_again(cache: Path, parses: list[Path]) -> None:
    first = knowledge.read_yaml(DATA_FILES[0])
    [entry] = cache.glob("data-*.marshal")
    entry.write_bytes(b"\xff garbage")
    assert typed(knowledge.read_yaml(DATA_FILES[0])) == typed(first)
    assert len(parses) == 2


def test_an_entry_others_may_write_is_not_read(cache: Path, parses: list[Path]) -> None:
    knowledge.read_yaml(DATA_FILES[0])
    [entry] = cache.glob("data-*.marshal")
    os.chmod(entry, 0o646)
    knowledge.read_yaml(DATA_FILES[0])
    assert len(parses) == 2


def test_a_changed_file_is_parsed_again(cache: Path, tmp_path: Path, parses: list[Path]) -> None:
    data = tmp_path / "d.yaml"
    data.write_text("rows: [1, 2]\n")
    assert knowledge.load_yaml(data) == {"rows": [1, 2]}
    data.write_text("rows: [1, 3]\n")
    assert knowledge.load_yaml(data) == {"rows": [1, 3]}
    assert len(parses) == 2


def test_off_writes_nothing(cache: Path, monkeypatch: pytest.MonkeyPatch, parses: list[Path]) -> None:
    monkeypatch.setenv("NIGHTOWL_CACHE", "off")
    knowledge.read_yaml(DATA_FILES[0])
    knowledge.read_yaml(DATA_FILES[0])
    assert len(parses) == 2 and not cache.exists()


def test_a_malformed_file_is_an_error_every_time(cache: Path, tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("rules:\n  - a: 1\n  - b: [2\n  c: 3\n", encoding="utf-8")
    for _ in range(2):
        with pytest.raises(knowledge.KnowledgeError, match="bad.yaml"):
            knowledge.load_yaml(bad)
