"""`triage RUNBOOK --prometheus URL --node NAME` (a node judged from its dcgm-exporter series in Prometheus alone)
and `triage RUNBOOK --dcgm NAME=URL` (from its exporter's /metrics, read from here).

Each ``--node`` becomes a member reached over HTTP from this machine (nightowl/transports/http.py, as
``--replica``): the one command it answers is the `dcgm-metrics` GET of Prometheus' ``query_range`` for the
node's DCGM series over ``--since`` (nightowl/collectors/gpu/dcgm_prometheus.py), at ``--scrape-interval``
steps. ``--dcgm NAME=URL`` reaches the exporter itself the same way: its one command is the GET of URL
(``dcgm_url``). What needs the node (kernel log, nvidia-smi) is refused and reported as not read, so a verdict
says what it could not see, and a node whose DCGM reports no health ends "cannot judge".
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from nightowl.cli.common import fail
from nightowl.transports.base import Transport, TransportError

QUERY_PARAM = "dcgm_prometheus_query"
DEFAULT_SINCE = "1h"
DEFAULT_STEP = 30.0  # dcgm-exporter's default collection interval (30000 ms)


@dataclass(frozen=True)
class PrometheusNodes:
    url: str
    nodes: tuple[str, ...]
    node_label: str | None
    since_s: float
    step_s: float


def prometheus_nodes(
    url: str | None, nodes: tuple[str, ...], node_label: str | None, since: str | None, step: float | None
) -> PrometheusNodes | None:
    """The checked options, or None without ``--prometheus``; a bad combination is a usage error (exit 2)."""
    from nightowl.ages import parse_age
    from nightowl.transports.http import check_base_url

    if url is None:
        if nodes or node_label or since or step:
            fail("--node, --node-label, --since and --scrape-interval go with --prometheus URL")
        return None
    if not nodes:
        fail("--prometheus needs at least one --node NAME (the node label's value)")
    try:
        base = check_base_url(url)
    except TransportError as exc:
        fail(f"--prometheus: {exc}")
    since_s = parse_age(since or DEFAULT_SINCE)
    if since_s is None or since_s <= 0:
        fail(f"--since: not an age (30m, 2h, 1d): {since!r}")
    step_s = DEFAULT_STEP if step is None else step
    if step_s <= 0 or step_s > since_s:
        fail(f"--scrape-interval: {step_s:g} s does not fit the window of {since_s:g} s")
    if len(set(nodes)) != len(nodes):
        fail("--node: a node is given twice")
    return PrometheusNodes(base, tuple(nodes), node_label, since_s, step_s)


def transports_of(spec: PrometheusNodes) -> dict[str, Callable[[], Transport]]:
    """Node -> the function opening its HTTP transport to Prometheus."""
    from nightowl.transports.http import HttpTransport

    def opener(node: str) -> Callable[[], Transport]:
        return lambda: HttpTransport(node, spec.url, via="--prometheus")

    return {node: opener(node) for node in spec.nodes}


def with_query(params: dict[str, Any], spec: PrometheusNodes, now: float | None = None) -> dict[str, Any]:
    """``dcgm_prometheus_query`` as the mapping node -> its query_range URL, all over one window."""
    from nightowl.collectors.gpu.dcgm_prometheus import query_range_url

    end = time.time() if now is None else now
    urls = {n: query_range_url(spec.url, n, spec.since_s, spec.step_s, end, spec.node_label) for n in spec.nodes}
    given = params.get(QUERY_PARAM)
    if given is not None:
        fail(f"--param {QUERY_PARAM} is set by --prometheus; give --node instead")
    return {**params, QUERY_PARAM: urls}


def exporter_urls(pairs: tuple[str, ...]) -> dict[str, str]:
    """``--dcgm NAME=URL`` pairs -> name -> the exporter's metrics URL; a bad pair is a usage error (exit 2)."""
    from nightowl.transports.http import check_base_url

    urls: dict[str, str] = {}
    for pair in pairs:
        name, sep, url = pair.partition("=")
        if not sep or not name.strip() or not url.strip():
            fail(f"--dcgm expects NAME=URL (e.g. gpu-17=http://10.0.0.17:9400/metrics), got {pair!r}")
        if name.strip() in urls:
            fail(f"--dcgm: {name.strip()} is given twice")
        try:
            urls[name.strip()] = check_base_url(url)
        except TransportError as exc:
            fail(f"--dcgm {name.strip()}: {exc}")
    return urls


def exporter_transports(urls: dict[str, str]) -> dict[str, Callable[[], Transport]]:
    """Name -> the function opening its HTTP transport to the exporter (the metrics URL is all it may GET)."""
    from nightowl.transports.http import HttpTransport

    def opener(name: str, url: str) -> Callable[[], Transport]:
        return lambda: HttpTransport(name, url, via="--dcgm")

    return {name: opener(name, url) for name, url in urls.items()}


def with_exporter_urls(params: dict[str, Any], urls: dict[str, str], others: list[str]) -> dict[str, Any]:
    """``dcgm_url`` as the mapping name -> URL; a dcgm_url given too stays the value of the other hosts."""
    given = params.get("dcgm_url")
    mapping = dict(given) if isinstance(given, dict) else {n: given for n in others if given}
    return {**params, "dcgm_url": {**mapping, **urls}}


def add_members(
    transports: dict[str, Callable[[], Transport]],
    params: dict[str, Any],
    nodes: PrometheusNodes | None,
    exporters: dict[str, str],
) -> dict[str, Any]:
    """The ``--prometheus`` nodes and ``--dcgm`` exporters added to ``transports`` (in place), and the run's
    parameters with their queries and URLs; a name given two ways is a usage error (exit 2)."""
    if nodes is not None:
        clash = sorted(set(transports) & set(nodes.nodes))
        if clash:
            fail(f"--node {clash[0]}: that name is also a --host, --replay or --replica")
        transports.update(transports_of(nodes))
        params = with_query(params, nodes)
    if exporters:
        clash = sorted(set(transports) & set(exporters))
        if clash:
            fail(f"--dcgm {clash[0]}: that name is also given another way")
        params = with_exporter_urls(params, exporters, list(transports))
        transports.update(exporter_transports(exporters))
    return params
