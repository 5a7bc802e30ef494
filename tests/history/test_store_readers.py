"""The history store's read-only connections are kept between queries (nightowl/history/store.py ``read``):
each query still sees every commit, another file at the path is opened afresh, a store that is gone is an
error, and a forked child (a sweep's worker) opens its own."""

from __future__ import annotations

import multiprocessing
import shutil
from pathlib import Path

import pytest

from nightowl.history import store

COUNT = "SELECT count(*) AS n FROM meta"


def add_meta(path: Path, key: str) -> None:
    conn = store.connect(path)
    try:
        conn.execute("INSERT INTO meta VALUES (?, ?)", (key, "x"))
    finally:
        conn.close()


def test_a_kept_connection_sees_every_commit_made_after_it_was_kept(tmp_path: Path) -> None:
    db = tmp_path / "h.sqlite3"
    store.connect(db).close()
    before = store.read(db, COUNT)[0]["n"]
    add_meta(db, "one")
    add_meta(db, "two")
    assert store.read(db, COUNT)[0]["n"] == before + 2


def test_another_file_at_the_path_is_read_afresh(tmp_path: Path) -> None:
    db, other = tmp_path / "h.sqlite3", tmp_path / "other.sqlite3"
    store.connect(db).close()
    store.connect(other).close()
    add_meta(other, "only-in-other")
    kept = store.read(db, COUNT)[0]["n"]
    shutil.move(other, db)  # a new inode at the same path (a restored backup)
    assert store.read(db, COUNT)[0]["n"] == kept + 1


def test_a_store_that_is_gone_is_an_error_not_a_kept_answer(tmp_path: Path) -> None:
    db = tmp_path / "h.sqlite3"
    store.connect(db).close()
    store.read(db, COUNT)
    db.unlink()
    with pytest.raises(store.StoreError, match="no history store"):
        store.read(db, COUNT)


def _count_in_child(db: str, answer: multiprocessing.Queue) -> None:
    add_meta(Path(db), "from-the-child")
    answer.put(store.read(Path(db), COUNT)[0]["n"])


def test_a_forked_child_opens_its_own_connection(tmp_path: Path) -> None:
    db = tmp_path / "h.sqlite3"
    store.connect(db).close()
    before = store.read(db, COUNT)[0]["n"]  # kept in this process before the fork
    context = multiprocessing.get_context("fork")
    answer = context.Queue()
    child = context.Process(target=_count_in_child, args=(str(db), answer))
    child.start()
    child.join(30)
    assert child.exitcode == 0 and answer.get(timeout=5) == before + 1
    assert store.read(db, COUNT)[0]["n"] == before + 1
