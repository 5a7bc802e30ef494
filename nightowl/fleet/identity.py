"""What a node calls itself in textfiles and bundles when nightowl checks it from the inside.

``NODE_NAME`` first: Kubernetes sets it from the downward API (``fieldRef: spec.nodeName``), the
Slurm health check from ``SLURMD_NODENAME``; else the host name. Never ``local``: under a DaemonSet
or Slurm every node would collapse into one Prometheus series.
"""

from __future__ import annotations

import os
import re
import socket

_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:-]{0,252}$")


def node_name() -> str:
    """``$NODE_NAME`` if it is a plausible host name, else ``socket.gethostname()``."""
    given = os.environ.get("NODE_NAME", "").strip()
    if given:
        if not _NAME_RE.match(given):
            raise ValueError(f"NODE_NAME={given!r} is not a node name (letters, digits, '.', '-', '_', ':')")
        return given
    return socket.gethostname() or "localhost"
