"""From "this node has Xid 79" to "the evidence bundle is on disk", through the real alerting path.

`nightowl check` runs on a node whose nvidia-smi and kernel log are stand-ins serving the recorded
incident fixtures/hosts/xid79-fallen-off-bus, and writes its textfile; node-exporter serves it,
Prometheus evaluates deploy/prometheus's rules (GpuXidNeedsAction), Alertmanager routes by
deploy/prometheus/alertmanager.yml to `nightowl serve`, whose rule (deploy/prometheus/nightowl-serve.yml)
runs the xid runbook on the node the alert names.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

import pytest

from tests.fleet.daemons import wait_for
from tests.fleet.prometheus_stack import ROOT, PrometheusStack, nightowl_argv
from tests.fleet.standin import StandinNode

# Starts Prometheus, Alertmanager and node-exporter: `pytest -m "not integration"` leaves it out.
pytestmark = pytest.mark.integration

XID79 = ROOT / "fixtures" / "hosts" / "xid79-fallen-off-bus"


def run_check(node: StandinNode, textfile: Path, out: Path, node_name: str) -> tuple[int, dict]:
    env = {**os.environ, "PATH": node.path(), "NODE_NAME": node_name}
    argv = [*nightowl_argv(), "check", "--format", "json", "--out", str(out), "--textfile", str(textfile)]
    result = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=60)
    return result.returncode, json.loads(result.stdout)


def test_xid79_on_a_node_ends_as_a_bundle_for_that_node(prometheus_stack: PrometheusStack, tmp_path: Path) -> None:
    stack = prometheus_stack
    started = time.monotonic()
    node = StandinNode(tmp_path / "node", XID79)
    rc, report = run_check(node, stack.textfiles / "gpu-node.prom", tmp_path / "check-bundles", "gpu-17")
    assert rc == 1, report
    host = report["hosts"][0]["host"]
    assert host == "gpu-17"  # NODE_NAME, as the DaemonSet's downward API sets it
    assert report["hosts"][0]["verdict"]["id"] == "gpu-fell-off-bus"
    node.copy_recording(host, stack.recorded)  # what `serve` finds when it "connects" to the node

    series = wait_for(
        "Prometheus to scrape the verdict",
        lambda: stack.query('nightowl_host_verdict_info{verdict="gpu-fell-off-bus"}'),
        60,
        stack.daemons,
    )
    assert series[0]["metric"]["host"] == host
    captured = wait_for(
        "serve to capture the alert",
        lambda: [c for c in stack.captures() if c["status"] in ("captured", "failed")],
        90,
        stack.daemons,
    )
    elapsed = time.monotonic() - started
    print(f"\nXid 79 textfile -> bundle on disk: {elapsed:.1f} s")

    capture = captured[0]
    assert (capture["status"], capture["alert"], capture["runbook"], capture["host"]) == (
        "captured",
        "GpuXidNeedsAction",
        "xid",
        host,
    ), capture
    bundle = Path(capture["bundle"])
    assert (bundle / "hosts" / host / "kernel-log.out").read_text() == (XID79 / "kernel-log.out").read_text()
    verdicts = json.loads((bundle / "verdicts.json").read_text())
    assert [(h["host"], h["verdict"]["id"]) for h in verdicts["hosts"]] == [(host, "gpu-fell-off-bus")]
    manifest = json.loads((bundle / "manifest.json").read_text())
    assert manifest["alert"]["labels"]["host"] == host
    assert manifest["alert"]["labels"]["nightowl_runbook"] == "xid"


def test_a_fleet_of_textfiles_is_one_series_per_node(prometheus_stack: PrometheusStack, tmp_path: Path) -> None:
    stack = prometheus_stack
    names = ["gpu-18", "gpu-19", "gpu-20"]
    for name in names:
        node = StandinNode(tmp_path / name, ROOT / "fixtures" / "hosts" / "healthy-l40s")
        rc, _ = run_check(node, stack.textfiles / f"{name}.prom", tmp_path / "bundles", name)
        assert rc == 0

    def healthy_hosts() -> list[str] | None:
        series = stack.query('nightowl_host_verdict_info{verdict="healthy"}')
        hosts = sorted(s["metric"]["host"] for s in series)
        return hosts if set(names) <= set(hosts) else None

    hosts = wait_for("Prometheus to scrape every node's textfile", healthy_hosts, 60, stack.daemons)
    assert [h for h in hosts if h in names] == names  # one series per node, none collapsed
