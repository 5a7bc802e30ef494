"""Memory across runs and boots: the embedded history store (docs/reference.md#history).

Where it is: ``--history PATH``, else ``$NIGHTOWL_HISTORY``, else ``<state dir>/history.sqlite3``
(``off`` for either turns it off). A command that runs runbooks chooses its store once (its ``--history``
option, :func:`resolve`; the choice is the command's, kept in its click context, never here) and hands it to
:func:`run_context`, which builds each run's ``RunContext``: the run records its bundle into the context's
store (:func:`record_bundle`) and the ``gpu-history`` collector reads through the readers the context hands
it (:func:`readers`). Nothing is chosen for Python callers that did not ask (rehearsals stay hermetic).

A corrupt, locked or unwritable store is a warning and "no history": never a crash, never a lost
bundle (the bundle is written before the store is touched).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from nightowl.history.store import StoreError

if TYPE_CHECKING:
    from nightowl.engine.context import RunContext

OFF = "off"
FILENAME = "history.sqlite3"


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


def readers(path: Path | None, prometheus_url: str | None = None) -> dict[str, Callable[..., Any]]:
    """What the ``gpu-history`` collector may read, by the names it asks for (collectors/gpu/gpu_history.py):
    the store's rows of a host, and earlier incidents from Prometheus; handed to it through the run's context."""
    from nightowl.collectors.gpu import gpu_history

    found: dict[str, Callable[..., Any]] = {}
    if path is not None:
        found[gpu_history.STORE_READER] = lambda host: host_history(host, path)
    if prometheus_url:
        from nightowl.history import prometheus

        found[gpu_history.PRIOR_READER] = lambda host, before: prometheus.prior_incidents(prometheus_url, host, before)
    return found


def run_context(path: Path | None = None, prometheus_url: str | None = None) -> RunContext:
    """The context a run gets: the store ``path`` (None: no history) and the readers of it, and of the node's
    earlier incidents in Prometheus at ``prometheus_url`` (``--history-from``). The command (or receiver)
    that chose them builds it once and passes it down; with neither, a run records and reads nothing."""
    from nightowl.engine.context import RunContext

    return RunContext(path, readers(path, prometheus_url))


def _stderr(message: str) -> None:
    print(f"nightowl: warning: {message}", file=sys.stderr)


def record_bundle(
    bundle: str | Path | None, path: Path | None = None, warn: Callable[[str], None] = _stderr, parsed: Any = None
) -> int:
    """Write a finished bundle's rows into the store at ``path``; the one call every run path makes.

    Returns the number of new events; any failure is a warning (``warn``) and 0, never an exception.
    ``parsed``: the run's parse results (engine/parse_memo.py), so the rows are of what its verdict saw."""
    if bundle is None or path is None:
        return 0
    from nightowl.history import extract, store

    try:
        record = extract.bundle_record(Path(bundle), parsed=parsed)
    except (OSError, ValueError) as exc:
        warn(f"history: {bundle} is not a readable bundle, not recorded: {exc}")
        return 0
    try:
        return store.write(path, record)
    except StoreError as exc:
        warn(f"history store unusable, this run is not recorded (no history): {exc}")
        return 0
    except Exception as exc:  # noqa: BLE001 - history never costs a run its verdict or its bundle
        warn(f"history: recording failed, this run is not recorded: {type(exc).__name__}: {exc}")
        return 0


# What the gpu-history collector reads of a host's runs (its last verdicts, the mean time between incidents): its
# last five runs, and the count, first and last start of those that needed action; never the runs themselves, as
# many as a sweep every few minutes adds (288 a day a host). Each through an index: the count through the partial
# index ``runs_acted`` (store.py), one index entry a run that needed action and none for the others. Before, every
# run of the host was looked at (2.3 ms with 10,000 runs that needed none) and each that needed action read whole.
_LAST_RUNS = """SELECT * FROM runs WHERE rowid IN (
    SELECT rowid FROM runs WHERE host = ? ORDER BY started DESC, rowid DESC LIMIT 5) ORDER BY started, rowid"""
_INCIDENTS = """SELECT count(*) AS count, min(started) AS first, max(started) AS last FROM runs
    WHERE host = ? AND action != 'none' AND started != 0"""


def host_history(host: str, path: Path | None = None) -> dict[str, Any]:
    """What the store holds about one host that the gpu-history collector reads: ``{events, runs, incidents}``,
    its runs the last five, ``incidents`` the count, first and last start of the runs that needed action
    (``_INCIDENTS``). Not its boots nor its GPUs, which the collector does not read: each read was a query of every
    host every round. Raises StoreError."""
    from nightowl.history import store

    if path is None:
        raise StoreError("history is off")
    (incidents,) = store.read(path, _INCIDENTS, (host,))  # an aggregate: one row, a count of 0 with no run
    return {
        "events": store.read(path, "SELECT * FROM events WHERE host = ? ORDER BY first_ts", (host,)),
        "runs": store.read(path, _LAST_RUNS, (host,)),
        "incidents": incidents,
    }


__all__ = [
    "StoreError",
    "default_path",
    "host_history",
    "readers",
    "record_bundle",
    "resolve",
    "run_context",
]
