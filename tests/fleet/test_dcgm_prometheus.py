"""The xid and node-health runbooks from Prometheus alone (issue 47), on the real engine: Debian's Prometheus
scrapes stand-in dcgm-exporters (loopback HTTP servers) that serve recorded dcgm-exporter scrapes
(fixtures/dcgm/SOURCE.md), and `triage --prometheus URL --node NAME` judges each node from its series.

Cases: an Xid 79 seen only by DCGM (no kernel log, no nvidia-smi), a row-remap failure, a healthy node, an
exporter gone blind (its series stop) which must be "cannot judge", never healthy, and the cumulative Xid totals
(4.8.3+): an Xid counted before the window is not the window's, one whose total grows inside it is. The node is named by
dcgm-exporter's own Hostname label, or by a label the scrape config adds (`--node-label node`).
"""

from __future__ import annotations

import json
import shutil
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner

from nightowl.cli.main import main
from tests.fleet.daemons import LOOPBACK, Daemon, assert_loopback_only, free_port, http_get, wait_for

ROOT = Path(__file__).resolve().parents[2]
DCGM = ROOT / "fixtures" / "dcgm"
# stand-in exporter -> the scrape it serves first, and the `node` label the scrape config gives it
EXPORTERS = {
    "xid79": ("derived/xid79-t4.prom", "gpu-17"),
    "remap": ("derived/remap-failure-a30.prom", "gpu-18"),
    "healthy": ("datadog-t4.prom", "gpu-19"),
    "blinding": ("datadog-t4.prom", "gpu-20"),
    "totals": ("derived/xid-totals-t4.prom", "gpu-21"),
}


class StandIn:
    """A dcgm-exporter stand-in: GET /metrics answers the current scrape; ``stop()`` makes it answer 503."""

    def __init__(self, scrape: Path) -> None:
        self.body: bytes | None = scrape.read_bytes()
        stand_in = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 - http.server's name
                body = stand_in.body
                self.send_response(200 if body is not None else 503)
                self.send_header("Content-Type", "text/plain; version=0.0.4")
                self.end_headers()
                self.wfile.write(body or b"")

            def log_message(self, *args: Any) -> None:
                return None

        self.server = ThreadingHTTPServer((LOOPBACK, 0), Handler)
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def stop(self) -> None:
        self.body = None

    def serve(self, body: bytes) -> None:
        self.body = body


class Stack:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.exporters = {name: StandIn(DCGM / scrape) for name, (scrape, _) in EXPORTERS.items()}
        self.port = free_port()
        config = {
            "global": {"scrape_interval": "1s", "scrape_timeout": "1s"},
            "scrape_configs": [
                {
                    "job_name": f"dcgm-{name}",
                    "static_configs": [
                        {"targets": [f"{LOOPBACK}:{self.exporters[name].port}"], "labels": {"node": node}}
                    ],
                }
                for name, (_, node) in EXPORTERS.items()
            ],
        }
        (root / "prometheus.yml").write_text(yaml.safe_dump(config, sort_keys=False))
        argv = [
            "prometheus",
            f"--config.file={root / 'prometheus.yml'}",
            f"--storage.tsdb.path={root / 'data'}",
            f"--web.listen-address={LOOPBACK}:{self.port}",
            "--log.level=warn",
        ]
        self.daemon = Daemon("prometheus", argv, root)
        self.url = f"http://{LOOPBACK}:{self.port}"

    def query(self, promql: str) -> list[Any]:
        import urllib.parse

        answer = json.loads(http_get(f"{self.url}/api/v1/query?query={urllib.parse.quote(promql)}"))
        return list(answer["data"]["result"])

    def stop(self) -> None:
        self.daemon.stop()
        for exporter in self.exporters.values():
            exporter.server.shutdown()


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    if shutil.which("prometheus") is None:
        pytest.skip("not installed: prometheus (Debian package; scripts/test installs it)")
    running = Stack(tmp_path_factory.mktemp("dcgm-prometheus"))
    try:
        wait_for("prometheus ready", lambda: http_get(f"{running.url}/-/ready"), 30, [running.daemon])
        assert_loopback_only([running.daemon])
        wanted = {node for _, node in EXPORTERS.values()}
        wait_for(
            "every stand-in exporter scraped",
            lambda: {s["metric"]["node"] for s in running.query("DCGM_FI_DEV_XID_ERRORS")} >= wanted,
            60,
            [running.daemon],
        )
        yield running
    finally:
        running.stop()


def triage(stack: Stack, runbook: str, node: str, tmp_path: Path, *extra: str) -> tuple[int, dict[str, Any]]:
    args = ["triage", runbook, "--prometheus", stack.url, "--node", node, "--since", "5m", "--scrape-interval", "1"]
    result = CliRunner().invoke(main, [*args, *extra, "--format", "json", "--out", str(tmp_path), "--history", "off"])
    assert result.stdout.strip(), result.output
    return result.exit_code, json.loads(result.stdout)


