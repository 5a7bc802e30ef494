"""A sweep as a node-exporter textfile (https://github.com/prometheus/node_exporter#textfile-collector).

Written with prometheus_client (a registry, ``generate_latest`` and the atomic ``write_to_textfile``)
and named per Prometheus's conventions (https://prometheus.io/docs/practices/naming/): the verdict
series carries its labels in an ``_info`` metric, durations and times are in ``_seconds``, every
family has HELP and TYPE. One series per host (verdict, needs-action, Xid counts) plus sweep totals;
the recording and alert rules in deploy/prometheus/ read these names, so renaming a metric or a label
breaks them (tests/deploy/test_prometheus_rules.py and tests/fleet run them).
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

STATUSES = ("ok", "unreachable", "incomplete")


class SweepCollector:
    """A prometheus_client collector over one sweep summary (what `nightowl sweep --format json` prints)."""

    def __init__(self, summary: dict[str, Any], now: float | None = None, history: Path | None = None) -> None:
        self.summary = summary
        self.now = time.time() if now is None else now
        self.history = history  # the store the GPU incidents are read from (the command's; None: none)

    def collect(self) -> Iterator[Any]:
        from prometheus_client.core import GaugeMetricFamily, InfoMetricFamily

        runbook = str(self.summary["runbook"])
        hosts = self.summary["hosts"]
        verdict = InfoMetricFamily(
            "nightowl_host_verdict",
            "The verdict reached on a host by the last run (action: the first thing to do).",
            labels=["host", "runbook", "status", "verdict", "severity", "action"],
        )
        needs_action = GaugeMetricFamily(
            "nightowl_host_needs_action", "1 when the host's verdict action is not none.", labels=["host", "runbook"]
        )
        for h in hosts:
            v = h.get("verdict") or {}
            action = str(v.get("action", "unknown"))
            verdict.add_metric(
                [
                    str(h["host"]),
                    runbook,
                    str(h["status"]),
                    str(v.get("id", "none")),
                    str(v.get("severity", "unknown")),
                    action,
                ],
                {},
            )
            needs_action.add_metric([str(h["host"]), runbook], float(bool(v.get("action")) and action != "none"))
        yield verdict
        yield needs_action
        yield from self._xid_events(runbook)
        yield from gpu_incidents({str(h["host"]) for h in hosts}, self.history)
        yield from self._sweep(runbook, hosts)
        yield from self._breaker()

    def _breaker(self) -> Iterator[Any]:
        """The circuit breaker, when nightowl has an actions log: open (1) when it held an action inside
        the window, and the held actions counted. Nothing when the log cannot be read (no false 0)."""
        from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

        state = self.summary.get("breaker")
        if not state or state.get("open") is None:
            return
        opened = GaugeMetricFamily(
            "nightowl_breaker_open", "1 when the fleet circuit breaker held a scheduler action inside its window."
        )
        opened.add_metric([], float(bool(state["open"])))
        yield opened
        held = CounterMetricFamily("nightowl_actions_held", "Scheduler actions (drain, condition) the breaker held.")
        held.add_metric([], float(state["held_total"]))
        yield held

    def _xid_events(self, runbook: str) -> Iterator[Any]:
        from prometheus_client.core import GaugeMetricFamily

        xid_events = (self.summary.get("fleet") or {}).get("xid_events") or {}
        if not xid_events:
            return
        family = GaugeMetricFamily(
            "nightowl_xid_events",
            "Xid lines per code (SXid: code prefixed S) in the kernel log read.",
            labels=["host", "runbook", "code"],
        )
        for host, codes in xid_events.items():
            for code, count in sorted(codes.items()):
                family.add_metric([str(host), runbook, str(code)], float(count))
        yield family

    def _sweep(self, runbook: str, hosts: list[dict[str, Any]]) -> Iterator[Any]:
        from prometheus_client.core import GaugeMetricFamily

        counts = Counter(h["status"] for h in hosts)
        by_status = GaugeMetricFamily(
            "nightowl_sweep_hosts", "Hosts in the last sweep by status.", labels=["runbook", "status"]
        )
        for status in STATUSES:
            by_status.add_metric([runbook, status], float(counts.get(status, 0)))
        yield by_status
        duration = max((h.get("duration") or 0 for h in hosts), default=0)
        yield _gauge("nightowl_sweep_duration_seconds", "Longest host run of the last sweep.", runbook, float(duration))
        yield _gauge("nightowl_sweep_timestamp_seconds", "When the last sweep finished (Unix time).", runbook, self.now)


def gpu_incidents(hosts: set[str], path: Path | None = None) -> Iterator[Any]:
    """``nightowl_gpu_incidents_total{host,gpu,code,action}``: the distinct GPU incidents (Xid, SXid, off the
    bus; code 79 for the last) the history store holds, with the action of the run that first saw each. The
    same Xid seen by every hourly check of a boot counts once. Nothing when the store is off or unreadable."""
    from prometheus_client.core import CounterMetricFamily

    from nightowl.history import StoreError, query

    if path is None:
        return
    try:
        rows = [r for r in query.incidents_per_gpu(path) if r["host"] in hosts]
    except StoreError:
        return
    family = CounterMetricFamily(
        "nightowl_gpu_incidents",
        "Distinct GPU incidents (Xid, SXid, fallen off the bus) the history store holds, per GPU, code and action.",
        labels=["host", "gpu", "code", "action"],
    )
    for row in rows:
        family.add_metric([row["host"], row["gpu"], str(row["code"]), row["action"]], float(row["incidents"]))
    yield family


def _gauge(name: str, documentation: str, runbook: str, value: float) -> Any:
    from prometheus_client.core import GaugeMetricFamily

    family = GaugeMetricFamily(name, documentation, labels=["runbook"])
    family.add_metric([runbook], value)
    return family


def registry_for(summary: dict[str, Any], now: float | None = None, history: Path | None = None) -> Any:
    from prometheus_client import CollectorRegistry

    registry = CollectorRegistry(auto_describe=False)
    registry.register(SweepCollector(summary, now, history))
    return registry


def prometheus_textfile(summary: dict[str, Any], history: Path | None = None) -> str:
    """The text exposition format of the sweep (what --format prometheus prints); ``history``: the store
    the GPU incidents are read from."""
    from prometheus_client import generate_latest

    return generate_latest(registry_for(summary, history=history)).decode()


def write_textfile(path: Path, summary: dict[str, Any], history: Path | None = None) -> None:
    """Atomically (temp file + rename), so node-exporter never reads half a file."""
    from prometheus_client import write_to_textfile

    write_to_textfile(str(path), registry_for(summary, history=history))
