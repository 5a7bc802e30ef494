"""`triage --replica NAME=URL` and `--replica-inventory FILE`: serving replicas reached by URL alone.

Each replica becomes a member reached over HTTP from this machine (nightowl/transports/http.py): its
``/health``, ``/version``, ``/v1/models`` and ``/metrics`` are read directly, and the runbook's
``base_url`` parameter becomes the mapping name -> URL, so the serving collectors build the same
commands they build over SSH. What needs the node (container state, engine log, GPUs) is reported as
not read; give those hosts with ``--host``.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from nightowl.cli.common import fail
from nightowl.transports.base import Transport, TransportError


def replica_urls(pairs: tuple[str, ...], inventory: Path | None, group: str | None) -> dict[str, str]:
    """NAME -> base URL from ``--replica`` pairs and the inventory's hosts that carry a ``url`` label;
    a bad pair, a bad URL or a name given twice is a usage error (exit 2)."""
    from nightowl.transports.http import check_base_url

    urls: dict[str, str] = {}
    entries = [_pair(p) for p in pairs] + (_from_inventory(inventory, group) if inventory else [])
    for name, url in entries:
        if name in urls:
            fail(f"--replica: {name} is given twice")
        try:
            urls[name] = check_base_url(url)
        except TransportError as exc:
            fail(f"--replica {name}: {exc}")
    return urls


def _pair(text: str) -> tuple[str, str]:
    name, sep, url = text.partition("=")
    if not sep or not name.strip() or not url.strip():
        fail(f"--replica expects NAME=URL (e.g. r1=http://10.0.0.5:8000), got {text!r}")
    return name.strip(), url.strip()


def _from_inventory(path: Path, group: str | None) -> list[tuple[str, str]]:
    from nightowl.fleet.inventory import InventoryError, limit, load_inventory

    try:
        hosts = load_inventory(path)
    except InventoryError as exc:
        fail(str(exc))
    if group:
        hosts = limit(hosts, f"group={group}")
    found = [(h.name, h.labels["url"]) for h in hosts if h.labels.get("url")]
    if not found:
        where = f" in group {group}" if group else ""
        fail(f"{path}: no host{where} carries a url label (labels: {{url: http://...}}, Ansible nightowl_labels)")
    return found


@dataclass(frozen=True)
class ReplicaOpener:
    """Opens the HTTP transport of one replica reached by URL only; ``triage --follow`` tells these apart
    from hosts with a node (a follow-up that reads the node never runs over one)."""

    name: str
    url: str

    def __call__(self) -> Transport:
        from nightowl.transports.http import HttpTransport

        return HttpTransport(self.name, self.url)


def replica_transports(urls: dict[str, str]) -> dict[str, ReplicaOpener]:
    """Name -> the function opening its HTTP transport, as run_and_save takes transports."""
    return {name: ReplicaOpener(name, url) for name, url in urls.items()}


def with_base_urls(
    params: dict[str, Any], urls: dict[str, str], others: list[str], declared: Iterable[str] = ()
) -> dict[str, Any]:
    """``base_url`` as the mapping name -> URL; a base_url given too stays the value of the other hosts
    (``others``, given with --host or --replay): its own mapping's entries, or its one URL for each.
    A runbook that declares ``reached_by_url`` (first-look) is told which members have no node to read.
    A runbook that reads ``metrics_url`` and no ``base_url`` (p99-regression) gets each replica's
    ``{url}/metrics`` unless one is given."""
    if not urls:
        return params
    declared = set(declared)
    if declared and "base_url" not in declared and "metrics_url" in declared:
        if params.get("metrics_url") is not None:
            return params
        return {**params, "metrics_url": {name: f"{url}/metrics" for name, url in urls.items()}}
    given = params.get("base_url")
    if isinstance(given, str) and given.strip().startswith("{"):
        from nightowl.engine.yamlines import YamlError, load_with_lines

        try:
            given = load_with_lines(given)[0]
        except YamlError:
            fail("--param base_url: not a mapping of host -> URL")
    mapping = dict(given) if isinstance(given, dict) else {n: given for n in others if given}
    out = {**params, "base_url": {**mapping, **urls}}
    if "reached_by_url" in declared:
        out["reached_by_url"] = sorted(urls)
    return out
