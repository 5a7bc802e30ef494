"""A sweep for people: one row per host, hosts grouped by verdict, and the hosts that differ."""

from __future__ import annotations

from collections import Counter
from typing import Any


def fleet_table(summary: dict[str, Any]) -> str:
    """The `--format table` view of a sweep summary (`nightowl.run.RunResult.summary` plus `fleet`)."""
    rows = [("HOST", "STATUS", "VERDICT", "ACTION", "GPUS", "PORTS", "FABRIC", "SECONDS")]
    network = (summary.get("fleet") or {}).get("network") or {}
    for h in summary["hosts"]:
        v = h.get("verdict") or {}
        gpus = ",".join(map(str, v.get("gpus") or [])) or "-"
        cells = network.get(h["host"]) or {}
        rows.append(
            (
                h["host"],
                h["status"],
                v.get("id", "-"),
                v.get("action", "-"),
                gpus,
                cells.get("ports", "-"),
                cells.get("fabric", "-"),
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
    from nightowl.fleet.domains import domains_table

    lines.extend(domains_table(summary.get("domains") or []))
    from nightowl.fleet.actions_log import breaker_line

    breaker = breaker_line(summary.get("breaker"))
    if breaker:
        lines.append(breaker)
    if summary.get("bundle_error"):
        lines.append(f"bundle: not written ({summary['bundle_error']})")
    else:
        lines.append(f"bundle: {summary['bundle']}")
    return "\n".join(lines)
