"""Saved read positions in the history store (table ``cursors``; docs/reference.md#incremental-reads).

One row per host and kind: the reader's state (a journal cursor and boot id, or a dmesg stamp, boot id and
hash), the lines later reads still need, and the bundle (id, sha256) whose read they come from. The store is
the sweeping machine's (``--history``, the state dir), so a sweep, ``check`` under a scheduler and ``watch``
each keep their own. A row whose bundle was pruned is dropped (``forget_bundles``): that host's next read is
full, so no carried line ever names a bundle that is gone.
"""

from __future__ import annotations

import contextlib
import json
import os
import sqlite3
import threading
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from nightowl.engine.incremental import CursorBook, SavedCursor
from nightowl.history import store


def load(path: Path, host: str, kind: str) -> SavedCursor | None:
    """The saved position of ``host``'s ``kind``, or None (none yet, or no store). A fresh object each call (a
    reader may change what it is handed); the row itself may come from this process's memo (``_Memo``)."""
    memo = _Memo.of(path)
    row = memo.get(host, kind) if memo is not None else _MISSING
    if row is _MISSING:
        version = memo.version() if memo is not None else None
        try:
            found = store.read(path, "SELECT * FROM cursors WHERE host = ? AND kind = ?", (host, kind))
        except store.StoreError:
            return None
        row = found[0] if found else None
        if memo is not None:
            memo.put(host, kind, row, version)
    if row is None:
        return None
    return SavedCursor(json.loads(row["state"]), row["carried"], row["bundle_id"], row["bundle_sha256"])


_MISSING: Any = object()


class _Memo:
    """The cursor rows this process read or wrote, per store: a repeating sweep reads each host's positions
    every round (a query each, with the carried text: 0.3 to 0.5 ms a read, four a host), and between its rounds
    only its own commits change them. Valid while nobody else wrote the store: SQLite's ``data_version`` on the
    memo's own connection changes with every commit of another connection (another process, a prune), not with
    its own; ``commit`` writes through that connection. A store replaced at the path, or a forked child, gets a
    memo of its own. It holds at most MEMO_CHARS characters of rows (a row's carried text is up to a boot's log);
    past that a row is read with a query, as without it."""

    _all: dict[tuple[int, int, int], _Memo] = {}
    _all_lock = threading.Lock()

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn
        self.lock = threading.Lock()
        self.rows: dict[tuple[str, str], dict[str, Any] | None] = {}
        self.seen = self._data_version()
        self.learned = 0  # rows learned from this process's own commits (``learn``): a read from before is older
        self.chars = 0  # the characters the rows kept hold

    @classmethod
    def of(cls, path: Path) -> _Memo | None:
        """The memo of the store at ``path`` (None: no store there, or it cannot be opened)."""
        try:
            status = path.stat()
        except OSError:
            return None
        key = (os.getpid(), status.st_dev, status.st_ino)
        with cls._all_lock:
            memo = cls._all.get(key)
            if memo is None:
                try:
                    memo = cls(store.connect(path, shared=True))
                except (store.StoreError, sqlite3.Error):
                    return None
                if len(cls._all) >= MEMO_STORES:  # the oldest goes: a process reads one store, tests many
                    oldest = cls._all.pop(next(iter(cls._all)))
                    if oldest.lock.acquire(timeout=1):
                        oldest.conn.close()  # else in use: left to the garbage collector
                        oldest.lock.release()
                cls._all[key] = memo
            return memo

    def _data_version(self) -> int:
        return int(self.conn.execute("PRAGMA data_version").fetchone()[0])

    def version(self) -> tuple[int, int] | None:
        """Where the store stands before a read: (data_version, rows learned so far); None when unknown."""
        with self.lock:
            try:
                return self._data_version(), self.learned
            except sqlite3.Error:
                return None

    def get(self, host: str, kind: str) -> Any:
        """The row (None: none saved), or _MISSING when not known or another connection wrote since."""
        with self.lock:
            try:
                now = self._data_version()
            except sqlite3.Error:
                return _MISSING
            if now != self.seen:
                self.rows.clear()
                self.seen, self.chars = now, 0
            return self.rows.get((host, kind), _MISSING)

    def put(self, host: str, kind: str, row: dict[str, Any] | None, version: tuple[int, int] | None) -> None:
        """Remember ``row``, read when the store stood at ``version`` (``version()``), unless anyone wrote since
        (another connection, or a commit of this process's: the row read may be older than the one it learned)."""
        with self.lock:
            if version is not None and version == (self.seen, self.learned):
                self._keep((host, kind), row)

    def learn(self, written: list[tuple[Any, ...]]) -> None:
        """The rows ``_save`` just committed through this memo's connection (its lock held): (host, kind, state,
        carried, bundle id, sha256), ``carried`` None where the row's text stands."""
        self.learned += 1
        for host, kind, state, carried, bundle_id, sha256 in written:
            known = self.rows.get((host, kind))
            if carried is None and not known:
                self._keep((host, kind), _MISSING)  # the text is the store's: read it next time
                continue
            text = carried if carried is not None else known["carried"]  # type: ignore[index]
            row = {"state": json.dumps(state, sort_keys=True), "carried": text, "bundle_id": bundle_id}
            self._keep((host, kind), {**row, "bundle_sha256": sha256})

    def _keep(self, key: tuple[str, str], row: Any) -> None:
        """``row`` in place of what is kept for ``key`` (_MISSING: nothing), within MEMO_CHARS (its lock held)."""
        self.chars -= _chars(self.rows.pop(key, None))
        if row is not _MISSING and self.chars + _chars(row) <= MEMO_CHARS:
            self.rows[key] = row
            self.chars += _chars(row)


