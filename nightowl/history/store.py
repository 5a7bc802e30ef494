"""The history store: one SQLite file (stdlib ``sqlite3``), safe for many writers at once.

WAL lets readers go on while one process writes; ``busy_timeout`` plus ``BEGIN IMMEDIATE`` makes a
second writer (another serve worker, a sweep, a DaemonSet pod) wait its turn instead of failing. Every
event row has a key computed from what the event is (host, kind, code, GPU, first time, text), so the
same lines replayed, a second run in the same boot or a bundle imported twice update one row and never
add a second; the same event read through another clock (``history_rows.same_event``) updates its row
too. Bundles are cited by id and sha256 only: pruning bundles keeps every row, and a bundle id already
recorded with another sha256 is refused (``ConflictingBundle``), never written over.
"""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import threading
import time
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

SCHEMA_VERSION = 4  # 2: events.monotonic; 3: cursors; 4: cursor_texts
BUSY_TIMEOUT_MS = 15_000

# where the last read of a host's source stopped (history/cursors.py): the reader's state and the bundle that
# read them (docs/reference.md#incremental-reads)
CURSORS = """CREATE TABLE IF NOT EXISTS cursors (
    host TEXT NOT NULL,
    kind TEXT NOT NULL,
    state TEXT NOT NULL,
    bundle_id TEXT NOT NULL,
    bundle_sha256 TEXT NOT NULL,
    updated REAL NOT NULL,
    PRIMARY KEY (host, kind)
);
"""

SCHEMA = f"""
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
-- one row per host per bundle: what the run concluded
CREATE TABLE IF NOT EXISTS runs (
    bundle_id TEXT NOT NULL,
    host TEXT NOT NULL,
    bundle_sha256 TEXT,
    runbook TEXT,
    started REAL,
    boot_id TEXT,
    status TEXT,
    verdict_id TEXT,
    severity TEXT,
    action TEXT,
    gpus TEXT,
    recorded REAL NOT NULL,
    PRIMARY KEY (bundle_id, host)
);
CREATE INDEX IF NOT EXISTS runs_host ON runs (host, started);
-- the GPUs runs saw: bus id, and UUID/serial when known, so a GPU moved to another slot is followed; one
-- row per distinct state (identity and ECC/remap counters), so hourly checks of a healthy GPU add none
CREATE TABLE IF NOT EXISTS gpus (
    host TEXT NOT NULL,
    pci TEXT NOT NULL,
    state TEXT NOT NULL,
    uuid TEXT,
    serial TEXT,
    name TEXT,
    counters TEXT,
    first_bundle TEXT,
    last_bundle TEXT,
    first_seen REAL,
    last_seen REAL,
    PRIMARY KEY (host, pci, state)
);
CREATE INDEX IF NOT EXISTS gpus_uuid ON gpus (uuid);
-- one row per distinct kernel event (Xid, SXid, fallen off the bus, PCIe AER, host memory ...)
CREATE TABLE IF NOT EXISTS events (
    key TEXT PRIMARY KEY,
    host TEXT NOT NULL,
    pci TEXT,
    uuid TEXT,
    kind TEXT NOT NULL,
    code INTEGER,
    boot_id TEXT,
    first_time TEXT,
    last_time TEXT,
    first_ts REAL,
    last_ts REAL,
    count INTEGER NOT NULL,
    text TEXT,
    bundle_id TEXT,
    bundle_sha256 TEXT,
    monotonic REAL
);
CREATE INDEX IF NOT EXISTS events_host ON events (host, pci, code);
-- the boots `journalctl --list-boots` showed, per host
CREATE TABLE IF NOT EXISTS boots (
    host TEXT NOT NULL,
    boot_id TEXT NOT NULL,
    first_entry TEXT,
    last_entry TEXT,
    PRIMARY KEY (host, boot_id)
);
{CURSORS}-- the lines later reads of that source need (0.1 to 0.3 MB a host and kind), apart from the position: SQLite
-- reads a row's columns through the pages its long values overflow into, so a read that needs only the
-- position (most steady reads) and a position saved anew each round (the text unchanged) touch none of them
CREATE TABLE IF NOT EXISTS cursor_texts (
    host TEXT NOT NULL,
    kind TEXT NOT NULL,
    carried TEXT NOT NULL,
    PRIMARY KEY (host, kind)
);
"""


class StoreError(Exception):
    """The store cannot be opened, read or written (corrupt, locked, unwritable): callers warn, never fail."""


