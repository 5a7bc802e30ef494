"""Reading the store for people: a timeline of events and verdicts, and the fleet's repeat offenders."""

from __future__ import annotations

import json
import math
import time
from pathlib import Path
from typing import Any

from nightowl.history import store
from nightowl.history.extract import NETWORK_KINDS


def timeline(
    path: Path, host: str | None = None, gpu: str | None = None, since: float | None = None
) -> list[dict[str, Any]]:
    """Events and verdicts, oldest first: ``{time, ts, host, gpu, uuid, what, code, count, action,
    bundle_id, bundle_sha256}``. ``gpu`` matches the bus id or the UUID; ``since`` is seconds back from now."""
    cutoff = time.time() - since if since is not None else None
    where: list[str] = ["1"]
    args: list[Any] = []
    if host:
        where.append("host = ?")
        args.append(host)
    if gpu:
        from nightowl.collectors.pci import normalize_pci

        gpu = normalize_pci(gpu) or gpu  # 00000000:A1:00.0 and PCI:0000:a1:00 are 0000:a1:00, as the store keeps it
        where.append("(pci = ? OR uuid = ?)")
        args += [gpu, gpu]
    if cutoff is not None:
        where.append("coalesce(last_ts, first_ts) >= ?")
        args.append(cutoff)
    entries = [
        {
            "time": e["first_time"],
            "ts": e["first_ts"],
            "host": e["host"],
            "gpu": e["pci"],
            "uuid": e["uuid"],
            "what": e["kind"],
            "code": e["code"],
            "count": e["count"],
            "last_time": e["last_time"],
            "boot_id": e["boot_id"],
            "action": None,
            "detail": e["text"] if e["kind"] in NETWORK_KINDS else None,
            "bundle_id": e["bundle_id"],
            "bundle_sha256": e["bundle_sha256"],
        }
        for e in store.read(path, f"SELECT * FROM events WHERE {' AND '.join(where)}", args)
    ]
    run_where: list[str] = ["1"]
    run_args: list[Any] = []
    if host:
        run_where.append("host = ?")
        run_args.append(host)
    if cutoff is not None:
        run_where.append("started >= ?")
        run_args.append(cutoff)
    for run in store.read(path, f"SELECT * FROM runs WHERE {' AND '.join(run_where)}", run_args):
        gpus = _gpus(run["gpus"])
        if gpu and gpu not in gpus:
            continue
        entries.append(
            {
                "time": _iso(_number(run["started"])),
                "ts": _number(run["started"]),
                "host": run["host"],
                "gpu": ",".join(gpus) or None,
                "uuid": None,
                "what": "verdict",
                "code": run["verdict_id"],
                "count": None,
                "last_time": None,
                "boot_id": run["boot_id"],
                "action": run["action"],
                "detail": None,
                "bundle_id": run["bundle_id"],
                "bundle_sha256": run["bundle_sha256"],
            }
        )
    for entry in entries:
        entry["ts"] = _number(entry["ts"])
    return sorted(entries, key=lambda e: (e["ts"] is None, e["ts"] or 0, e["what"] == "verdict"))


def top(path: Path, since: float | None = None, limit: int = 20) -> list[dict[str, Any]]:
    """Repeat offenders: per host and GPU (UUID when known), the distinct Xid/SXid incidents, most first."""
    cutoff = time.time() - since if since is not None else -1e18
    return store.read(
        path,
        """SELECT host, pci AS gpu, max(uuid) AS uuid, count(*) AS incidents, sum(count) AS occurrences,
                  group_concat(DISTINCT code) AS codes, count(DISTINCT boot_id) AS boots,
                  min(first_time) AS first_time, max(last_time) AS last_time
           FROM events WHERE kind IN ('xid', 'sxid', 'fallen_off_bus') AND coalesce(last_ts, first_ts, 0) >= ?
           GROUP BY host, coalesce(uuid, pci) ORDER BY incidents DESC, occurrences DESC, host LIMIT ?""",
        (cutoff, limit),
    )


def incidents_per_gpu(path: Path) -> list[dict[str, Any]]:
    """Distinct GPU incidents (Xid, SXid, fallen off the bus) per host, GPU, code and the action of the run that
    first recorded them: the textfile's counter. One event seen by many hourly checks counts once."""
    return store.read(
        path,
        """SELECT e.host AS host, coalesce(e.pci, '') AS gpu, coalesce(e.code, 79) AS code,
                  coalesce(r.action, 'unknown') AS action, count(*) AS incidents
           FROM events e LEFT JOIN runs r ON r.bundle_id = e.bundle_id AND r.host = e.host
           WHERE e.kind IN ('xid', 'sxid', 'fallen_off_bus')
           GROUP BY 1, 2, 3, 4 ORDER BY 1, 2, 3, 4""",
    )


def _gpus(text: Any) -> list[str]:
    """A run's ``gpus`` column: a JSON list of bus ids; anything else a store may hold (a cell written by
    hand, another version) is no GPU, never a failed ``nightowl history`` (issue "trust, round four", 6)."""
    try:
        value = json.loads(text) if isinstance(text, (str, bytes)) else None
    except (ValueError, RecursionError):
        return []
    return [str(g) for g in value if isinstance(g, (str, int))] if isinstance(value, list) else []


def _number(value: Any) -> float | None:
    """A stored time as a number; None for a cell that holds none (or none a clock can show)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return None
    return float(value)


def _iso(ts: float | None) -> str | None:
    if ts is None:
        return None
    try:
        return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(ts))
    except (OverflowError, ValueError, OSError):
        return None
