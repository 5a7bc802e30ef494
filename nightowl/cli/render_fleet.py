"""Fleet views of a sweep: a table for people, a Prometheus textfile for node-exporter."""

from __future__ import annotations

import time
from collections import Counter
from typing import Any


def fleet_table(summary: dict[str, Any]) -> str:
    rows = [("HOST", "STATUS", "VERDICT", "ACTION", "GPUS", "SECONDS")]
    for h in summary["hosts"]:
        v = h.get("verdict") or {}
        gpus = ",".join(map(str, v.get("gpus") or [])) or "-"
        rows.append(
            (
                h["host"],
                h["status"],
                v.get("id", "-"),
                v.get("action", "-"),
                gpus,
                f"{h.get('duration', 0):.1f}",
            )
        )
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in rows]
    verdicts = Counter((h.get("verdict") or {}).get("id", f"({h['status']})") for h in summary["hosts"])
    lines.append("")
    lines.append("hosts by verdict: " + ", ".join(f"{k} {n}" for k, n in verdicts.most_common()))
    for h in summary["hosts"]:
        if h.get("error") and h["status"] != "ok":
            lines.append(f"  {h['host']}: {h['error']}")
    for field, hosts in (summary.get("fleet") or {}).get("outliers", {}).items():
        if hosts:
            lines.append(f"differ from the rest on {field}: {', '.join(hosts)}")
    lines.append(f"bundle: {summary['bundle']}")
    return "\n".join(lines)


def _label(value: Any) -> str:
    return str(value).replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def prometheus_textfile(summary: dict[str, Any]) -> str:
    """node-exporter textfile format: one series per host plus sweep totals."""
    runbook = _label(summary["runbook"])
    out = [
        "# HELP nightowl_host_verdict 1 for the verdict reached on a host (action: the first action).",
        "# TYPE nightowl_host_verdict gauge",
    ]
    for h in summary["hosts"]:
        v = h.get("verdict") or {}
        out.append(
            f'nightowl_host_verdict{{host="{_label(h["host"])}",runbook="{runbook}",status="{h["status"]}",'
            f'verdict="{_label(v.get("id", "none"))}",severity="{v.get("severity", "unknown")}",'
            f'action="{v.get("action", "unknown")}"}} 1'
        )
    out += [
        "# HELP nightowl_host_needs_action 1 when the host's verdict action is not none.",
        "# TYPE nightowl_host_needs_action gauge",
    ]
    for h in summary["hosts"]:
        action = (h.get("verdict") or {}).get("action")
        out.append(
            f'nightowl_host_needs_action{{host="{_label(h["host"])}",runbook="{runbook}"}} '
            f"{int(bool(action) and action != 'none')}"
        )
    xid_events = (summary.get("fleet") or {}).get("xid_events") or {}
    if xid_events:
        out += [
            "# HELP nightowl_xid_events Xid lines per code (SXid: code prefixed S) in the kernel log read.",
            "# TYPE nightowl_xid_events gauge",
        ]
        for host, codes in xid_events.items():
            for code, count in sorted(codes.items()):
                out.append(f'nightowl_xid_events{{host="{_label(host)}",runbook="{runbook}",code="{code}"}} {count}')
    counts = Counter(h["status"] for h in summary["hosts"])
    out += [
        "# HELP nightowl_sweep_hosts Hosts in the last sweep by status.",
        "# TYPE nightowl_sweep_hosts gauge",
    ]
    for status in ("ok", "unreachable", "incomplete"):
        out.append(f'nightowl_sweep_hosts{{runbook="{runbook}",status="{status}"}} {counts.get(status, 0)}')
    duration = max((h.get("duration") or 0 for h in summary["hosts"]), default=0)
    out += [
        "# HELP nightowl_sweep_duration_seconds Longest host run of the last sweep.",
        "# TYPE nightowl_sweep_duration_seconds gauge",
        f'nightowl_sweep_duration_seconds{{runbook="{runbook}"}} {duration:.3f}',
        "# HELP nightowl_sweep_timestamp_seconds When the last sweep finished.",
        "# TYPE nightowl_sweep_timestamp_seconds gauge",
        f'nightowl_sweep_timestamp_seconds{{runbook="{runbook}"}} {time.time():.0f}',
    ]
    return "\n".join(out) + "\n"
