"""``busbw-judgement``: every job member's nccl-tests busbw at the largest size against a reference.

A derived collector: it runs no command and reads the ``nccl_tests`` facts of each member. The
reference is the ``busbw_baseline`` parameter when given, else the job's median.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from nightowl.collectors.base import DerivedCollector, registered
from nightowl.collectors.nccl.nccl_tests import DEFAULT_TOLERANCE

KIND = "busbw-judgement"


def judge_members(inputs: Mapping[str, Any], params: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """busbw at the largest size of every member against the baseline (a parameter, else the job median).

    Derived collector ``busbw-judgement``: the nccl-hang runbook decides on ``below_hosts`` and
    ``at_baseline_hosts``; ``busbw_tolerance`` is the fraction below the reference that counts as degraded.
    """
    params = params or {}
    by_host = {
        host: facts["nccl_tests"]["large_msg_busbw"]
        for host, facts in sorted((inputs.get("hosts") or {}).items())
        if isinstance((facts.get("nccl_tests") or {}).get("large_msg_busbw"), (int, float))
    }
    values = sorted(by_host.values())
    baseline = params.get("busbw_baseline")
    reference = baseline if baseline is not None else (values[len(values) // 2] if values else None)
    given_tolerance = params.get("busbw_tolerance")
    tolerance = float(given_tolerance) if given_tolerance is not None else DEFAULT_TOLERANCE
    threshold = reference * (1 - tolerance) if reference is not None else None
    below = [h for h, v in by_host.items() if threshold is not None and v < threshold]
    members = sorted(inputs.get("hosts") or {})
    no_data = [h for h in members if h not in by_host]
    # A median of one member is that member: with no baseline, one rank always "passes". No verdict then.
    judgeable = bool(by_host) and not no_data and (baseline is not None or len(by_host) > 1)
    return {
        "kind": "busbw-judgement",
        "warnings": [] if by_host else ["no member has a busbw at the largest size"],
        "busbw_by_host": by_host,
        "reference": reference,
        "reference_kind": "baseline" if baseline is not None else "job median",
        "tolerance": tolerance,
        "threshold": threshold,
        "below_hosts": below,
        "at_baseline_hosts": [h for h in by_host if h not in below],
        "no_data_hosts": no_data,
        "judgeable": judgeable,
    }


COLLECTOR = DerivedCollector(**registered("busbw-judgement"), inputs=("nccl_tests",), derive=judge_members)
