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

from nightowl.engine.expressions import ExpressionError, evaluate_value, resolve_path
from nightowl.engine.runbook_data import NodeData, split_entry
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
from nightowl.transports.base import Transport, TransportError, is_recorded

# Outputs that are one document per member (a scrape, a JSON answer, an XML report): joined, they would
# read as one host with summed counters (3 x 42 preemptions = 126) or a digest no member returned. Their
# job-level facts are the values every member shares, or the largest of differing numbers; the rest is
# read per member (hosts[<host>].<namespace>).
ONE_DOCUMENT_PER_MEMBER = frozenset(
    {
        "metrics",
        "replica-metrics",
        "replica-health",
        "replica-models",
        "known-answer",
        "stream-probe",
        "container-state",
        "nvidia-smi",
        "nvidia-smi-query",
    }
)


# The rules a job's cited fact is told by (docs/reference.md#run-json): one value every member holds, one value
# the members that reported it hold (``held_by``; ``not_reported_by`` gave none), each member's own, the job's own.
SAME_ON_EVERY_MEMBER = "same on every member"
HELD_BY_SOME = "same on the members that reported it"


def shared_facts(per_member: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The job-level facts of a one-document-per-member collector: a key every member holds with one value
    keeps it; differing numbers give their maximum (the worst member, recorded under ``_rules``); any
    other difference is left out, so a condition never reads a value no member has."""
    if not per_member:
        return None
    shared: dict[str, Any] = {}
    rules: dict[str, str] = {}
    for key in dict.fromkeys(k for facts in per_member for k in facts):
        values = [facts.get(key) for facts in per_member]
        encoded = {json.dumps(v, sort_keys=True, default=str) for v in values}
        if len(encoded) == 1:
            shared[key] = values[0]
        elif all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values):
            shared[key], rules[key] = max(v for v in values if v is not None), "max over members"
    if rules:
        shared["_rules"] = rules
    return shared


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
        self.member_runs = {t.host: HostRun(host=t.host, replayed=is_recorded(t)) for t in transports}
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
            single = is_recorded(transport)
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
        if kind in ONE_DOCUMENT_PER_MEMBER:
            merged.facts = shared_facts([r.facts for r in per_member if r.facts is not None])
        elif texts:
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
    def _conclude(self, node_id: str, node: NodeData) -> dict[str, Any]:
        """The verdict, with the members it implicates as the runbook declares them (``implicates``)."""
        verdict = super()._conclude(node_id, node)
        spec = node.verdict
        if spec is None or spec.implicates is None:
            return verdict
        try:
            value = evaluate_value(spec.implicates, self.context())
        except ExpressionError as exc:
            verdict.setdefault("unavailable", {})["implicated"] = f"{spec.implicates} could not be evaluated: {exc}"
            return verdict
        named = {str(v) for v in (value if isinstance(value, (list, tuple, set)) else [value]) if v is not None}
        members = list(self.member_runs)
        if spec.implicates.strip() == "[]":  # declared: the action is for the job as a whole
            verdict["whole_job"] = True
        verdict["implicated"] = [h for h in members if h in named]
        verdict["not_implicated"] = (
            [h for h in members if h not in named and self.member_runs[h].status != "unreachable"] if named else []
        )
        return verdict

    def _member_values(self, fact_path: str) -> dict[str, Any]:
        """Each reachable member's own value of a fact path (members without the namespace left out)."""
        namespace = fact_path.partition(".")[0]
        values = {}
        for host, run in self.member_runs.items():
            facts = {c.namespace: c.facts for c in run.collections.values() if c.facts is not None}
            if namespace in facts:
                values[host] = resolve_path(fact_path, facts)
        return values

    def _member_source(self, host: str, fact_path: str) -> str | None:
        namespace = fact_path.split(".")[0]
        return next((c.file for c in self.member_runs[host].collections.values() if c.namespace == namespace), None)

    def _evidence(self, declared: list[str], ctx: dict[str, Any]) -> list[dict[str, Any]]:
        """A fact the members agree on is cited once, with the members that hold it; one they differ on is
        cited per member, never merged; a fact no member has (a derived job fact) is the job's own."""
        items: list[dict[str, Any]] = []
        for path in declared:
            values = self._member_values(path)
            distinct = {json.dumps(v, sort_keys=True, default=str) for v in values.values()}
            if not values:
                items += [{**i, "rule": "job"} for i in super()._evidence([path], ctx)[:1]]
            elif len(distinct) == 1:
                # the job's own value where it is not the members' (stragglers are found across members): the
                # one its conditions read, never "same on every member" for a value no condition saw
                own = [i for i in super()._evidence([path], ctx)[:1] if i.get("value") is not None]
                same = distinct == {json.dumps(_trim(own[0]["value"]), sort_keys=True, default=str)} if own else True
                items += [self._shared_item(path, values)] if same else [{**i, "rule": "job"} for i in own]
            else:
                for host, value in values.items():
                    item = {"fact": path, "host": host, "value": _trim(value), "rule": "per member"}
                    items.append({**item, "source": self._member_source(host, path)})
        return items + super()._evidence([], ctx)

    def _shared_item(self, path: str, values: dict[str, Any]) -> dict[str, Any]:
        """One value for the members that hold the fact. "Same on every member" only when every member of the
        job holds it: one member's empty list is not the others' (their collector failed, or they were not
        reached), so a partial agreement names who holds it and who did not report it."""
        held_by = list(values)
        not_reported = [h for h in self.member_runs if h not in values]
        sources = [s for h in held_by if (s := self._member_source(h, path))]
        item: dict[str, Any] = {
            "fact": path,
            "value": _trim(next(iter(values.values()))),
            "held_by": held_by,
            "rule": HELD_BY_SOME if not_reported else SAME_ON_EVERY_MEMBER,
            "source": ", ".join(sources) or None,
        }
        if not_reported:
            item["not_reported_by"] = not_reported
        return item

    def _job_table(self) -> dict[str, Any]:
        """The job's members: each one's role under the job's verdict (from the verdict's declared
        ``implicates``) and the facts that differ between them."""
        verdict = self.run.verdict
        evidence = (verdict or {}).get("evidence", [])
        paths = [p for p in evidence if "host" in p]
        implicated = (verdict or {}).get("implicated")
        members = []
        for host, run in self.member_runs.items():
            members.append(
                {
                    "host": host,
                    "status": run.status,
                    "role": role(run.status, verdict, host),
                    "facts": {p["fact"]: p["value"] for p in paths if p["host"] == host},
                }
            )
        return {
            "members": members,
            "implicated": implicated,
            "not_implicated": (verdict or {}).get("not_implicated"),
            "differing_facts": list(dict.fromkeys(p["fact"] for p in paths)),
            "facts": job_facts(evidence),
        }


def job_facts(evidence: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The job's facts as the verdict cites them, each with its rule: one value the members share (and who
    holds it), each member's own value, or a fact of the job itself (derived from the members)."""
    facts: dict[str, dict[str, Any]] = {}
    for item in evidence:
        if item.get("rule") is None:
            continue  # a condition the walk took, not a fact
        entry = facts.setdefault(item["fact"], {"fact": item["fact"], "rule": item["rule"]})
        if item["rule"] == "per member":
            entry.setdefault("values", {})[item["host"]] = item["value"]
        else:
            entry["value"] = item["value"]
            for key in ("held_by", "not_reported_by"):
                if item.get(key):
                    entry[key] = item[key]
    return list(facts.values())


def held_where(item: dict[str, Any]) -> str:
    """Where a job's cited fact was read, for prose after the fact's name: "" (the job's own, or the same on
    every member), " on HOST" (one member's value), " on A only (B did not report it)" (the members that
    reported it agree, the others gave nothing to compare)."""
    if isinstance(item.get("host"), str):
        return f" on {item['host']}"
    missing = [h for h in item.get("not_reported_by") or [] if isinstance(h, str)]
    if item.get("rule") != HELD_BY_SOME or not missing:
        return ""
    held = ", ".join(h for h in item.get("held_by") or [] if isinstance(h, str)) or "no member"
    return f" on {held} only ({', '.join(missing)} did not report it)"


@functools.lru_cache(maxsize=8)
def names_pattern(names: tuple[str, ...]) -> re.Pattern[str]:
    """One pattern for every host name as a whole word, longest first, compiled once per set of names
    (a run's hosts in status updates)."""
    alternatives = "|".join(re.escape(n) for n in sorted(names, key=len, reverse=True)) or r"(?!)"
    return re.compile(rf"(?<![\w.-])(?:{alternatives})(?![\w-])")


def role(status: str, verdict: dict[str, Any] | None, host: str) -> str:
    """A member's role under the job's verdict: ``act on: <action>`` (it is implicated), ``not implicated``,
    ``whole job: <action>`` (the runbook declares the action is for the job, ``implicates: "[]"``), ``healthy``,
    or ``no verdict``. A verdict whose declared members are none of the job's leaves every member not implicated
    (the host to act on is outside the job given, e.g. a node NCCL RAS names by address)."""
    implicated = (verdict or {}).get("implicated")
    if verdict is not None and status != "ok" and host in (implicated or []):
        return f"act on: {verdict['action']} ({status})"  # the member that could not be reached is the one to act on
    if status != "ok" or verdict is None:
        return "no verdict" + (f" ({status})" if status != "ok" else "")
    if verdict["severity"] == "ok" and not implicated:
        return "healthy"
    action = verdict["action"]
    if implicated is None:
        return f"not determined (the verdict names no members): {action}"
    if verdict.get("whole_job"):
        return f"whole job: {action}"
    if host in implicated:
        return f"act on: {action}" if action != "none" else "implicated"
    return "not implicated"
