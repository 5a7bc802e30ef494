"""Runbooks over a group of hosts (``scope: job``): the ranks of one training or TP/PP job.

Every collect node runs on every member at once. A collector's facts are parsed from the
members' outputs taken together (so a multi-rank NCCL log reads as one job), and each
member's own facts stay readable as ``hosts[<host>].<namespace>``. One verdict for the job;
it names the host to act on, and every member's entry carries it.
"""

from __future__ import annotations

import functools
import json
import re
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from nightowl.engine.expressions import resolve_path
from nightowl.engine.model import split_entry
from nightowl.engine.runner import (
    CollectorLike,
    CollectorRun,
    HostRun,
    HostRunner,
    Recorder,
    RunOptions,
    _trim,
    collect_on,
    parse_output,
    worst_status,
)
from nightowl.engine.validate import LoadedRunbook
from nightowl.transports.base import Transport, TransportError


class JobRunner(HostRunner):
    """Walks a ``scope: job`` runbook once over all members of a job, to one verdict for the job.

    Members are connected in parallel; an unreachable member is recorded as such and the walk
    goes on with the others. Each collect node runs on every reachable member at once; the
    members' outputs are parsed together as one, and each member's facts stay readable as
    ``hosts[<host>].<namespace>``. Conditions see ``host`` as None and ``unreachable_hosts``.
    """

    def __init__(
        self,
        loaded: LoadedRunbook,
        transports: list[Transport],
        lookup: Callable[[str], CollectorLike],
        recorder: Recorder,
        options: RunOptions,
    ) -> None:
        super().__init__(loaded, transports[0], lookup, recorder, options)
        self.members = transports
        self.member_runs = {t.host: HostRun(host=t.host) for t in transports}
        self.reachable: list[Transport] = []
        self.run = HostRun(host="job")

    def _connect(self, transport: Transport) -> None:
        try:
            transport.connect()
            self.reachable.append(transport)
        except TransportError as exc:
            run = self.member_runs[transport.host]
            run.status, run.error = "unreachable", str(exc)

    def execute_job(self) -> list[HostRun]:
        """Run the job; one HostRun per member, in the order given, each carrying the job's path and verdict."""

        t0 = time.monotonic()
        self.run.started = time.time()
        with ThreadPoolExecutor(max_workers=min(32, len(self.members)), thread_name_prefix="connect") as pool:
            list(pool.map(self._connect, self.members))
        self.reachable.sort(key=self.members.index)
        try:
            if self.reachable:
                self._walk()
        finally:
            for transport in self.reachable:
                transport.close()
        for transport in self.reachable:
            member = self.member_runs[transport.host]
            member.path, member.visits, member.verdict = self.run.path, self.run.visits, self.run.verdict
            if self.run.status != "ok":
                member.status, member.error = self.run.status, self.run.error
            elif member.collections and not any(c.facts for c in member.collections.values()):
                member.status, member.error = "incomplete", "every collector failed on this host"
        job = self._job_table()
        for member in self.member_runs.values():
            member.started, member.duration = self.run.started, time.monotonic() - t0
            member.job = job
        return [self.member_runs[t.host] for t in self.members]

    def _collect_one(self, entry: str) -> CollectorRun:
        kind, namespace = split_entry(entry)
        collector = self.lookup(kind)

        def on_member(transport: Transport) -> CollectorRun:
            single = bool(getattr(transport, "recorded", False))
            run = collect_on(
                transport, collector, self.recorder, self.options, single, keep_text=True, deadline=self.deadline
            )
            run.namespace = namespace
            self.member_runs[transport.host].collections[entry] = run
            return run

        pool = ThreadPoolExecutor(max_workers=min(32, len(self.reachable)), thread_name_prefix="member")
        try:
            per_member = list(pool.map(on_member, self.reachable))
        except BaseException:  # an interrupt must not wait for members whose transports are being closed
            pool.shutdown(wait=False, cancel_futures=True)
            raise
        pool.shutdown(wait=True)
        merged = CollectorRun(kind=kind, namespace=namespace, status="ok")
        merged.status = worst_status({r.status for r in per_member})
        reasons = [f"{t.host}: {r.reason}" for t, r in zip(self.reachable, per_member, strict=True) if r.reason]
        merged.reason = "; ".join(reasons) or None
        merged.file = ", ".join(r.file for r in per_member if r.file) or None
        texts = [r.text for r in per_member if r.facts is not None]
        if texts:
            joined = "".join(t if t.endswith("\n") or not t else t + "\n" for t in texts)
            cut = sum((r.facts or {}).get("truncated_bytes", 0) for r in per_member)
            left = collector.timeout if self.deadline is None else self.deadline - time.monotonic()
            merged.facts, merged.parse_error = parse_output(collector, joined, max(0.0, left), cut)
        for run in per_member:
            run.text = ""  # merged; do not keep big logs twice
        return merged

    def context(self) -> dict[str, Any]:
        """The host context with ``host`` None, ``hosts`` (each reachable member's facts) and ``unreachable_hosts``."""
        ctx = super().context()
        ctx["host"] = None
        ctx["hosts"] = {
            host: {c.namespace: c.facts or {} for c in run.collections.values()}
            for host, run in self.member_runs.items()
            if run.status != "unreachable"
        }
        ctx["unreachable_hosts"] = [h for h, r in self.member_runs.items() if r.status == "unreachable"]
        return ctx

    # -- per-member evidence and roles -------------------------------------------
    def _member_values(self, fact_path: str) -> dict[str, Any]:
        """Each reachable member's own value of a fact path (members without the namespace left out)."""
        namespace = fact_path.partition(".")[0]
        values = {}
        for host, run in self.member_runs.items():
            facts = {c.namespace: c.facts for c in run.collections.values() if c.facts is not None}
            if namespace in facts:
                values[host] = resolve_path(fact_path, facts)
        return values

    def _differs(self, fact_path: str) -> dict[str, Any] | None:
        values = self._member_values(fact_path)
        distinct = {json.dumps(v, sort_keys=True, default=str) for v in values.values()}
        return values if len(distinct) > 1 else None

    def _evidence(self, declared: list[str], ctx: dict[str, Any]) -> list[dict[str, Any]]:
        """Evidence the members agree on is cited once; evidence they differ on is cited per host, never merged."""
        items: list[dict[str, Any]] = []
        for path in declared:
            per_host = self._differs(path)
            if per_host is None:
                items += super()._evidence([path], ctx)[:1]
                continue
            for host, value in per_host.items():
                source = next(
                    (c.file for c in self.member_runs[host].collections.values() if c.namespace == path.split(".")[0]),
                    None,
                )
                items.append({"fact": path, "host": host, "value": _trim(value), "source": source})
        conditions = super()._evidence([], ctx)
        return items + conditions

    def _job_table(self) -> dict[str, Any]:
        """The job's members: each one's role under the job's verdict and the facts that differ between them."""
        verdict = self.run.verdict
        paths = [p for p in (verdict or {}).get("evidence", []) if "host" in p]
        differing = list(dict.fromkeys(p["fact"] for p in paths))
        named = _hosts_named(verdict, list(self.member_runs))
        members = []
        for host, run in self.member_runs.items():
            members.append(
                {
                    "host": host,
                    "status": run.status,
                    "role": _role(run.status, verdict, host, named),
                    "facts": {p["fact"]: p["value"] for p in paths if p["host"] == host},
                }
            )
        return {"members": members, "differing_facts": differing, "hosts_named": named}


@functools.lru_cache(maxsize=8)
def names_pattern(names: tuple[str, ...]) -> re.Pattern[str]:
    """One pattern for every host name as a whole word, longest first, compiled once per set of names
    (job members here, a run's hosts in status updates)."""
    alternatives = "|".join(re.escape(n) for n in sorted(names, key=len, reverse=True)) or r"(?!)"
    return re.compile(rf"(?<![\w.-])(?:{alternatives})(?![\w-])")


def _hosts_named(verdict: dict[str, Any] | None, hosts: list[str]) -> list[str]:
    """The members the verdict's summary names (the host to act on), as whole words."""
    if not verdict:
        return []
    found = set(names_pattern(tuple(sorted(hosts))).findall(verdict.get("summary") or ""))
    return [h for h in hosts if h in found]


def _role(status: str, verdict: dict[str, Any] | None, host: str, named: list[str]) -> str:
    """``act on`` (the verdict's action applies here), ``healthy``, ``not implicated`` or ``no verdict``."""
    if status != "ok" or verdict is None:
        return "no verdict" + (f" ({status})" if status != "ok" else "")
    if verdict["severity"] == "ok":
        return "healthy"
    if not named or host in named:
        return f"act on: {verdict['action']}"
    return "not implicated"
