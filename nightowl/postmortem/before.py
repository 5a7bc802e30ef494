""" "Before this incident": the earlier bundles of the same hosts, cited by id and sha256.

Two sources: the verdict's own evidence (``gpu_history.earlier_bundles``, in the bundle itself, so a
draft rendered anywhere shows it), and the hosts' earlier recorded runs that needed action in the history
store: the run's own (its RunContext's, handed to the draft it renders), else the one a command chose
(nightowl.history). Nothing when neither has any.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from nightowl.postmortem.bundle_reader import Bundle

LIMIT = 10


def before_incident(data: Bundle) -> list[dict[str, Any]]:
    """``{host, bundle_id, bundle_sha256, when, verdict, action, source}``, newest first, this bundle excluded."""
    this = data.manifest.get("run_id") or data.root.name
    found: dict[tuple[str, str], dict[str, Any]] = {}
    hosts = [h for h in data.verdicts.get("hosts") or [] if isinstance(h, dict)]
    for host in hosts:
        for evidence in (host.get("verdict") or {}).get("evidence") or []:
            if evidence.get("fact") != "gpu_history.earlier_bundles":
                continue
            for cited in evidence.get("value") or []:
                if isinstance(cited, dict) and cited.get("bundle_id") and cited["bundle_id"] != this:
                    key = (str(host.get("host")), str(cited["bundle_id"]))
                    found[key] = {
                        "host": key[0],
                        "bundle_id": key[1],
                        "bundle_sha256": cited.get("bundle_sha256"),
                        "when": None,
                        "verdict": None,
                        "action": None,
                        "source": "the verdict evidence",
                    }
    for row in _stored_runs([str(h.get("host")) for h in hosts], data.manifest.get("started"), data.history):
        if row["bundle_id"] == this:
            continue
        key = (row["host"], row["bundle_id"])
        found[key] = {
            **found.get(key, {}),
            "host": row["host"],
            "bundle_id": row["bundle_id"],
            "bundle_sha256": row["bundle_sha256"],
            "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(row["started"])) if row["started"] else None,
            "verdict": row["verdict_id"],
            "action": row["action"],
            "source": found.get(key, {}).get("source") or "the history store",
        }
    return sorted(found.values(), key=lambda r: r["when"] or "", reverse=True)[:LIMIT]


def _stored_runs(hosts: list[str], started: Any, path: Path | None) -> list[dict[str, Any]]:
    from nightowl.history import StoreError, store

    if path is None or not hosts:
        return []
    before = float(started) if isinstance(started, (int, float)) else time.time()
    marks = ",".join("?" * len(hosts))
    try:
        return store.read(
            path,
            f"SELECT * FROM runs WHERE host IN ({marks}) AND started < ? AND action IS NOT NULL AND action != 'none'"
            " ORDER BY started DESC LIMIT ?",
            (*hosts, before, LIMIT),
        )
    except StoreError:
        return []
