"""`xid-judgement`: one action for the kernel log's Xids, under an optional site policy.

A derived collector: it runs no command. It applies NVIDIA's pairing rules
(``xid_catalog.judge``: 48 with 63/64, 94 vs 95, Xid 154 overriding when stricter, the sympathetic
codes of ``xid_rules.yaml``) to the ``kernel_log`` events, and, when the runbook parameter ``xid_policy``
names a YAML file on this machine (``overrides: {63: {action: reset-gpu, reason: "..."}}``), lets the site
override a code where public tools disagree with the catalog (Xid 63, 92, 68/69). The reason of an
override is in ``reasons``, which verdicts show.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from nightowl.collectors.base import DerivedCollector, registered

KIND = "xid-judgement"


def derive(inputs: Mapping[str, Mapping[str, Any]], params: Mapping[str, Any] | None = None) -> dict[str, Any]:
    from nightowl.collectors.gpu.xid_catalog import judge, load_policy

    params = params or {}
    events = list(inputs["kernel_log"].get("events") or [])
    policy_path = params.get("xid_policy")
    policy = load_policy(str(policy_path)) if policy_path else None
    judged = judge(events, policy=policy)
    return {"kind": KIND, "warnings": [], "policy": str(policy_path) if policy_path else None, **judged}


def check_params(params: Mapping[str, Any]) -> list[str]:
    """A site policy that cannot be read would silently change the path: refuse it before the run."""
    from nightowl.collectors.gpu.xid_catalog import load_policy

    policy_path = params.get("xid_policy")
    if not policy_path:
        return []
    try:
        load_policy(str(policy_path))
    except OSError as exc:
        return [f"xid_policy {policy_path}: cannot read it: {exc.strerror or exc}"]
    except ValueError as exc:
        return [f"xid_policy: {exc}"]
    except Exception as exc:  # noqa: BLE001 - YAML errors name the line
        return [f"xid_policy {policy_path}: not a valid policy: " + " ".join(str(exc).split())]
    return []


COLLECTOR = DerivedCollector(**registered(KIND), inputs=("kernel_log",), derive=derive, check_params=check_params)
