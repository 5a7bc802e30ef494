"""What a node calls itself in textfiles and bundles when nightowl checks it from the inside.

``NODE_NAME`` first: Kubernetes sets it from the downward API (``fieldRef: spec.nodeName``), the
Slurm health check from ``SLURMD_NODENAME``; else the host name. Never ``local``: under a DaemonSet
or Slurm every node would collapse into one Prometheus series.
"""

from __future__ import annotations

import os
import socket

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
