"""Saved read positions in the history store (table ``cursors``; docs/reference.md#incremental-reads).

One row per host and kind: the reader's state (a journal cursor and boot id, or a dmesg stamp, boot id and
hash) and the bundle (id, sha256) whose read they come from; beside it (table ``cursor_texts``) the lines later
reads still need. The store is the sweeping machine's (``--history``, the state dir), so a sweep, ``check``
under a scheduler and ``watch`` each keep their own. A row whose bundle was pruned is dropped
(``forget_bundles``): that host's next read is full, so no carried line ever names a bundle that is gone.
"""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from nightowl.engine.incremental import CursorBook, SavedCursor
from nightowl.history import store


def load(path: Path, host: str, kind: str, text: bool = True) -> SavedCursor | None:
    """The saved position of ``host``'s ``kind``, or None (none yet, or no store). ``text`` False leaves the
    carried text in the store (SavedCursor.text_left): the position alone is read, none of the text's pages.
    With the text, one query reads both (one snapshot: a writer beside this one cannot come between them)."""
    if text:
        sql = (
            "SELECT state, carried, bundle_id, bundle_sha256 FROM cursors JOIN cursor_texts USING (host, kind) "
            "WHERE host = ? AND kind = ?"
        )
    else:
        sql = "SELECT state, bundle_id, bundle_sha256 FROM cursors WHERE host = ? AND kind = ?"
    try:
        found = store.read(path, sql, (host, kind))
    except store.StoreError as exc:
        if not text or "cursor_texts" not in str(exc):  # no store, a busy or broken one: not asked twice
            return None
        try:  # a version 3 store no writer has opened yet (history/store._split_cursor_texts): its one table
            found = store.read(path, _V3_TEXT, (host, kind))
        except store.StoreError:
            return None
    if not found:
        return None
    row = found[0]
    carried = row["carried"] if text else ""
    return SavedCursor(json.loads(row["state"]), carried, row["bundle_id"], row["bundle_sha256"], not text)


_V3_TEXT = "SELECT state, carried, bundle_id, bundle_sha256 FROM cursors WHERE host = ? AND kind = ?"


def _save(
    conn: sqlite3.Connection,
    host: str,
    kind: str,
    state: dict[str, Any],
    carried: str | None,
    bundle_id: str,
    sha256: str,
    read_from: str | None = None,
) -> None:
    """One position; ``carried`` None: the row's text stands (carried on unchanged), so an hourly sweep of
    quiet logs does not rewrite every host's carried lines (engine/incremental.CursorBook.commit); only while
    the row is still the one this read started from (``read_from``: its bundle): a row another run of the host
    saved meanwhile, with a text of its own, keeps that run's state."""
    if carried is None:
        conn.execute(
            "UPDATE cursors SET state = ?, bundle_id = ?, bundle_sha256 = ?, updated = ? WHERE host = ? AND kind = ?"
            " AND bundle_id = coalesce(?, bundle_id)",
            (json.dumps(state, sort_keys=True), bundle_id, sha256, time.time(), host, kind, read_from),
        )
        return
    conn.execute(
        "INSERT OR REPLACE INTO cursors VALUES (?, ?, ?, ?, ?, ?)",
        (host, kind, json.dumps(state, sort_keys=True), bundle_id, sha256, time.time()),
    )
    conn.execute("INSERT OR REPLACE INTO cursor_texts VALUES (?, ?, ?)", (host, kind, carried))


FULL_EVERY = 24 * 3600.0  # a cheap-first source's full form is read again after this long (issue 46 item 3)


def book(path: Path | None, full: bool = False, full_every: float | None = FULL_EVERY) -> CursorBook | None:
    """The run's cursor book over the store at ``path`` (None: history off, so every read is full)."""
    if path is None:
        return None
    from nightowl import __version__

    return CursorBook(
        lambda host, kind: load(path, host, kind),
        full=full,
        origin=path,
        full_every=full_every,
        load_state=lambda host, kind: load(path, host, kind, text=False),
        release=__version__,  # facts another release's parser gave are never taken (engine/incremental.PARSED_BY)
    )


def commit(cursors: CursorBook | None, bundle: Path | None, path: Path | None, warn: Callable[[str], None]) -> int:
    """Save the run's staged positions once its bundle is written; a store failure is a warning (the next read
    of those hosts is then full)."""
    if cursors is None or bundle is None or path is None or not cursors.staged:
        return 0
    try:
        conn = store.connect(path)
        try:
            conn.execute("BEGIN IMMEDIATE")  # one transaction for the whole sweep's positions
            saved = cursors.commit(bundle, lambda *row: _save(conn, *row))
            conn.execute("COMMIT")
            return saved
        finally:
            conn.close()
    except (store.StoreError, sqlite3.Error, OSError, IndexError) as exc:
        warn(f"history: read positions not saved (the next read is full): {exc}")
        return 0


def forget_bundles(path: Path, bundle_ids: Iterable[str]) -> int:
    """Drop the positions whose carried lines came from these bundles (pruned): their hosts read in full next."""
    ids = list(bundle_ids)
    if not ids:
        return 0
    conn = store.connect(path)
    try:
        marks = ",".join("?" * len(ids))
        conn.execute("BEGIN IMMEDIATE")
        conn.execute(
            "DELETE FROM cursor_texts WHERE (host, kind) IN "
            f"(SELECT host, kind FROM cursors WHERE bundle_id IN ({marks}))",
            ids,
        )
        dropped = int(conn.execute(f"DELETE FROM cursors WHERE bundle_id IN ({marks})", ids).rowcount)
        conn.execute("COMMIT")
        return dropped
    finally:
        conn.close()
