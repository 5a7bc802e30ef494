"""A sweep for people: one row per host, hosts grouped by verdict, and the hosts that differ."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from typing import Any

GPUS_WIDTH = (
    56  # 8 GPUs by short address fit; past this the GPUS cell drops the codes, then counts the GPUs it cannot show
)


def fleet_table(summary: dict[str, Any]) -> str:
    """The `--format table` view of a sweep summary (`nightowl.run.RunResult.summary` plus `fleet`)."""
    rows = [("HOST", "STATUS", "VERDICT", "ACTION", "GPUS", "PORTS", "FABRIC", "SECONDS")]
    network = (summary.get("fleet") or {}).get("network") or {}
    for h in summary["hosts"]:
        v = h.get("verdict") or {}
        gpus = gpus_cell(v)
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


def gpus_cell(verdict: Mapping[str, Any]) -> str:
    """The GPUS cell: every GPU the verdict names (its own, then each other GPU with a fault of its own, issue 45
    item 7) with the Xid codes it logged, ``0a:00, 07:00 48+64``; ``-`` when it names none. The codes come from
    the verdict itself: ``other_gpus`` and the ``xids_by_gpu`` fact among its evidence."""
    gpus = [str(g) for g in verdict.get("gpus") or []]
    if not gpus:
        return "-"
    codes = gpu_codes(verdict)
    named = [f"{short_gpu(g)} {'+'.join(map(str, codes[g]))}" if codes.get(g) else short_gpu(g) for g in gpus]
    cell = ", ".join(named)
    if len(cell) > GPUS_WIDTH:  # too wide for a table row: the GPUs without their codes, then a count
        cell = ", ".join(short_gpu(g) for g in gpus)
    if len(cell) > GPUS_WIDTH:
        shown = [short_gpu(g) for g in gpus[:4]]
        cell = f"{', '.join(shown)} +{len(gpus) - len(shown)}"
    return cell


def gpu_codes(verdict: Mapping[str, Any]) -> dict[str, list[int]]:
    """The Xid codes each GPU of the verdict logged, by PCI address (``other_gpus``, else the evidence's
    ``*.xids_by_gpu`` fact)."""
    codes: dict[str, list[int]] = {}
    for fact in verdict.get("evidence") or []:
        value = fact.get("value") if isinstance(fact, Mapping) else None
        if str((fact or {}).get("fact", "")).endswith(".xids_by_gpu") and isinstance(value, Mapping):
            for gpu, xids in value.items():
                if isinstance(xids, list):
                    codes.setdefault(str(gpu), sorted({int(x) for x in xids if isinstance(x, int)}))
    for other in verdict.get("other_gpus") or []:
        if isinstance(other, Mapping) and other.get("xids"):
            codes[str(other.get("gpu"))] = [int(x) for x in other["xids"] if isinstance(x, int)]
    return codes


def short_gpu(address: str) -> str:
    """``0000:0a:00`` -> ``0a:00``: the PCI domain dropped where it is the usual 0000."""
    return address.removeprefix("0000:")