class ConflictingBundle(ValueError):
    """A bundle id the store already holds with another sha256: a copy edited after the fact, never the
    run it names (issue "trust, round four", item 6)."""


EVENT_COLUMNS = (
    "key", "host", "pci", "uuid", "kind", "code", "boot_id", "first_time", "last_time", "first_ts", "last_ts",
    "count", "text", "bundle_id", "bundle_sha256", "monotonic",
)  # fmt: skip


# The runs that needed action, apart: what each run of a host reads of its past (history.host_history) is these
# and its last five, not every run a sweep every few minutes has added for months. Made by every writer that
# opens the store, not by a new layout: an index changes nothing an earlier release reads or writes (SQLite keeps
# it up to date for any writer), and once made this is a look at the schema, with no lock taken.
# (``action`` in it too: SQLite reads a term the partial index implies from the row, so without it the count went
# to each such run's row.)
RUNS_ACTED_INDEX = "CREATE INDEX IF NOT EXISTS runs_acted ON runs (host, started, action) WHERE action != 'none'"


def connect(path: Path, readonly: bool = False, shared: bool = False) -> sqlite3.Connection:
    """A connection with WAL and a busy timeout; the schema is created when writing. Raises StoreError.
    ``shared``: usable from any thread, one at a time (``read``'s kept read-only connections)."""
    try:
        if readonly:
            if not path.is_file():
                raise StoreError(f"{path}: no history store yet")
            conn = sqlite3.connect(
                f"file:{path}?mode=ro", uri=True, timeout=BUSY_TIMEOUT_MS / 1000, check_same_thread=not shared
            )
        else:
            path.parent.mkdir(parents=True, exist_ok=True)
            conn = sqlite3.connect(str(path), timeout=BUSY_TIMEOUT_MS / 1000, isolation_level=None)
        conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
        if not readonly:
            conn.execute("PRAGMA synchronous = NORMAL")  # WAL: a commit is durable at the next checkpoint
            version = conn.execute("PRAGMA user_version").fetchone()[0]
            if version > SCHEMA_VERSION:  # a later release's layout: never moved back, nor written over
                conn.close()
                raise StoreError(f"{path}: made by a later nightowl (schema {version}, this one's {SCHEMA_VERSION})")
            if version < SCHEMA_VERSION:  # new (or older) store
                conn.execute("PRAGMA journal_mode = WAL")
                conn.executescript(SCHEMA)
                _add_column(conn, "events", "monotonic REAL")  # a version 1 store
                _split_cursor_texts(conn)  # a version 3 store
                conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
                conn.execute("INSERT OR REPLACE INTO meta VALUES ('schema_version', ?)", (str(SCHEMA_VERSION),))
                path.chmod(0o600)
            conn.execute(RUNS_ACTED_INDEX)
        else:
            conn.execute("SELECT count(*) FROM meta").fetchone()  # a file that is not a store fails here
        return conn
    except (sqlite3.Error, OSError) as exc:
        raise StoreError(f"{path}: {exc}") from exc


def _add_column(conn: sqlite3.Connection, table: str, column: str) -> None:
    """``ALTER TABLE ... ADD COLUMN`` unless a writer beside this one added it first."""
    try:
        conn.execute(f"ALTER TABLE {table} ADD COLUMN {column}")
    except sqlite3.OperationalError as exc:
        if "duplicate column" not in str(exc):
            raise


def _split_cursor_texts(conn: sqlite3.Connection) -> None:
    """A version 3 store's ``cursors`` rows hold their carried text: moved into ``cursor_texts``, the positions
    kept (a table rebuilt, which any SQLite can do), unless a writer beside this one moved them first."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        if "carried" in {row[1] for row in conn.execute("PRAGMA table_info(cursors)")}:
            conn.execute("ALTER TABLE cursors RENAME TO cursors_v3")
            conn.execute(CURSORS)
            conn.execute(
                "INSERT INTO cursors SELECT host, kind, state, bundle_id, bundle_sha256, updated FROM cursors_v3"
            )
            conn.execute("INSERT OR REPLACE INTO cursor_texts SELECT host, kind, carried FROM cursors_v3")
            conn.execute("DROP TABLE cursors_v3")
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise


def write(path: Path, record: Mapping[str, Any]) -> int:
    """Write one bundle's rows (``extract.bundle_record``) in one transaction; returns the new event rows."""
    conn = connect(path)
    try:
        return write_on(conn, record)
    except sqlite3.Error as exc:
        raise StoreError(f"{path}: {exc}") from exc
    finally:
        conn.close()


