"""Memory across runs and boots: the embedded history store (docs/reference.md#history).

Where it is: ``--history PATH``, else ``$NIGHTOWL_HISTORY``, else ``<state dir>/history.sqlite3``
(``off`` for either turns it off). A command that runs runbooks calls :func:`activate` once; from
then on :func:`record_bundle` writes every finished bundle and the ``gpu-history`` collector reads.
Nothing is active for Python callers that did not ask (rehearsals stay hermetic).

A corrupt, locked or unwritable store is a warning and "no history": never a crash, never a lost
bundle (the bundle is written before the store is touched).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from nightowl.history.store import StoreError

OFF = "off"
FILENAME = "history.sqlite3"
_active: list[Path | None] = []  # empty: never activated; [None]: turned off; [path]: in use


def default_path() -> Path | None:
    """$NIGHTOWL_HISTORY (``off``: none), else <state dir>/history.sqlite3."""
    given = os.environ.get("NIGHTOWL_HISTORY")
    if given:
        return None if given == OFF else Path(given).expanduser()
    from nightowl.paths import state_dir

    return state_dir() / FILENAME


def resolve(path: str | Path | None) -> Path | None:
    """The store a ``--history`` value names (None: the default)."""
    if path is None:
        return default_path()
    return None if str(path) == OFF else Path(path).expanduser()


def activate(path: str | Path | None = None) -> Path | None:
    """Runs from now on record into (and read from) this store; returns it (None: history is off)."""
    from nightowl.collectors.gpu import gpu_history

    _active[:] = [resolve(path)]
    gpu_history.STORE_READER[:] = [host_history] if _active[0] is not None else []
    return _active[0]


def deactivate() -> None:
    from nightowl.collectors.gpu import gpu_history

    _active.clear()
    gpu_history.STORE_READER.clear()
    gpu_history.PRIOR_READER.clear()


def active_path() -> Path | None:
    return _active[0] if _active else None


def use_prometheus(url: str | None) -> None:
    """``--history-from URL``: runs also read the node's earlier incidents from Prometheus (None: not)."""
    from nightowl.collectors.gpu import gpu_history
    from nightowl.history import prometheus

    gpu_history.PRIOR_READER[:] = [lambda host, before: prometheus.prior_incidents(url, host, before)] if url else []


def _stderr(message: str) -> None:
    print(f"nightowl: warning: {message}", file=sys.stderr)


def record_bundle(bundle: str | Path | None, path: Path | None = None, warn: Callable[[str], None] = _stderr) -> int:
    """Write a finished bundle's rows into the store; the one call every run path makes.

    Returns the number of new events; any failure is a warning (``warn``) and 0, never an exception.
    Without ``path``, writes only when a command activated the store."""
    store_path = path or active_path()
    if bundle is None or store_path is None:
        return 0
    from nightowl.history import extract, store

    try:
        record = extract.bundle_record(Path(bundle))
    except (OSError, ValueError) as exc:
        warn(f"history: {bundle} is not a readable bundle, not recorded: {exc}")
        return 0
    try:
        return store.write(store_path, record)
    except StoreError as exc:
        warn(f"history store unusable, this run is not recorded (no history): {exc}")
        return 0
    except Exception as exc:  # noqa: BLE001 - history never costs a run its verdict or its bundle
        warn(f"history: recording failed, this run is not recorded: {type(exc).__name__}: {exc}")
        return 0


def host_history(host: str, path: Path | None = None) -> dict[str, Any]:
    """Everything the store holds about one host: ``{events, runs, boots, gpus}`` (raises StoreError)."""
    from nightowl.history import store

    store_path = path or active_path()
    if store_path is None:
        raise StoreError("history is off")
    return {
        "events": store.read(store_path, "SELECT * FROM events WHERE host = ? ORDER BY first_ts", (host,)),
        "runs": store.read(store_path, "SELECT * FROM runs WHERE host = ? ORDER BY started", (host,)),
        "boots": store.read(store_path, "SELECT * FROM boots WHERE host = ?", (host,)),
        "gpus": store.read(store_path, "SELECT DISTINCT pci, uuid, serial FROM gpus WHERE host = ?", (host,)),
    }


__all__ = [
    "StoreError",
    "activate",
    "active_path",
    "deactivate",
    "default_path",
    "host_history",
    "record_bundle",
    "resolve",
    "use_prometheus",
]