@pytest.mark.integration
@pytest.mark.parametrize("runbook", ["xid", "node-health"])
def test_an_xid_79_seen_only_in_dcgm_by_the_exporters_own_hostname_label(
    stack: Stack, runbook: str, tmp_path: Path
) -> None:
    # the xid79 stand-in serves the T4 scrape whose Hostname is 424773df46e0: the default node label reads it
    code, report = triage(stack, runbook, "424773df46e0", tmp_path)
    (host,) = report["hosts"]
    assert code == 1, report
    assert host["verdict"]["id"] == "gpu-fell-off-bus" and host["verdict"]["action"] == "reboot-node"
    assert "kernel log not read" in host["verdict"]["summary"]


@pytest.mark.integration
def test_a_row_remap_failure_from_prometheus_by_a_relabelled_node_name(stack: Stack, tmp_path: Path) -> None:
    code, report = triage(stack, "node-health", "gpu-18", tmp_path, "--node-label", "node")
    (host,) = report["hosts"]
    assert code == 1, report
    assert host["verdict"]["id"] == "row-remap-failed"
    assert host["verdict"]["gpus"] == ["GPU-2d20791a-b4a6-ba59-97f1-e95b99fe5b49"]


@pytest.mark.integration
def test_a_healthy_node_from_prometheus_says_it_is_telemetry_only(stack: Stack, tmp_path: Path) -> None:
    code, report = triage(stack, "xid", "gpu-19", tmp_path, "--node-label", "node")
    (host,) = report["hosts"]
    assert code == 0, report
    assert host["verdict"]["id"] == "healthy" and "Telemetry only" in host["verdict"]["summary"]


@pytest.mark.integration
def test_an_exporter_gone_blind_is_cannot_judge_never_healthy(stack: Stack, tmp_path: Path) -> None:
    code, report = triage(stack, "xid", "gpu-20", tmp_path, "--node-label", "node")
    assert code == 0 and report["hosts"][0]["verdict"]["id"] == "healthy"  # while it answers
    stack.exporters["blinding"].stop()
    stopped = time.time()
    wait_for(
        "the blinded exporter's series to go stale",
        lambda: not stack.query('DCGM_FI_DEV_XID_ERRORS{node="gpu-20"}') and time.time() - stopped > 3,
        30,
        [stack.daemon],
    )
    code, report = triage(stack, "xid", "gpu-20", tmp_path, "--node-label", "node")
    (host,) = report["hosts"]
    assert code == 3, report
    assert host["verdict"] is None and "DCGM is not reporting health" in host["error"]


@pytest.mark.integration
def test_a_node_prometheus_has_no_series_of_is_cannot_judge(stack: Stack, tmp_path: Path) -> None:
    code, report = triage(stack, "xid", "gpu-99", tmp_path, "--node-label", "node")
    assert code == 3, report
    assert report["hosts"][0]["verdict"] is None


@pytest.mark.integration
def test_cumulative_xid_totals_judge_only_what_is_new_in_the_window(stack: Stack, tmp_path: Path) -> None:
    """gpu-21's exporter has counted Xid 13 twice and Xid 48 once since it started, before an 8 s window: the last
    Xid (13, an application's) is all the window shows. Then Xid 48 counts once more: a double-bit ECC Xid new in
    the window, which the last-value gauge (still 13) would hide, calls for a GPU reset."""
    wait_for(
        "gpu-21's totals older than the window",
        lambda: bool(stack.query('DCGM_EXP_XID_ERRORS_TOTAL{node="gpu-21"} offset 10s')),
        30,
        [stack.daemon],
    )
    code, report = triage(stack, "xid", "gpu-21", tmp_path, "--node-label", "node", "--since", "8s")
    (host,) = report["hosts"]
    assert host["path"][-1] == "dcgm-xid-app" and "48" not in host["verdict"]["summary"], report
    body = (DCGM / "derived/xid-totals-t4.prom").read_text().replace('xid="48"} 1', 'xid="48"} 2')
    stack.exporters["totals"].serve(body.encode())
    wait_for(
        "Xid 48 counted again",
        lambda: [s["value"][1] for s in stack.query('DCGM_EXP_XID_ERRORS_TOTAL{node="gpu-21",xid="48"}')] == ["2"],
        30,
        [stack.daemon],
    )
    code, report = triage(stack, "xid", "gpu-21", tmp_path, "--node-label", "node", "--since", "8s")
    (host,) = report["hosts"]
    assert code == 1, report
    assert host["verdict"]["action"] == "reset-gpu" and "Xids in its window: 48" in host["verdict"]["summary"]
