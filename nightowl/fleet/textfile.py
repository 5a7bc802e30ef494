"""A sweep as a node-exporter textfile (https://github.com/prometheus/node_exporter#textfile-collector).

One series per host (verdict, needs-action, Xid counts) plus sweep totals; the recording and alert
rules in deploy/prometheus/ read these names, so renaming a metric or a label breaks them.
"""

from __future__ import annotations

import time
from collections import Counter
from typing import Any


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
