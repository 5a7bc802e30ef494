"""The history store keeps a read position apart from its carried text (table ``cursor_texts``): a read that
needs only the position reads none of the text, and a version 3 store (one table) is moved over, positions kept."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from nightowl.history import cursors, store

V3_CURSORS = """CREATE TABLE cursors (host TEXT NOT NULL, kind TEXT NOT NULL, state TEXT NOT NULL,
carried TEXT NOT NULL, bundle_id TEXT NOT NULL, bundle_sha256 TEXT NOT NULL, updated REAL NOT NULL,
PRIMARY KEY (host, kind))"""


def _v3_store(path: Path) -> None:
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
    conn.execute("INSERT INTO meta VALUES ('schema_version', '3')")
    conn.execute(V3_CURSORS)
    rows = [("gpu-1", "kernel-log", {"cursor": "s=1"}, "NVRM: loaded\n"), ("gpu-2", "nvidia-smi", {"judged": {}}, "x")]
    for host, kind, state, carried in rows:
        values = (host, kind, json.dumps(state), carried, "b1", "s1", 1.0)
        conn.execute("INSERT INTO cursors VALUES (?, ?, ?, ?, ?, ?, ?)", values)
    conn.execute("PRAGMA user_version = 3")
    conn.close()


def test_a_version_3_store_is_read_before_a_writer_moves_it_over(tmp_path: Path) -> None:
    path = tmp_path / "history.db"
    _v3_store(path)  # a sweep reads positions before it writes anything
    saved = cursors.load(path, "gpu-1", "kernel-log")
    assert saved is not None and saved.carried == "NVRM: loaded\n" and not saved.text_left
    alone = cursors.load(path, "gpu-1", "kernel-log", text=False)
    assert alone is not None and alone.state == {"cursor": "s=1"} and alone.text_left


def test_a_version_3_store_keeps_its_positions_and_texts(tmp_path: Path) -> None:
    path = tmp_path / "history.db"
    _v3_store(path)
    store.connect(path).close()  # a writer opens it: moved over
    saved = cursors.load(path, "gpu-1", "kernel-log")
    assert saved is not None and saved.state == {"cursor": "s=1"} and saved.carried == "NVRM: loaded\n"
    assert (saved.bundle_id, saved.bundle_sha256, saved.text_left) == ("b1", "s1", False)
    alone = cursors.load(path, "gpu-2", "nvidia-smi", text=False)
    assert alone is not None and alone.state == {"judged": {}} and alone.carried == "" and alone.text_left
    columns = [row["name"] for row in store.read(path, "PRAGMA table_info(cursors)")]
    assert "carried" not in columns and store.read(path, "PRAGMA user_version")[0]["user_version"] == 4
    store.connect(path).close()  # and opened again: nothing to move, nothing lost
    again = cursors.load(path, "gpu-2", "nvidia-smi")
    assert again is not None and again.carried == "x"


def test_a_position_saved_anew_leaves_its_text_and_a_new_text_replaces_it(tmp_path: Path) -> None:
    path = tmp_path / "history.db"
    conn = store.connect(path)
    cursors._save(conn, "gpu-1", "kernel-log", {"n": 1}, "first\n", "b1", "s1")
    cursors._save(conn, "gpu-1", "kernel-log", {"n": 2}, None, "b2", "s2")  # the text carried on unchanged
    conn.close()
    saved = cursors.load(path, "gpu-1", "kernel-log")
    assert saved is not None and (saved.state, saved.carried, saved.bundle_id) == ({"n": 2}, "first\n", "b2")
    conn = store.connect(path)
    cursors._save(conn, "gpu-1", "kernel-log", {"n": 3}, "second\n", "b3", "s3")
    conn.close()
    saved = cursors.load(path, "gpu-1", "kernel-log")
    assert saved is not None and (saved.state, saved.carried) == ({"n": 3}, "second\n")
    assert store.read(path, "SELECT count(*) AS n FROM cursor_texts")[0]["n"] == 1


def test_a_text_carried_on_is_saved_only_over_the_row_it_was_read_from(tmp_path: Path) -> None:
    """Another run of the host saved its own text and state meanwhile: this run's position, read from the row
    before, does not land beside that text (a quiet read trusts its state without reading the text)."""
    path = tmp_path / "history.db"
    conn = store.connect(path)
    cursors._save(conn, "gpu-1", "kernel-log", {"n": 1}, "first\n", "b1", "s1")
    cursors._save(conn, "gpu-1", "kernel-log", {"n": 9}, "another run's\n", "b9", "s9")  # the other run
    cursors._save(conn, "gpu-1", "kernel-log", {"n": 2}, None, "b2", "s2", "b1")  # this run, read from b1
    conn.close()
    saved = cursors.load(path, "gpu-1", "kernel-log")
    assert saved is not None and (saved.state, saved.carried, saved.bundle_id) == ({"n": 9}, "another run's\n", "b9")


def test_a_moved_store_says_its_version_and_a_later_releases_store_is_left_as_it_is(tmp_path: Path) -> None:
    path = tmp_path / "history.db"
    _v3_store(path)
    store.connect(path).close()
    conn = sqlite3.connect(path)
    said = conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
    assert said == (str(store.SCHEMA_VERSION),)
    conn.execute(f"PRAGMA user_version = {store.SCHEMA_VERSION + 1}")  # a later nightowl's layout
    conn.commit()
    conn.close()
    with pytest.raises(store.StoreError, match="later nightowl"):
        store.connect(path)
    assert sqlite3.connect(path).execute("PRAGMA user_version").fetchone() == (store.SCHEMA_VERSION + 1,)


def test_only_a_version_3_store_is_asked_twice(tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """No store yet (a first run) is one query, not the version 3 query after it."""
    asked: list[str] = []
    real = store.read
    monkeypatch.setattr(store, "read", lambda path, sql, args=(): asked.append(sql) or real(path, sql, args))
    assert cursors.load(tmp_path / "none.db", "gpu-1", "kernel-log") is None and len(asked) == 1