MEMO_STORES = 8  # stores with a memo in one process
MEMO_CHARS = 64 * 1024 * 1024  # rows kept in memory per store (``_Memo``): four a host, 0.1 to 0.2 MB each at real size


def _chars(row: dict[str, Any] | None) -> int:
    return len(row["state"]) + len(row["carried"] or "") if row else 0


def _save(
    conn: sqlite3.Connection,
    host: str,
    kind: str,
    state: dict[str, Any],
    carried: str | None,
    bundle_id: str,
    sha256: str,
) -> None:
    """One position; ``carried`` None: the row's text stands (carried on unchanged), so an hourly sweep of
    quiet logs does not rewrite every host's carried lines (engine/incremental.CursorBook.commit)."""
    if carried is None:
        conn.execute(
            "UPDATE cursors SET state = ?, bundle_id = ?, bundle_sha256 = ?, updated = ? WHERE host = ? AND kind = ?",
            (json.dumps(state, sort_keys=True), bundle_id, sha256, time.time(), host, kind),
        )
        return
    conn.execute(
        "INSERT OR REPLACE INTO cursors VALUES (?, ?, ?, ?, ?, ?, ?)",
        (host, kind, json.dumps(state, sort_keys=True), carried, bundle_id, sha256, time.time()),
    )


FULL_EVERY = 24 * 3600.0  # a cheap-first source's full form is read again after this long (issue 46 item 3)


def book(path: Path | None, full: bool = False, full_every: float | None = FULL_EVERY) -> CursorBook | None:
    """The run's cursor book over the store at ``path`` (None: history off, so every read is full)."""
    if path is None:
        return None
    return CursorBook(lambda host, kind: load(path, host, kind), full=full, origin=path, full_every=full_every)


def commit(cursors: CursorBook | None, bundle: Path | None, path: Path | None, warn: Callable[[str], None]) -> int:
    """Save the run's staged positions once its bundle is written; a store failure is a warning (the next read
    of those hosts is then full)."""
    if cursors is None or bundle is None or path is None or not cursors.staged:
        return 0
    try:
        memo = _Memo.of(path)
        if memo is None:
            conn = store.connect(path)
            try:
                return _commit(conn, cursors, bundle, None)
            finally:
                conn.close()
        with memo.lock:  # its own connection: a commit through it leaves the memo's data_version as it was
            return _commit(memo.conn, cursors, bundle, memo)
    except (store.StoreError, sqlite3.Error, OSError, IndexError) as exc:
        warn(f"history: read positions not saved (the next read is full): {exc}")
        return 0


def _commit(conn: sqlite3.Connection, cursors: CursorBook, bundle: Path, memo: _Memo | None) -> int:
    """One transaction for the whole run's positions; the memo learns the rows once they are committed."""
    written: list[tuple[Any, ...]] = []

    def save(*row: Any) -> None:
        _save(conn, *row)
        written.append(row)

    conn.execute("BEGIN IMMEDIATE")
    try:
        count = cursors.commit(bundle, save)
        conn.execute("COMMIT")
    except BaseException:
        with contextlib.suppress(sqlite3.Error):
            conn.execute("ROLLBACK")
        raise
    if memo is not None:
        memo.learn(written)
    return count


def forget_bundles(path: Path, bundle_ids: Iterable[str]) -> int:
    """Drop the positions whose carried lines came from these bundles (pruned): their hosts read in full next."""
    ids = list(bundle_ids)
    if not ids:
        return 0
    conn = store.connect(path)
    try:
        marks = ",".join("?" * len(ids))
        return int(conn.execute(f"DELETE FROM cursors WHERE bundle_id IN ({marks})", ids).rowcount)
    finally:
        conn.close()
