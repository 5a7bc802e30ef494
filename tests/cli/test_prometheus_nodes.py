"""`triage --prometheus URL --node NAME` options (issue 47): what they refuse, and the query they build."""

from __future__ import annotations

from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import pytest
from click.testing import CliRunner

from nightowl.cli import prometheus_nodes
from nightowl.cli.main import main
from nightowl.transports.http import HttpTransport


@pytest.mark.parametrize(
    "args, says",
    [
        (["--node", "gpu-17"], "go with --prometheus"),
        (["--prometheus", "http://prom:9090"], "at least one --node"),
        (["--prometheus", "file:///etc/passwd", "--node", "gpu-17"], "http"),
        (["--prometheus", "http://prom:9090", "--node", "gpu-17", "--since", "soon"], "not an age"),
        (["--prometheus", "http://prom:9090", "--node", "n", "--since", "1m", "--scrape-interval", "120"], "window"),
        (["--prometheus", "http://prom:9090", "--node", "a", "--node", "a"], "twice"),
        (["--prometheus", "http://prom:9090", "--node", "a", "--param", "dcgm_prometheus_query=http://x"], "set by"),
    ],
)
def test_bad_prometheus_options_are_usage_errors(args: list[str], says: str, tmp_path: Path) -> None:
    result = CliRunner().invoke(main, ["triage", "xid", *args, "--out", str(tmp_path), "--history", "off"])
    assert result.exit_code == 2, result.output
    assert says in result.output


def test_each_node_gets_its_own_query_over_one_window() -> None:
    spec = prometheus_nodes.prometheus_nodes("http://prom:9090/", ("gpu-17", "gpu-18"), "node", "2h", 15.0)
    assert spec is not None
    params = prometheus_nodes.with_query({"since": None}, spec, now=10_000.0)
    urls = params["dcgm_prometheus_query"]
    assert set(urls) == {"gpu-17", "gpu-18"}
    query = parse_qs(urlsplit(urls["gpu-17"]).query)
    assert query["start"] == ["2800.000"] and query["end"] == ["10000.000"] and query["step"] == ["15"]
    assert 'node="gpu-17"' in query["query"][0] and "Hostname" not in query["query"][0]
    assert urls["gpu-17"].startswith("http://prom:9090/api/v1/query_range?")


def test_what_needs_the_node_is_refused_over_prometheus_and_says_so() -> None:
    result = HttpTransport("gpu-17", "http://127.0.0.1:9", via="--prometheus").run(("nvidia-smi", "-q"), 1.0)
    assert result.rc is None and result.error is not None and result.error.startswith("refused over --prometheus")


@pytest.mark.parametrize("pair, says", [("gpu-17", "NAME=URL"), ("gpu-17=ftp://x/metrics", "http")])
def test_bad_dcgm_pairs_are_usage_errors(pair: str, says: str, tmp_path: Path) -> None:
    result = CliRunner().invoke(main, ["triage", "xid", "--dcgm", pair, "--out", str(tmp_path), "--history", "off"])
    assert result.exit_code == 2 and says in result.output


def test_a_node_judged_from_its_exporters_url_alone(tmp_path: Path) -> None:
    """`--dcgm NAME=URL`: the exporter's /metrics GET from here (a loopback stand-in serving the Xid 79 scrape)."""
    import json
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    body = (Path(__file__).resolve().parents[2] / "fixtures/dcgm/derived/xid79-t4.prom").read_bytes()
    asked: list[str] = []

    class Exporter(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 - http.server's name
            asked.append(self.path)
            self.send_response(200)
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            return None

    server = ThreadingHTTPServer(("127.0.0.1", 0), Exporter)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/metrics"
        args = ["triage", "xid", "--dcgm", f"gpu-17={url}", "--format", "json", "--out", str(tmp_path)]
        result = CliRunner().invoke(main, [*args, "--history", "off"])
    finally:
        server.shutdown()
    assert result.exit_code == 1, result.output
    (host,) = json.loads(result.stdout)["hosts"]
    assert host["verdict"]["id"] == "gpu-fell-off-bus" and "kernel log not read" in host["verdict"]["summary"]
    assert asked == ["/metrics"]  # the one GET; nothing else was asked of the exporter
