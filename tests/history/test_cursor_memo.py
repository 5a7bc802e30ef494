"""The cursor rows a process keeps between its reads (nightowl/history/cursors.py ``_Memo``): a repeating sweep
reads each host's positions every round; only what this process committed, or what nobody changed since it read
it, is answered without a query, and a row is never older than the store's."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from nightowl.engine.incremental import CursorBook
from nightowl.history import cursors, store


class Book(CursorBook):
    """A run's staged positions, committed as a run commits them (only what ``commit`` needs of a bundle)."""

    def __init__(self, rows: dict[tuple[str, str], tuple[dict[str, Any], str | None]]) -> None:
        super().__init__(lambda host, kind: None)
        self.rows = rows
        self.staged = {key: {} for key in rows}

    def commit(self, bundle: Path, save: Any) -> int:
        for (host, kind), (state, carried) in self.rows.items():
            save(host, kind, state, carried, bundle.name, "0" * 64)
        return len(self.rows)


@pytest.fixture
def path(tmp_path: Path) -> Path:
    store.connect(tmp_path / "history.db").close()  # the schema
    return tmp_path / "history.db"


@pytest.fixture
def queries(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, str]]:
    """Every cursor row read from the store with a query."""
    asked: list[tuple[str, str]] = []
    read = store.read

    def counted(path: Path, sql: str, args: Any = ()) -> list[dict[str, Any]]:
        asked.append(tuple(args))  # type: ignore[arg-type]
        return read(path, sql, args)

    monkeypatch.setattr(store, "read", counted)
    return asked


def commit(path: Path, bundle: str, rows: dict[tuple[str, str], tuple[dict[str, Any], str | None]]) -> None:
    said: list[str] = []
    assert cursors.commit(Book(rows), Path(bundle), path, said.append) == len(rows), said


def test_what_this_process_committed_is_read_back_without_a_query(path: Path, queries: list) -> None:
    commit(path, "b1", {("gpu-1", "kernel-log"): ({"cursor": "c1"}, "carried one\n")})
    saved = cursors.load(path, "gpu-1", "kernel-log")
    assert saved is not None and (saved.state, saved.carried, saved.bundle_id) == (
        {"cursor": "c1"},
        "carried one\n",
        "b1",
    )
    assert queries == []
    commit(path, "b2", {("gpu-1", "kernel-log"): ({"cursor": "c2"}, None)})  # the carried text stands
    again = cursors.load(path, "gpu-1", "kernel-log")
    assert again is not None and (again.state, again.carried, again.bundle_id) == (
        {"cursor": "c2"},
        "carried one\n",
        "b2",
    )
    assert queries == []
    again.state["cursor"] = "changed by a reader"
    assert cursors.load(path, "gpu-1", "kernel-log").state == {"cursor": "c2"}  # type: ignore[union-attr]


def test_a_row_read_once_is_not_read_again_until_someone_else_writes(path: Path, queries: list) -> None:
    conn = store.connect(path)  # another connection: another process, a prune
    conn.execute("INSERT INTO cursors VALUES ('gpu-2', 'kernel-log', '{\"cursor\": \"x\"}', 'text', 'b0', 'f', 0)")
    assert cursors.load(path, "gpu-2", "kernel-log").state == {"cursor": "x"}  # type: ignore[union-attr]
    assert cursors.load(path, "gpu-2", "kernel-log").state == {"cursor": "x"}  # type: ignore[union-attr]
    assert cursors.load(path, "gpu-2", "nvidia-smi") is None
    assert cursors.load(path, "gpu-2", "nvidia-smi") is None
    assert len(queries) == 2  # once each, a row that is not there too
    conn.execute("UPDATE cursors SET state = '{\"cursor\": \"y\"}' WHERE host = 'gpu-2'")
    assert cursors.load(path, "gpu-2", "kernel-log").state == {"cursor": "y"}  # type: ignore[union-attr]
    assert cursors.forget_bundles(path, ["b0"]) == 1
    assert cursors.load(path, "gpu-2", "kernel-log") is None
    assert len(queries) == 4
    conn.close()


def test_a_row_read_before_this_process_committed_is_not_kept(path: Path) -> None:
    """A read that started before a commit of this process's (another thread's run) may hold the older row: it
    is not kept over the one the commit wrote."""
    commit(path, "b1", {("gpu-3", "kernel-log"): ({"cursor": "old"}, "t")})
    memo = cursors._Memo.of(path)
    assert memo is not None
    before = memo.version()
    old_row = {"state": json.dumps({"cursor": "old"}), "carried": "t", "bundle_id": "b1", "bundle_sha256": "0"}
    commit(path, "b2", {("gpu-3", "kernel-log"): ({"cursor": "new"}, "t")})
    memo.put("gpu-3", "kernel-log", old_row, before)
    assert cursors.load(path, "gpu-3", "kernel-log").state == {"cursor": "new"}  # type: ignore[union-attr]


def test_a_store_replaced_at_the_path_is_read_anew(path: Path, tmp_path: Path) -> None:
    commit(path, "b1", {("gpu-4", "kernel-log"): ({"cursor": "first store"}, "t")})
    assert cursors.load(path, "gpu-4", "kernel-log") is not None
    moved = tmp_path / "old.db"
    path.rename(moved)
    for suffix in ("-wal", "-shm"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)
    store.connect(path).close()  # a new, empty store where the old one was
    assert cursors.load(path, "gpu-4", "kernel-log") is None


def test_a_failed_commit_teaches_the_memo_nothing(path: Path) -> None:
    commit(path, "b1", {("gpu-5", "kernel-log"): ({"cursor": "kept"}, "t")})

    class Failing(Book):
        def commit(self, bundle: Path, save: Any) -> int:
            save("gpu-5", "kernel-log", {"cursor": "never committed"}, "t", bundle.name, "0" * 64)
            raise sqlite3.OperationalError("disk I/O error")

    said: list[str] = []
    assert cursors.commit(Failing({("gpu-5", "kernel-log"): ({}, None)}), Path("b2"), path, said.append) == 0
    assert said and "not saved" in said[0]
    assert cursors.load(path, "gpu-5", "kernel-log").state == {"cursor": "kept"}  # type: ignore[union-attr]


def test_rows_past_the_memos_size_are_read_with_a_query(
    path: Path, queries: list, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A 1,000-host sweep's rows (a boot's log carried in each) are not all held in memory: past MEMO_CHARS a row
    is read from the store each time, as without the memo."""
    monkeypatch.setattr(cursors, "MEMO_CHARS", 1000)
    commit(path, "b1", {("gpu-6", "kernel-log"): ({"n": 1}, "a" * 600), ("gpu-7", "kernel-log"): ({"n": 2}, "b" * 600)})
    assert cursors.load(path, "gpu-6", "kernel-log").carried == "a" * 600  # type: ignore[union-attr]
    assert cursors.load(path, "gpu-7", "kernel-log").carried == "b" * 600  # type: ignore[union-attr]
    assert cursors.load(path, "gpu-7", "kernel-log").carried == "b" * 600  # type: ignore[union-attr]
    assert queries == [("gpu-7", "kernel-log"), ("gpu-7", "kernel-log")]  # the first fits, the second never does
