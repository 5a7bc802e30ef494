"""Why a storm's hosts gave no verdict, every one of them (issue 45 item 9): an unreachable storm named only
its first host's error, so eight hosts behind one dead jump host read as one host's problem."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

SHOWN_REASONS = 4  # distinct reasons told in the one line; the record's storm.results has every host's


def no_verdict_line(runs: Iterable[Any]) -> str | None:
    """``3 host(s) gave no verdict: r07-1, r07-2 unreachable: ssh: connect to host <host> port 22: Connection
    refused; r07-3 incomplete: cannot judge: ...``: each distinct reason once with the hosts that gave it (a
    host's own name in its reason read as ``<host>`` so the same failure groups), or None when every host has
    a verdict."""
    by_reason: dict[str, list[str]] = {}
    for run in runs:
        if run.verdict:
            continue
        error = str(run.error).replace(run.host, "<host>") if run.error else None
        by_reason.setdefault(f"{run.status}: {error}" if error else str(run.status), []).append(run.host)
    if not by_reason:
        return None
    told = [f"{', '.join(hosts)} {reason}" for reason, hosts in list(by_reason.items())[:SHOWN_REASONS]]
    more = len(by_reason) - SHOWN_REASONS
    rest = f"; and {more} other reason(s) (storm.results)" if more > 0 else ""
    return f"{sum(map(len, by_reason.values()))} host(s) gave no verdict: {'; '.join(told)}{rest}"
