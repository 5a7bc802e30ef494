"""NVIDIA's Xid catalog and what nightowl makes of it, in four parts: ``catalog`` (the data, lookup,
the action ranking), ``rules`` (xid_rules.yaml's rule kinds and one Xid's action), ``explanation``
(the first steps a person reads; ``explain``) and ``policy`` (a site's overrides and ``judge``: a
kernel log's events -> one action). The names callers use are re-exported here; the tables read from
nightowl/knowledge (``CATALOG``, ``NVLINK5_CODES`` ...) load on first use, as in ``catalog``."""

from typing import Any

from nightowl.collectors.gpu.xid_catalog import catalog as _catalog_module
from nightowl.collectors.gpu.xid_catalog.catalog import (
    XidEntry,
    action_rank,
    lookup,
    normalize_recovery_action,
    nvlink_severity,
    recovery_from_text,
    recovery_name,
    strictest,
    strictest_recovery,
)
from nightowl.collectors.gpu.xid_catalog.explanation import (
    FIRST_STEP_BY_BUCKET,
    FIRST_STEP_BY_CODE,
    UNKNOWN_FIRST_STEP,
    event_row,
    explain,
)
from nightowl.collectors.gpu.xid_catalog.policy import (
    HISTORY_RULE_KEYS,
    LINE_KINDS,
    history_rule,
    judge,
    load_history_rules,
    load_policy,
    wedged_driver_line,
)
from nightowl.collectors.gpu.xid_catalog.rules import action_for, wedged_after_codes


def __getattr__(name: str) -> Any:
    """The knowledge tables (``CATALOG``, ``BUCKET_TO_ACTION``, ``NVLINK5_CODES`` ...), read on first use."""
    if name in _catalog_module._LAZY:
        return _catalog_module._LAZY[name]()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "ACTION_ORDER",
    "FIRST_STEP_BY_ACTION",
    "FIRST_STEP_BY_BUCKET",
    "FIRST_STEP_BY_CODE",
    "HISTORY_RULE_KEYS",
    "LINE_KINDS",
    "UNKNOWN_FIRST_STEP",
    "XidEntry",
    "action_for",
    "action_rank",
    "event_row",
    "explain",
    "history_rule",
    "judge",
    "load_history_rules",
    "load_policy",
    "lookup",
    "normalize_recovery_action",
    "nvlink_severity",
    "recovery_from_text",
    "recovery_name",
    "strictest",
    "strictest_recovery",
    "wedged_after_codes",
    "wedged_driver_line",
]
