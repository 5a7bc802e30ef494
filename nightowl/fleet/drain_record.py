"""One shared record of the drains nightowl decided, changed only by compare-and-set, beside ``--lock FILE``.

flock(2) on the lock file serialises the checks that share it only where the file system makes the lock
cluster-wide (NFS through its lock manager; Lustre only when mounted ``flock``, not ``localflock``, where
a lock is local to each client and every check would think it holds it alone). The record does not rely
on that: each decision is a new version of one record, ``LOCK.record/NNNNNNNNNN.json``, written to a file
of its own and then hard-linked to the next version's name. link(2) fails with EEXIST when the name is
taken, atomically on local and network file systems (the lockfile idiom of open(2)'s O_EXCL notes for
NFS), so of two checks that read version N, one writes N+1 and the other reads it and decides again.

A version holds ``{version, drains: [{node, what, at}]}``: nightowl's decisions in the window. A decision
counts for the breaker while its node is still drained by nightowl in the scheduler's own state, or while
it is younger than ``IN_FLIGHT_S`` (decided; the drain may not be visible yet). A check that later holds
or undoes its drain leaves its line, counted only until it is that old: a cap it errs on is lower, never
higher. nightowl/fleet/slurm_actions.py and nightowl/fleet/k8s_condition.py call it with ``--lock``.
"""

from __future__ import annotations

import json
import os
import secrets
import socket
import time
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from nightowl.fleet.breaker import PREFIX, NodeState

IN_FLIGHT_S = 60.0
KEEP = 16  # versions kept; older ones are removed by the writer of a new one
TRIES = 50  # decisions retried after losing the compare-and-set, before giving up (an error, logged)
# A version file is nightowl's own few lines; one larger is not a record, and is not read whole.
LIMIT = 1 << 20


class RecordError(OSError):
    """The record cannot be read or written; the action fails (logged) rather than go uncounted."""


@dataclass(frozen=True)
class Record:
    folder: Path
    version: int
    drains: tuple[dict[str, Any], ...]

    def counted(self, drained: set[str], now: float, window_s: float) -> list[str]:
        """Nodes the record counts as nightowl's drains now (see the module docstring); ``drained``: the
        nodes the scheduler shows drained by nightowl."""
        return [
            str(d["node"])
            for d in self.drains
            if now - float(d["at"]) < window_s and (d["node"] in drained or now - float(d["at"]) < IN_FLIGHT_S)
        ]


def mark(lock: Path, states: dict[str, NodeState], node: str, window_s: float, moment: datetime) -> Record:
    """Read the record and count its drains in ``states`` (the scheduler's view, changed in place): a node
    it counts that the scheduler does not show drained yet is marked drained at ``moment`` (the time the
    scheduler's view is in). ``node`` itself is not."""
    record = read(lock)
    drained = {n for n, s in states.items() if s.drained_by_nightowl}
    for other in record.counted(drained, time.time(), window_s):
        if other != node and other in states and not states[other].drained:
            states[other] = NodeState(other, "drained", f"{PREFIX} decided (drain record)", moment)
    return record


def folder_for(lock: Path) -> Path:
    return lock.with_name(lock.name + ".record")


def read(lock: Path) -> Record:
    """The newest version of the record beside ``lock`` (version 0, empty, when there is none)."""
    folder = folder_for(lock)
    try:
        folder.mkdir(mode=0o755, exist_ok=True)
        versions = sorted(int(p.stem) for p in folder.glob("*.json") if p.stem.isdigit())
        if not versions:
            return Record(folder, 0, ())
        path = folder / _name(versions[-1])
        with path.open("rb") as handle:
            data = json.loads(handle.read(LIMIT + 1)[:LIMIT])
        drains = tuple(d for d in data.get("drains") or [] if isinstance(d, dict) and d.get("node") and "at" in d)
        return Record(folder, versions[-1], drains)
    except (OSError, ValueError, AttributeError, TypeError) as exc:
        raise RecordError(f"{folder}: the drain record cannot be read ({exc})") from None


def commit(record: Record, node: str, what: str, window_s: float) -> bool:
    """Write the next version with ``node``'s drain added; False when another check wrote it first."""
    now = time.time()
    drains = [d for d in record.drains if now - float(d["at"]) < window_s] + [{"node": node, "what": what, "at": now}]
    body = json.dumps({"version": record.version + 1, "drains": drains}, sort_keys=True)
    staged = record.folder / f".{socket.gethostname()}.{os.getpid()}.{secrets.token_hex(8)}.tmp"  # never shared
    try:
        staged.write_text(body + "\n", encoding="utf-8")
        try:
            os.link(staged, record.folder / _name(record.version + 1))
        except FileExistsError:
            return False
        finally:
            staged.unlink(missing_ok=True)
    except OSError as exc:
        raise RecordError(f"{record.folder}: the drain record cannot be written ({exc})") from None
    for old in range(max(record.version + 1 - KEEP, 0), 0, -1):
        try:
            (record.folder / _name(old)).unlink()
        except FileNotFoundError:
            break  # removed already, and every one before it
    return True


def _name(version: int) -> str:
    return f"{version:010d}.json"
