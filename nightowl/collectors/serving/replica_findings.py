"""What a first look found, finding by finding, and what a verdict about one finding says of the others.

A first look can find several things at once: r2 fails /health while r4 (healthy) restarted 90 s earlier
and r3's TTFT is up. The runbook's decide order picks the one the verdict is about; every other finding is
an "also seen" line, and none of them dates the incident. The onset ("Since") of a verdict comes from the
replicas it implicates only, by precedence (README.md, "First look"):

1. a timestamped fault line (first-look reads none: its evidence is HTTP answers and scrapes);
2. the alert's ``startsAt`` (the status update and the postmortem read it from the bundle's alert);
3. the implicated replica's restart (its ``process_start_time_seconds``: a start just before the look, or a
   new start between two scrapes), else its first failing answer (the replica's own ``Date`` header: "at or
   before", the trouble may be older). A replica that refused the connection gave no Date: no onset.

Follow-ups: a runbook that reads the node (xid, engine-start, oom) runs only on implicated replicas that have
a node (``node_next``); p99-regression reads /metrics only, so for a replica reached by URL only it runs from
where the look ran (``--host local`` with that replica's ``metrics_url``: ``metrics_next``).
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

# finding -> (the compare fact listing its replicas); "traffic" is the whole service's
FINDINGS = ("down", "oom", "drifted", "broken_stream", "kv_full", "latency_up", "slow", "restarted")
# onset key (what a verdict is about) -> the finding it implicates; "change" is every replica down after a change
KEYS = {**{f: f for f in FINDINGS}, "change": "down", "traffic": None}
# findings a verdict about the key already states in its own words, besides its own: not repeated as "also seen"
STATES = {"change": ("drifted", "restarted", "oom"), "drifted": ("restarted",)}
LATENCY_RATIO = 1.5  # as replica_compare: a window mean this much above history is "up"


def _utc(seconds: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(seconds))


def _iso(seconds: float) -> str:
    """The onset's time for programs: ISO 8601 in UTC (a float epoch reads as 1.79e+09 where facts are printed)."""
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(seconds))


def health_text(row: Mapping[str, Any]) -> str:
    """How /health answered, in a few words: ``503``, ``connection refused``, ``timed out``, ``no answer``."""
    if row.get("health_status") is not None:
        return str(row["health_status"])
    reason = row.get("no_answer")
    if reason == "refused":
        return "connection refused"
    if reason == "timed out":
        return f"no answer in {row.get('health_seconds') or 0:.0f} s (timed out)"
    return "no answer"


def restart_time(row: Mapping[str, Any]) -> float | None:
    """When this replica's engine process (re)started, if it did just before or during the look."""
    last = row.get("last_start_time")
    if row.get("restarted") and isinstance(last, (int, float)) and last != row.get("process_start_time"):
        return float(last)  # a new process between two scrapes
    if row.get("started_recently") and isinstance(row.get("process_start_time"), (int, float)):
        return float(row["process_start_time"])
    return None


def _restart_line(row: Mapping[str, Any]) -> str:
    at = restart_time(row)
    if row.get("started_recently") and at is not None and row.get("uptime_seconds") is not None:
        minutes = row["uptime_seconds"] / 60
        return f"{row['host']} restarted: its engine process started {minutes:.1f} min before the look ({_utc(at)})"
    if at is not None:
        return f"{row['host']} restarted during the look: a new engine process started {_utc(at)}"
    if row.get("restarted"):
        return f"{row['host']} restarted during the look (its counters went back)"
    count = row.get("restart_count") or 0
    return f"{row['host']}'s container restarted {count} time{'' if count == 1 else 's'}"


def _latency_line(row: Mapping[str, Any]) -> str:
    parts = [
        f"{name} x{row[f'{field}_ratio']:.1f}"
        for name, field in (("TTFT", "ttft"), ("ITL", "itl"))
        if (row.get(f"{field}_ratio") or 0) >= LATENCY_RATIO
    ]
    return f"{row['host']} {' and '.join(parts)} of its history (latency up)"


def _drift_line(row: Mapping[str, Any], compare: Mapping[str, Any], names: Mapping[str, str]) -> str:
    host = row["host"]
    drift = sorted((compare.get("drift") or {}).items())
    traits = [f"{names.get(f, f)} {row.get(f)}" for f, hosts in drift if host in hosts]
    traits += [f"{d['arg']} {d['values'][host]}" for d in compare.get("args_drift") or [] if host in d["hosts"]]
    return f"{host} runs another release ({', '.join(traits)})"


def _line(finding: str, row: Mapping[str, Any], compare: Mapping[str, Any], names: Mapping[str, str]) -> str:
    host = row["host"]
    if finding == "down":
        return f"{host} fails /health ({health_text(row)})"
    if finding == "oom":
        killed = " (OOMKilled)" if row.get("oom_killed") else ""
        return f"{host} ended with exit {row.get('exit_code')}{killed}"
    if finding == "drifted":
        return _drift_line(row, compare, names)
    if finding == "broken_stream":
        return f"{host}'s streamed completion never ended"
    if finding == "kv_full":
        usage, preempted = (row.get("kv_cache_usage") or 0) * 100, int(row.get("preemptions_now") or 0)
        return f"{host} KV cache {usage:.0f}% with {preempted} preemption{'' if preempted == 1 else 's'}"
    if finding == "latency_up":
        return _latency_line(row)
    if finding == "slow":
        return f"{host} answers /health in {row.get('health_seconds') or 0:.2f} s (slow)"
    return _restart_line(row)