def write_on(conn: sqlite3.Connection, record: Mapping[str, Any]) -> int:
    """``write`` on an open connection (a long-lived writer, the benchmark); raises sqlite3.Error, and
    ConflictingBundle (nothing written) when the bundle id is recorded with another sha256."""
    try:
        conn.execute("BEGIN IMMEDIATE")
        _refuse_other_hash(conn, record)
        added = 0
        now = time.time()
        for run in record["runs"]:
            conn.execute(
                "INSERT OR REPLACE INTO runs VALUES (?,?,?,?,?,?,?,?,?,?,?,?)",
                (
                    record["bundle_id"],
                    run["host"],
                    record["bundle_sha256"],
                    record["runbook"],
                    record["started"],
                    run.get("boot_id"),
                    run.get("status"),
                    run.get("verdict_id"),
                    run.get("severity"),
                    run.get("action"),
                    json.dumps(run.get("gpus") or []),
                    now,
                ),
            )
            for gpu in run.get("gpu_list", []):
                counters = json.dumps(gpu.get("counters") or {}, sort_keys=True)
                state = json.dumps([gpu.get("uuid"), gpu.get("serial"), gpu.get("name"), counters])
                conn.execute(
                    """INSERT INTO gpus VALUES (?,?,?,?,?,?,?,?,?,?,?)
                       ON CONFLICT(host, pci, state) DO UPDATE SET
                         last_bundle = excluded.last_bundle, last_seen = max(last_seen, excluded.last_seen)""",
                    (
                        run["host"],
                        gpu["pci"],
                        hashlib.sha256(state.encode()).hexdigest()[:16],
                        gpu.get("uuid"),
                        gpu.get("serial"),
                        gpu.get("name"),
                        counters,
                        record["bundle_id"],
                        record["bundle_id"],
                        record["started"],
                        record["started"],
                    ),
                )
            for boot in run.get("boots", []):
                conn.execute(
                    "INSERT OR REPLACE INTO boots VALUES (?,?,?,?)",
                    (run["host"], boot["boot_id"], boot.get("first_entry"), boot.get("last_entry")),
                )
            added += _upsert_events(conn, run["host"], run.get("events", []), record)
        conn.execute("COMMIT")
        return added
    except (sqlite3.Error, ConflictingBundle):
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise


def _refuse_other_hash(conn: sqlite3.Connection, record: Mapping[str, Any]) -> None:
    """Inside the write's transaction, so two imports at once cannot both pass it."""
    known = conn.execute(
        "SELECT bundle_sha256 FROM runs WHERE bundle_id = ? AND bundle_sha256 IS NOT ? LIMIT 1",
        (record["bundle_id"], record["bundle_sha256"]),
    ).fetchone()
    if known is not None:
        raise ConflictingBundle(
            f"bundle id {record['bundle_id']} is already recorded with sha256 {known[0]}, "
            f"this copy's is {record['bundle_sha256']}: not written over"
        )


def _same_event_row(conn: sqlite3.Connection, host: str, e: Mapping[str, Any], bundle_id: str) -> dict[str, Any] | None:
    """The stored row another bundle made of this event, read through another clock (another key)."""
    from nightowl.collectors.gpu.history_rows import same_event

    candidates = rows(
        conn,
        """SELECT * FROM events WHERE host = ? AND kind = ? AND code IS ? AND pci IS ? AND text IS ?
           AND bundle_id IS NOT ?""",
        (host, e["kind"], e.get("code"), e.get("pci"), e.get("text"), bundle_id),
    )
    return next((row for row in candidates if same_event(row, e)), None)


