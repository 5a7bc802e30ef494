"""How nightowl writes a JSON document for people and scripts alike: indented while it is small, compact
once it covers many hosts.

``json.dumps`` with ``indent`` runs its pure-Python encoder (about 20x slower than the C one that compact
output uses): a second for a 1,000-host trace, and a sizeable share of a sweep's CPU per host. A document
of more than ``COMPACT_AFTER_HOSTS`` hosts (a sweep) is read with ``jq`` or a script anyway, so it is
written compact; its content is the same either way (docs/reference.md#run-json).
"""

from __future__ import annotations

import json
from typing import Any

COMPACT_AFTER_HOSTS = 16


def dumps(data: Any, hosts: int, indent: int = 2, sort_keys: bool = False) -> str:
    """``data`` as JSON (non-JSON values as ``str``), indented by ``indent`` unless it covers more than
    ``COMPACT_AFTER_HOSTS`` hosts."""
    return json.dumps(data, indent=None if hosts > COMPACT_AFTER_HOSTS else indent, default=str, sort_keys=sort_keys)
