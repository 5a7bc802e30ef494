"""The history store's read-only connections are kept between queries (nightowl/history/store.py ``read``):
each query still sees every commit, another file at the path is opened afresh, a store that is gone is an
error, and a forked child (a sweep's worker) opens its own."""

from __future__ import annotations

import os
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


def test_a_store_deleted_and_made_again_is_read_afresh(tmp_path: Path) -> None:
    """The new file may get the freed inode's number back: its connection is still not the old file's."""
    db = tmp_path / "h.sqlite3"
    store.connect(db).close()
    add_meta(db, "only-in-the-old-one")
    old = store.read(db, COUNT)[0]["n"]
    for suffix in ("", "-wal", "-shm"):
        Path(f"{db}{suffix}").unlink(missing_ok=True)
    store.connect(db).close()
    assert store.read(db, COUNT)[0]["n"] == old - 1


def test_a_store_that_is_gone_is_an_error_not_a_kept_answer(tmp_path: Path) -> None:
    db = tmp_path / "h.sqlite3"
    store.connect(db).close()
    store.read(db, COUNT)
    db.unlink()
    with pytest.raises(store.StoreError, match="no history store"):
        store.read(db, COUNT)


def test_a_forked_child_opens_its_own_connection_and_leaves_its_parents_open(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """sqlite's connections must not cross a fork: a process whose pid is not the one that kept them opens its
    own, and never closes (or lets the collector close) the parent's."""
    db = tmp_path / "h.sqlite3"
    store.connect(db).close()
    kept, identity = store._READERS.take(db)
    store._READERS.give_back(db, identity, kept)
    again, _ = store._READERS.take(db)
    assert again is kept  # the same process takes its kept connection again
    store._READERS.give_back(db, identity, again)
    parent = os.getpid()
    monkeypatch.setattr(store.os, "getpid", lambda: parent + 1)  # as a forked child sees itself
    child, _ = store._READERS.take(db)
    assert child is not kept
    assert kept.execute("SELECT 1").fetchone() == (1,)  # the parent's is still open
    child.close()