def _upsert_events(conn: sqlite3.Connection, host: str, events: Iterable[Mapping[str, Any]], record: Any) -> int:
    """Insert or update each event by its key; returns how many were new.

    Seen again: the larger count and the later last time win, the first bundle that saw it stays cited;
    a boot id learnt later (a previous-boot log) fills a null one. An event another bundle recorded
    through another clock (``same_event``), or a row whose time names its zone where this reading's does
    not (or the other way round), is updated by ``merged``: its times stay on one clock."""
    from nightowl.collectors.gpu.history_rows import merged, zone_known

    added = 0
    for e in events:
        known = next(iter(rows(conn, "SELECT * FROM events WHERE key = ?", (e["key"],))), None)
        if known is None:
            known = _same_event_row(conn, host, e, record["bundle_id"])
            added += known is None
        if known is not None and (
            known["key"] != e["key"] or zone_known(known["first_time"]) != zone_known(e.get("first_time"))
        ):
            row = merged(known, e)
            names = [n for n in EVENT_COLUMNS if n not in ("key", "host") and n in row]
            assignments = ", ".join(f"{n} = ?" for n in names)
            conn.execute(f"UPDATE events SET {assignments} WHERE key = ?", [*(row[n] for n in names), known["key"]])
            continue
        conn.execute(
            f"""INSERT INTO events ({", ".join(EVENT_COLUMNS)}) VALUES ({", ".join("?" * len(EVENT_COLUMNS))})
               ON CONFLICT(key) DO UPDATE SET
                 count = max(count, excluded.count),
                 last_time = CASE WHEN excluded.last_ts > coalesce(last_ts, -1e18) THEN excluded.last_time
                                  ELSE last_time END,
                 last_ts = max(coalesce(last_ts, excluded.last_ts), coalesce(excluded.last_ts, last_ts)),
                 boot_id = coalesce(boot_id, excluded.boot_id),
                 uuid = coalesce(uuid, excluded.uuid),
                 monotonic = coalesce(monotonic, excluded.monotonic)""",
            (
                e["key"],
                host,
                e.get("pci"),
                e.get("uuid"),
                e["kind"],
                e.get("code"),
                e.get("boot_id"),
                e.get("first_time"),
                e.get("last_time"),
                e.get("first_ts"),
                e.get("last_ts"),
                int(e.get("count") or 1),
                e.get("text"),
                record["bundle_id"],
                record["bundle_sha256"],
                e.get("monotonic"),
            ),
        )
    return added


def rows(conn: sqlite3.Connection, sql: str, args: Iterable[Any] = ()) -> list[dict[str, Any]]:
    cursor = conn.execute(sql, tuple(args))
    names = [d[0] for d in cursor.description]
    return [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]


def read(path: Path, sql: str, args: Iterable[Any] = ()) -> list[dict[str, Any]]:
    """Rows of one query on a read-only connection. Raises StoreError (a missing store is one too).

    The connection is one this process keeps for the file (``_Readers``): a sweep reads each host's read
    positions and GPU history, and opening the store for each query was a tenth of a steady round's CPU."""
    conn, identity = _READERS.take(path)
    try:
        found = rows(conn, sql, args)
    except BaseException as exc:
        conn.close()
        if isinstance(exc, sqlite3.Error):
            raise StoreError(f"{path}: {exc}") from exc
        raise
    _READERS.give_back(path, identity, conn)
    return found


class _Readers:
    """Read-only connections kept per store file, taken by one query at a time. Kept only for the same file
    as when opened, in the same process: another file at the path (a new inode), other permissions or a
    forked child opens its own (each query is its own read transaction, so a kept one sees every commit; a
    checkpoint that changes the file's ctime only costs a new connection)."""

    KEPT = 64  # per file: as many as the threads that read at once (a sweep's hosts in flight), within reason

    def __init__(self) -> None:
        self._kept: dict[str, tuple[tuple[int, ...], list[sqlite3.Connection]]] = {}
        self._inherited: list[list[sqlite3.Connection]] = []
        self._lock = threading.Lock()

    def take(self, path: Path) -> tuple[sqlite3.Connection, tuple[int, ...]]:
        try:
            status = os.stat(path)
        except OSError as exc:
            raise StoreError(f"{path}: no history store yet") from exc
        # ctime too: a store deleted and made again may get the freed inode's number back
        identity = (os.getpid(), status.st_dev, status.st_ino, status.st_mode, status.st_ctime_ns)
        with self._lock:
            kept = self._kept.get(str(path))
            if kept is not None and kept[0] == identity and kept[1]:
                return kept[1].pop(), identity
            if kept is not None and kept[0] != identity:
                del self._kept[str(path)]
                if kept[0][0] == identity[0]:
                    for conn in kept[1]:
                        conn.close()
                else:  # a forked child never closes its parent's connections (nor lets them be collected)
                    self._inherited.append(kept[1])
        return connect(path, readonly=True, shared=True), identity

    def give_back(self, path: Path, identity: tuple[int, ...], conn: sqlite3.Connection) -> None:
        with self._lock:
            kept = self._kept.setdefault(str(path), (identity, []))
            if kept[0] == identity and len(kept[1]) < self.KEPT:
                kept[1].append(conn)
                return
        conn.close()


_READERS = _Readers()
