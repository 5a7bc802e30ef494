"""The validated-runbook cache (nightowl/library/runbook_cache.py): a hit is the runbook validation gives,
and a cache that is missing, corrupt, foreign, unsafe or unwritable only costs a validation."""

from __future__ import annotations

import atexit
import contextlib
import marshal
import os
import pickle
import shutil
from pathlib import Path
from typing import Any

import pytest

from nightowl import user_cache
from nightowl.engine import expressions, validate
from nightowl.engine.validate import LoadedRunbook, RunbookInvalid
from nightowl.library import runbook_cache, runbooks


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "cache"
    monkeypatch.setenv("NIGHTOWL_CACHE_DIR", str(folder))
    monkeypatch.delenv("NIGHTOWL_CACHE", raising=False)
    return folder


@pytest.fixture
def validations(monkeypatch: pytest.MonkeyPatch) -> list[Path]:
    """Every runbook validated (not taken from the cache) from now on."""
    seen: list[Path] = []
    real = validate.load_runbook

    def counting(path: Path, *args: Any, **kwargs: Any) -> LoadedRunbook:
        seen.append(Path(path))
        return real(path, *args, **kwargs)

    monkeypatch.setattr(validate, "load_runbook", counting)
    return seen


def fresh_load(name_or_path: str) -> LoadedRunbook:
    """runbooks.load as a new process calls it (the in-process memo emptied)."""
    runbooks._LOADED.clear()
    return runbooks.load(name_or_path)


def same(a: LoadedRunbook, b: LoadedRunbook) -> None:
    assert a.runbook == b.runbook
    assert a.path == b.path and a.lines == b.lines and a.collected_before == b.collected_before
    assert a.graph.nodes == b.graph.nodes and a.graph._edges == b.graph._edges


def entries(folder: Path) -> list[Path]:
    return sorted(folder.glob("runbook-*.pickle"))


def copy_runbook(tmp_path: Path, name: str = "node-health") -> Path:
    target = tmp_path / "site" / f"{name}-copy.yaml"
    target.parent.mkdir(exist_ok=True)
    shutil.copyfile(runbooks.builtin_paths()[name], target)
    return target


@pytest.mark.parametrize("name", sorted(runbooks.builtin_paths()))
def test_every_builtin_runbook_from_the_cache_is_the_validated_one(
    name: str, cache: Path, validations: list[Path]
) -> None:
    fresh = fresh_load(name)
    assert validations == [runbooks.builtin_paths()[name]]
    cached = fresh_load(name)
    assert validations == [runbooks.builtin_paths()[name]], "the second load validated again"
    assert cached is not fresh
    same(cached, fresh)


def test_the_cache_folder_is_private_and_the_entry_too(cache: Path) -> None:
    fresh_load("xid")
    assert (cache.stat().st_mode & 0o777) == 0o700
    [entry] = entries(cache)
    assert (entry.stat().st_mode & 0o777) == 0o600


def test_default_folder_is_under_xdg_cache_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("NIGHTOWL_CACHE_DIR", raising=False)
    monkeypatch.delenv("NIGHTOWL_CACHE", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert user_cache.cache_dir() == tmp_path / "xdg" / "nightowl"
    monkeypatch.setenv("XDG_CACHE_HOME", "relative/not/allowed")
    assert user_cache.cache_dir() == Path.home() / ".cache" / "nightowl"


def test_off_writes_nothing_and_validates_every_time(
    cache: Path, monkeypatch: pytest.MonkeyPatch, validations: list[Path]
) -> None:
    monkeypatch.setenv("NIGHTOWL_CACHE", "off")
    fresh_load("xid")
    fresh_load("xid")
    assert len(validations) == 2
    assert not cache.exists()


def test_a_corrupt_entry_is_validated_again_and_replaced(cache: Path, validations: list[Path]) -> None:
    fresh = fresh_load("xid")
    [entry] = entries(cache)
    entry.write_bytes(b"\x80\x05not a pickle at all")
    again = fresh_load("xid")
    assert len(validations) == 2
    same(again, fresh)
    fresh_load("xid")
    assert len(validations) == 2, "the corrupt entry was not replaced by a good one"


def test_an_entry_of_another_format_or_key_is_a_miss(cache: Path, validations: list[Path]) -> None:
    fresh_load("xid")
    [entry] = entries(cache)
    with entry.open("rb") as handle:
        stored = pickle.load(handle)
    entry.write_bytes(pickle.dumps({**stored, "format": runbook_cache.FORMAT + 1}))
    fresh_load("xid")
    assert len(validations) == 2
    entry.write_bytes(pickle.dumps({**stored, "key": "0" * 64}))
    fresh_load("xid")
    assert len(validations) == 3


def test_an_entry_that_is_not_a_loaded_runbook_is_a_miss(cache: Path, validations: list[Path]) -> None:
    fresh_load("xid")
    [entry] = entries(cache)
    with entry.open("rb") as handle:
        stored = pickle.load(handle)
    entry.write_bytes(pickle.dumps({**stored, "loaded": "not a runbook"}))
    assert isinstance(fresh_load("xid"), LoadedRunbook)
    assert len(validations) == 2


def test_a_symlinked_entry_is_not_read(cache: Path, tmp_path: Path, validations: list[Path]) -> None:
    fresh_load("xid")
    [entry] = entries(cache)
    elsewhere = tmp_path / "elsewhere.pickle"
    entry.rename(elsewhere)
    entry.symlink_to(elsewhere)
    fresh_load("xid")
    assert len(validations) == 2


def test_an_entry_in_a_folder_others_may_write_is_not_read(cache: Path, validations: list[Path]) -> None:
    fresh_load("xid")
    os.chmod(cache, 0o777)
    fresh_load("xid")
    assert len(validations) == 2
    os.chmod(cache, 0o700)
    [entry] = entries(cache)
    os.chmod(entry, 0o666)
    fresh_load("xid")
    assert len(validations) == 3


def test_an_unwritable_cache_is_no_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, validations: list[Path]
) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder\n")
    monkeypatch.setenv("NIGHTOWL_CACHE_DIR", str(blocker / "cache"))
    monkeypatch.delenv("NIGHTOWL_CACHE", raising=False)
    assert fresh_load("xid").id == "xid"
    assert fresh_load("xid").id == "xid"
    assert len(validations) == 2