def findings(
    replicas: list[dict[str, Any]], compare: Mapping[str, Any], names: Mapping[str, str]
) -> list[dict[str, Any]]:
    """Every finding of the look, one line per replica it is on, in the decide order of the runbook."""
    by_host = {r["host"]: r for r in replicas}
    out = [
        {"finding": f, "host": h, "text": _line(f, by_host[h], compare, names)}
        for f in FINDINGS
        for h in compare.get(f) or []
        if h in by_host
    ]
    ratio, growing = compare.get("traffic_ratio"), compare.get("queue_growing") or []
    if ratio is not None and ratio >= compare["thresholds"]["traffic_ratio"] and growing:
        text = f"traffic x{ratio} of the window before, the queue growing on {', '.join(growing)}"
        out.append({"finding": "traffic", "host": None, "text": text})
    return out


def onset(rows: list[dict[str, Any]]) -> dict[str, Any] | None:
    """When the trouble of these (implicated) replicas began, with its source; None when they do not show it."""
    starts = sorted((at, r["host"]) for r in rows if (at := restart_time(r)) is not None)
    if starts:
        at, host = starts[0]
        who = host if len(starts) == 1 else f"{host} (first of {', '.join(h for _, h in starts)})"
        return {
            "time": _iso(at),
            "text": _utc(at),
            "source": f"the engine process on {who} started then (process_start_time_seconds in /metrics)",
        }
    failing = sorted(
        (r["server_time"], r["host"], health_text(r)) for r in rows if r.get("alive") is False and r.get("server_time")
    )
    if failing:
        at, host, status = failing[0]
        return {
            "time": _iso(at),
            "text": f"at or before {_utc(at)}",
            "source": f"the first failing answer seen: {host} /health {status} (the replica's Date header)",
        }
    return None


def onsets(replicas: list[dict[str, Any]], compare: Mapping[str, Any], found: list[dict[str, Any]]) -> dict[str, Any]:
    """Per onset key (what a verdict is about): its replicas, ``since`` from them only, and ``also_seen``."""
    by_host = {r["host"]: r for r in replicas}
    out: dict[str, Any] = {}
    for key, finding in KEYS.items():
        hosts = [h for h in compare.get(finding) or [] if h in by_host] if finding else []
        skip = {finding or "traffic", *STATES.get(key, ())}
        also = [
            f["text"]
            for f in found
            if f["finding"] not in skip and not (key == "oom" and f["finding"] == "restarted" and f["host"] in hosts)
        ]
        out[key] = {"hosts": hosts, "since": onset([by_host[h] for h in hosts]), "also_seen": list(dict.fromkeys(also))}
    return out


def follow_ups(compare: Mapping[str, Any], url_only: set[str]) -> tuple[dict[str, list[str]], dict[str, Any]]:
    """(node_next, metrics_next) per finding: where a follow-up can run from where the operator is.

    ``node_next``: the implicated replicas with a node (a runbook that reads the node never runs over a URL).
    ``metrics_next``: p99-regression's hosts and metrics_url; a replica reached by URL only is read from this
    machine (``local``) at its own /metrics, the first such replica (one --host local takes one URL)."""
    urls = compare.get("metrics_url_by_host") or {}
    node_next, metrics_next = {}, {}
    for finding in FINDINGS:
        hosts = list(compare.get(finding) or [])
        on_node = [h for h in hosts if h not in url_only]
        node_next[finding] = on_node
        by_url = [h for h in hosts if h in url_only and h in urls]
        mapping = {h: urls[h] for h in on_node if h in urls}
        if by_url:
            mapping["local"] = urls[by_url[0]]
        only_local = bool(by_url) and not on_node
        metrics_next[finding] = {
            "hosts": list(mapping) if mapping else on_node,
            "metrics_url": mapping["local"] if only_local else (mapping or None),
            "from_here": by_url[:1],
        }
    return node_next, metrics_next


def release_compared(
    down: list[dict[str, Any]], up: list[dict[str, Any]], fields: tuple[str, ...], names: Mapping[str, str]
) -> dict[str, Any]:
    """Which release traits the failing replicas were compared on with the serving ones, and the outcome.

    A trait is compared only where every failing and every serving replica named it: ``same`` (each
    failing replica's value is one a serving replica has; with none serving, all failing ones agree),
    ``differs``; ``not_compared`` maps each other trait to the replicas that did not name it. No trait is
    "the same" by default."""
    same: list[str] = []
    differs: list[str] = []
    missing: dict[str, list[str]] = {}
    for name in fields:
        unknown = [r["host"] for r in down + up if r.get(name) is None]
        if unknown:
            missing[names.get(name, name)] = unknown
            continue
        serving = {str(r[name]) for r in up or down[:1]}
        (same if all(str(r[name]) in serving for r in down) else differs).append(names.get(name, name))
    return {"same": same, "same_text": _and(same), "differs": differs, "not_compared": missing}


def _and(words: list[str]) -> str:
    return ", ".join(words[:-1]) + " and " + words[-1] if len(words) > 1 else "".join(words)
