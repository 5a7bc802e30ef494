"""What a node calls itself in textfiles and bundles when nightowl checks it from the inside.

``NODE_NAME`` first: Kubernetes sets it from the downward API (``fieldRef: spec.nodeName``), the
Slurm health check from ``SLURMD_NODENAME``; else the host name. Never ``local``: under a DaemonSet
or Slurm every node would collapse into one Prometheus series.
"""

from __future__ import annotations

import json
import os
import socket
from pathlib import Path

from nightowl.hostnames import host_name_problem


def node_name() -> str:
    """``$NODE_NAME`` if it is a plausible host name, else ``socket.gethostname()``."""
    given = os.environ.get("NODE_NAME", "").strip()
    if given:
        problem = host_name_problem(given) or _not_a_node_name(given)
        if problem is not None:
            raise ValueError(f"NODE_NAME={given!r} is not a node name: {problem}")
        return given
    return socket.gethostname() or "localhost"


def _not_a_node_name(name: str) -> str | None:
    """What a node's name refuses beyond any host name's rules (nightowl/hostnames.py), as it always
    has: an IPv6 zone, which only the machine that dials understands, and a first character that is
    neither a letter nor a digit (``::1``): the name labels the node's series, it is not dialled."""
    if "%" in name:
        return "an IPv6 zone ('%') names an interface of the machine that dials, not this node"
    if not name[0].isalnum():
        return "starts with neither a letter nor a digit"
    return None


# The most of a bundle's verdicts.json read to learn its hosts (a report's bundle is nightowl's own; a cap
# keeps a wrong path from reading a huge file).
VERDICTS_LIMIT = 4 << 20


def report_names(report: object) -> list[str]:
    """The node names a `nightowl check --format json` report claims, each once, in order: ``hosts[].host``
    (``$NODE_NAME``, else the host name, as the check named itself), a ``node`` or ``hostname`` it carries,
    and its bundle's hosts (``hosts/NAME/`` folders and ``verdicts.json``) when the bundle is readable here."""
    if not isinstance(report, dict):
        return []
    found: list[str] = []
    hosts = report.get("hosts")
    for host in hosts if isinstance(hosts, list) else []:
        if isinstance(host, dict):
            found += [str(host[k]) for k in ("host", "node", "hostname") if host.get(k)]
    found += [str(report[k]) for k in ("node", "hostname") if report.get(k)]
    bundle = report.get("bundle")
    if isinstance(bundle, str) and bundle:
        found += _bundle_hosts(Path(bundle))
    return list(dict.fromkeys(found))


def _bundle_hosts(bundle: Path) -> list[str]:
    names: list[str] = []
    try:
        hosts = bundle / "hosts"
        if hosts.is_dir() and not hosts.is_symlink():
            names += sorted(p.name for p in hosts.iterdir() if p.is_dir())
        verdicts = bundle / "verdicts.json"
        if verdicts.is_file() and verdicts.stat().st_size <= VERDICTS_LIMIT:
            entries = json.loads(verdicts.read_text(encoding="utf-8"))
            entries = entries.get("hosts") if isinstance(entries, dict) else entries
            names += [str(e["host"]) for e in entries or [] if isinstance(e, dict) and e.get("host")]
    except (OSError, ValueError, TypeError):
        pass  # an unreadable bundle names no host; the report's own names still count
    return names


def same_node(name: str, node: str) -> bool:
    """Whether ``name`` (from a report) names ``node``: host names compare without case (RFC 4343), and a
    short name matches its fully qualified form (``gpu-17`` and ``gpu-17.example.com``)."""
    a, b = name.strip().lower().rstrip("."), node.strip().lower().rstrip(".")
    if a == b:
        return True
    return ("." not in a or "." not in b) and a.split(".")[0] == b.split(".")[0]


def other_node(report: object, node: str) -> str | None:
    """Why ``report`` is not about ``node`` (naming both), or None when every name it claims is ``node``'s
    (or it claims none: nothing to compare)."""
    others = [name for name in report_names(report) if not same_node(name, node)]
    if not others:
        return None
    return f"the report is about {', '.join(others)}, not {node}"