def test_a_changed_runbook_is_validated_again(cache: Path, tmp_path: Path, validations: list[Path]) -> None:
    path = copy_runbook(tmp_path)
    fresh_load(str(path))
    path.write_text(path.read_text().replace("title:", "title: changed", 1))
    loaded = fresh_load(str(path))
    assert len(validations) == 2
    assert loaded.runbook.title.startswith("changed")


def test_a_changed_validator_is_a_miss(cache: Path, monkeypatch: pytest.MonkeyPatch, validations: list[Path]) -> None:
    fresh_load("xid")
    monkeypatch.setattr(runbook_cache, "_CODE_KEY", [b"another validator"])
    fresh_load("xid")
    assert len(validations) == 2


def test_a_malformed_runbook_names_file_and_line_every_time(cache: Path, tmp_path: Path) -> None:
    path = copy_runbook(tmp_path)
    fresh_load(str(path))  # the good version is cached
    text = path.read_text()
    path.write_text(text.replace("nodes:", "nodes:\n  broken: {collect: [nvidia-smi]}", 1))
    for _ in range(2):
        with pytest.raises(RunbookInvalid) as info:
            fresh_load(str(path))
        assert f"{path}:" in str(info.value)
        assert any(issue.line for issue in info.value.issues)
    assert len(entries(cache)) == 1, "an invalid runbook was stored"


def test_an_entry_keeps_the_code_of_what_runs_compiled(cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An entry is stored without code; at exit the code this process compiled for the runbook's expressions
    is added (and only that: not every expression's), and a later load runs from it, compiling nothing."""
    monkeypatch.setattr(runbooks, "_PENDING_CODE", {})
    monkeypatch.setattr(expressions, "_COMPILED_HERE", {})
    monkeypatch.setattr(expressions, "_PRECOMPILED", {})
    expressions._compiled.cache_clear()
    expressions._template.cache_clear()
    loaded = fresh_load("xid")
    [entry] = entries(cache)
    assert pickle.loads(entry.read_bytes())["expressions"] == {}
    conditions, values, templates = runbooks.expression_sources(loaded)
    condition = sorted(conditions)[0]
    with contextlib.suppress(expressions.ExpressionError):  # its facts are missing: compiled all the same
        expressions.evaluate_condition(condition, {})
    runbooks.store_pending_code()
    stored = pickle.loads(entry.read_bytes())
    assert condition in stored["expressions"]
    assert set(stored["expressions"]) <= conditions | values and set(stored["templates"]) <= templates
    assert len(stored["expressions"]) < len(conditions | values), "every expression was compiled"
    assert marshal.loads(stored["expressions"][condition]).co_filename == "<template>"

    expressions._compiled.cache_clear()
    env = expressions.environment()
    compiled: list[Any] = []
    real_compile = env.compile
    monkeypatch.setattr(env, "compile", lambda *args, **kwargs: compiled.append(args) or real_compile(*args, **kwargs))
    fresh_load("xid")
    with contextlib.suppress(expressions.ExpressionError):
        expressions.evaluate_condition(condition, {})
    assert compiled == [], "compiled again, not run from the entry's code"
    before = entry.stat().st_mtime_ns
    runbooks.store_pending_code()
    assert entry.stat().st_mtime_ns == before, "an entry was written with nothing new"
    expressions._compiled.cache_clear()


def test_code_is_not_added_to_a_cache_folder_gone_by_exit(cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(runbooks, "_PENDING_CODE", {})
    monkeypatch.setattr(expressions, "_COMPILED_HERE", {})
    loaded = fresh_load("xid")
    expressions._compiled.cache_clear()
    with contextlib.suppress(expressions.ExpressionError):
        expressions.evaluate_condition(sorted(runbooks.expression_sources(loaded)[0])[0], {})
    expressions._compiled.cache_clear()
    shutil.rmtree(cache)
    runbooks.store_pending_code()
    assert not cache.exists()


def test_a_runbook_loaded_many_times_is_stored_once_at_exit(cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A long-running process loads a runbook per request: one pending store per entry and one exit hook,
    not one of each per load."""
    hooks: list[Any] = []
    monkeypatch.setattr(atexit, "register", hooks.append)
    monkeypatch.setattr(runbooks, "_PENDING_CODE", {})
    for _ in range(5):
        fresh_load("xid")
    assert len(runbooks._PENDING_CODE) == 1
    assert hooks == [runbooks.store_pending_code]
    runbooks.store_pending_code()
    assert runbooks._PENDING_CODE == {}
