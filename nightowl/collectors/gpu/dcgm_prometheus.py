"""One node's dcgm-exporter series over a window, from Prometheus (`triage --prometheus URL --node NAME`).

The command is a read-only GET of Prometheus' HTTP API, ``/api/v1/query_range``
(https://prometheus.io/docs/prometheus/latest/querying/api/#range-queries), asking for every ``DCGM_*`` and
1.x ``dcgm_*`` series whose node label is NAME, plus ``time()`` labelled ``nightowl="query_time"``: its last
point is the window's end, so a series that stopped (the exporter gone, a field no longer exported) shows
as older than the end, and the distance between two of its points is the step. The node label is
dcgm-exporter's ``Hostname`` (up to 4.8.2) or ``hostname`` (4.8.3+) unless ``--node-label`` names the one a
site relabels to (``node``, ``instance`` ...).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlencode

from nightowl.collectors.serving.metrics import Sample

NODE_LABELS = ("Hostname", "hostname")
MARKER = "nightowl"  # label of the time() series that carries the window's end
STALE_AFTER_STEPS = 2  # a series whose last point is more than two scrape intervals old has stopped


def _quoted(value: str) -> str:
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def query(node: str, node_label: str | None = None) -> str:
    """The PromQL of one node's DCGM series and the window's clock."""
    names = '__name__=~"DCGM_.+|dcgm_.+"'
    selectors = [f"{{{names},{label}={_quoted(node)}}}" for label in ((node_label,) if node_label else NODE_LABELS)]
    clock = f'label_replace(vector(time()), "{MARKER}", "query_time", "", "")'
    return " or ".join([*selectors, clock])


def query_range_url(base_url: str, node: str, since_s: float, step_s: float, end: float, node_label: str | None) -> str:
    """The GET that reads the window ``end - since_s`` .. ``end`` at ``step_s`` (the scrape interval)."""
    params = {"query": query(node, node_label), "start": f"{end - since_s:.3f}", "end": f"{end:.3f}"}
    params["step"] = f"{step_s:g}"
    return f"{base_url.rstrip('/')}/api/v1/query_range?{urlencode(params)}"


@dataclass
class Window:
    """What a query_range answer held: the last sample of each series, and when each series last had one."""

    samples: list[Sample] = field(default_factory=list)
    last_seen: list[float] = field(default_factory=list)  # per sample: the time of its series' last point
    moved: list[bool] = field(default_factory=list)  # per sample: its series changed inside the window
    rise: list[float] = field(default_factory=list)  # per sample: how much its series grew since the window start
    start: float | None = None
    end: float | None = None
    step: float | None = None
    warnings: list[str] = field(default_factory=list)

    def stale(self, index: int) -> bool:
        if self.end is None or self.step is None:
            return False
        return self.end - self.last_seen[index] > STALE_AFTER_STEPS * self.step


def is_answer(text: str) -> bool:
    """Whether ``text`` is a Prometheus API answer (JSON) rather than an exporter's scrape."""
    return text.lstrip().startswith("{")


def read_answer(text: str) -> Window:
    """A query_range (or instant query) answer -> the window; what it cannot read becomes a warning."""
    window = Window()
    try:
        answer = json.loads(text)
    except ValueError as exc:
        window.warnings.append(f"not a Prometheus API answer: {exc}")
        return window
    if not isinstance(answer, dict) or answer.get("status") != "success":
        error = answer.get("error") if isinstance(answer, dict) else None
        window.warnings.append(f"Prometheus answered an error: {error or str(answer)[:200]}")
        return window
    result = (answer.get("data") or {}).get("result") or []
    # the clock first: a counter's rise needs the window's start, wherever Prometheus put the clock series
    for series in sorted(result, key=lambda s: not (isinstance(s, dict) and _is_clock(s))):
        _read_series(series, window)
    return window


def _is_clock(series: dict[str, Any]) -> bool:
    metric = series.get("metric")
    return isinstance(metric, dict) and metric.get(MARKER) == "query_time"


def _read_series(series: Any, window: Window) -> None:
    metric = series.get("metric") if isinstance(series, dict) else None
    points = _points(series)
    if not isinstance(metric, dict) or not points:
        return
    if metric.get(MARKER) == "query_time":
        window.start, window.end = points[0][0], points[-1][0]
        steps = [b[0] - a[0] for a, b in zip(points, points[1:], strict=False) if b[0] > a[0]]
        window.step = min(steps) if steps else None
        return
    name = str(metric.get("__name__") or "")
    if not name:
        window.warnings.append(f"a series without a name: {metric}")
        return
    labels = {str(k): str(v) for k, v in metric.items() if k != "__name__"}
    values = [v for _, v in points]
    window.samples.append(Sample(name, labels, values[-1]))
    window.last_seen.append(points[-1][0])
    window.moved.append(any(v != values[0] for v in values if math.isfinite(v)))
    window.rise.append(_rise(points, window.start))


def _rise(points: list[tuple[float, float]], start: float | None) -> float:
    """How much a counter grew inside the window, as Prometheus' increase() reads a reset (a drop starts the count
    again from 0). A series that first appears after the window start counts from 0: dcgm-exporter prints a
    per-code Xid total only once that code has been seen (NVIDIA/dcgm-exporter README, cumulative XID counters)."""
    values = [v for _, v in points if math.isfinite(v)]
    if not values:
        return 0.0
    appeared = start is not None and points[0][0] > start
    grown = values[0] if appeared else 0.0
    for before, after in zip(values, values[1:], strict=False):
        grown += after - before if after >= before else after
    return grown


def _points(series: Any) -> list[tuple[float, float]]:
    raw = series.get("values") or ([series["value"]] if series.get("value") else [])
    points = []
    for item in raw:
        try:
            points.append((float(item[0]), float(item[1])))
        except (TypeError, ValueError, IndexError):
            continue
    return points
