"""`sweep --format html`: the fleet as a picture, for the people who would rather look than read.

One self-contained page (inline CSS, no script, nothing fetched): the hosts grouped by failure domain (rack,
switch, NVLink domain, as the inventory's labels and the hosts' facts name them: nightowl/fleet/domains.py),
each host a tile coloured by its verdict's severity, its verdict and action on hover (the ``title``
attribute), linking to its folder in the sweep's bundle. A domain finding (k of n members sharing a fault) is
drawn as a frame around the members it names, captioned with the action to take on the domain first.
The tiles and groups are built here from the sweep's summary; templates/sweep.html.j2 only lays them out.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any
from urllib.parse import quote

TEMPLATE = "sweep.html.j2"
# The order domain kinds are drawn in; any other kind an inventory lists follows, by name.
KIND_ORDER = ("rack", "switch", "nvlink_domain", "clique", "pdu")
KIND_TITLES = {"rack": "Racks", "switch": "Switches", "nvlink_domain": "NVLink domains", "clique": "NVLink cliques"}
# A tile's class: the verdict's severity, or why there is none (unreachable, incomplete, ...).
SEVERITIES = ("ok", "info", "warning", "critical")


def sweep_html(summary: dict[str, Any]) -> str:
    """The page for a sweep summary (``nightowl.run.RunResult.summary`` plus ``fleet`` and ``domains``)."""
    from nightowl.bundled_templates import environment

    # every host name, verdict and summary is escaped: a label is never markup
    page = environment(autoescape=True, trimmed=True, strict=True).get_template(TEMPLATE)
    return page.render(**page_context(summary))


def page_context(summary: Mapping[str, Any]) -> dict[str, Any]:
    """What the template draws: the run's heading, the count of hosts by class, and the sections of groups."""
    tiles = {str(h["host"]): tile(h, summary.get("bundle")) for h in summary.get("hosts") or []}
    counts: dict[str, int] = {}
    for t in tiles.values():
        counts[t["verdict"]] = counts.get(t["verdict"], 0) + 1
    return {
        "runbook": summary.get("runbook"),
        "run_id": summary.get("run_id"),
        "bundle": summary.get("bundle"),
        "counts": sorted(counts.items(), key=lambda kv: -kv[1]),
        "sections": sections(summary.get("domains") or [], tiles),
    }


def tile(host: Mapping[str, Any], bundle: Any) -> dict[str, Any]:
    """One host: its name, class (severity or status), verdict (the page counts hosts by it), action, GPUs,
    hover text and bundle link."""
    from nightowl.fleet.table import gpus_cell

    verdict = host.get("verdict") or {}
    severity = verdict.get("severity")
    css = f"sev-{severity}" if severity in SEVERITIES else "no-verdict"
    if verdict:
        summary = str(verdict.get("summary") or "").partition(". ")[0]
        hover = f"{verdict.get('id')} ({severity}) -> {verdict.get('action')}: {summary}"
    else:
        hover = f"no verdict: {host.get('status')}" + (f": {host.get('error')}" if host.get("error") else "")
    return {
        "host": str(host["host"]),
        "css": css,
        "verdict": verdict.get("id") or f"({host.get('status')})",
        "action": verdict.get("action") or "-",
        "gpus": gpus_cell(verdict) if verdict else "-",
        "title": hover,
        "href": host_link(bundle, str(host["host"])),
    }


def host_link(bundle: Any, host: str) -> str | None:
    """The host's folder in the sweep's bundle (``hosts/<name>/``) as a link, or None with no bundle."""
    from nightowl.engine.layout import host_folder

    if not bundle:
        return None
    folder = Path(str(bundle)).absolute()
    return f"{folder.as_uri()}/{quote(host_folder(host), safe='/')}/"


def sections(domains: list[Mapping[str, Any]], tiles: Mapping[str, dict[str, Any]]) -> list[dict[str, Any]]:
    """One section per domain kind, each a list of groups (one per domain, then the hosts in none of that
    kind); a group holds its findings (frames of member tiles, captioned) and its other tiles. With no
    domains at all, one section of one group: every host."""
    by_kind: dict[str, list[Mapping[str, Any]]] = {}
    for domain in domains:
        by_kind.setdefault(str(domain["kind"]), []).append(domain)
    kinds = sorted(by_kind, key=lambda k: (KIND_ORDER.index(k) if k in KIND_ORDER else len(KIND_ORDER), k))
    drawn = []
    for kind in kinds:
        groups = [
            group(f"{kind} {d['name']}", d.get("members") or [], d.get("findings") or [], tiles) for d in by_kind[kind]
        ]
        placed = {str(m) for d in by_kind[kind] for m in d.get("members") or []}
        rest = [h for h in tiles if h not in placed]
        if rest:
            groups.append(group(f"in no {kind}", rest, [], tiles))
        drawn.append({"title": KIND_TITLES.get(kind, kind), "groups": groups})
    return drawn or [
        {"title": "Hosts", "groups": [group("every host (the inventory names no domain)", list(tiles), [], tiles)]}
    ]


def group(
    name: str, members: list[Any], findings: list[Mapping[str, Any]], tiles: Mapping[str, dict[str, Any]]
) -> dict[str, Any]:
    """A domain's box: a frame per finding around the members it names, then the members no finding names."""
    framed: set[str] = set()
    frames = []
    for finding in findings:
        names = [str(m) for m in finding.get("members") or [] if str(m) in tiles]
        framed.update(names)
        severity = finding.get("severity")
        frames.append(
            {
                "css": f"sev-{severity}" if severity in SEVERITIES else "sev-warning",
                "caption": f"{finding.get('shared_by')} of {finding.get('of')}: {finding.get('verdict')}",
                "action": str(finding.get("action") or ""),
                "tiles": [tiles[n] for n in names],
            }
        )
    others = [tiles[str(m)] for m in members if str(m) in tiles and str(m) not in framed]
    return {"name": name, "size": len(members), "frames": frames, "tiles": others}
