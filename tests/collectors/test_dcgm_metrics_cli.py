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
