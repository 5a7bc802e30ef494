"""A real HTTP server on 127.0.0.1 serves recorded scrapes; the metrics collector reads them with curl
through the local transport, and two takes a window apart feed the p99 comparison."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from typing import Any

import pytest

from nightowl.collectors.serving import metrics as prometheus
from nightowl.collectors.serving.metrics_window import derive
from nightowl.engine.runner import RunOptions, collect_on
from nightowl.transports.base import CommandResult
from nightowl.transports.local import LocalTransport
from tests.helpers import ROOT, loopback_http

HOST = ROOT / "fixtures" / "hosts" / "p99-vllm-queue-growth"

pytestmark = pytest.mark.skipif(shutil.which("curl") is None, reason="curl is not installed")


class NoRecorder:
    def record_command(self, host: str, kind: str, result: CommandResult, keep_output: bool) -> str | None:
        return None


class Scrapes:
    """Hands out the recorded scrapes in order, the last one again once they run out."""

    def __init__(self, texts: list[str]) -> None:
        self.texts = texts
        self.served = 0

    def next(self) -> str:
        text = self.texts[min(self.served, len(self.texts) - 1)]
        self.served += 1
        return text


@pytest.fixture
def server() -> Iterator[tuple[str, Scrapes]]:
    scrapes = Scrapes([(HOST / "metrics.1.out").read_text(), (HOST / "metrics.2.out").read_text()])

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 - http.server's name
            if self.path != "/metrics":
                self.send_error(404)
                return
            body = scrapes.next().encode()
            self.send_response(200)
            self.send_header("Content-Type", "text/plain; version=0.0.4")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            return None

    with loopback_http(Handler) as url:
        yield url, scrapes


def scrape(url: str) -> Any:
    options = RunOptions(params={"metrics_url": url})
    return collect_on(LocalTransport(), prometheus.COLLECTOR, NoRecorder(), options)


def test_collector_scrapes_over_http(server: tuple[str, Scrapes]) -> None:
    url, scrapes = server
    run = scrape(url + "/metrics")
    assert run.status == "ok", run.reason
    assert run.attempts[0].argv == ("curl", "-sS", "--fail", "--max-time", "5", "--", url + "/metrics")
    queue = run.facts["histograms"]["queue"]
    assert queue["buckets"][0] == [0.3, 291.0] and queue["buckets"][-1] == [30.0, 293.0]
    assert run.facts["engine"] == "vllm" and scrapes.served == 1


def test_two_takes_a_window_apart_feed_the_comparison(server: tuple[str, Scrapes]) -> None:
    url, _ = server
    before, after = scrape(url + "/metrics"), scrape(url + "/metrics")
    facts = derive({"metrics": before.facts, "metrics_after": after.facts})
    # 45 requests in the window, 30 of them queued 2.5-10 s against a history of 291 of 293 under 0.3 s
    assert facts["requests_in_window"] == 45 and facts["dominant"] == "queue" and facts["engine_moved"]


def test_http_error_is_a_failed_collection(server: tuple[str, Scrapes]) -> None:
    url, _ = server
    run = scrape(url + "/not-metrics")
    assert run.status == "error" and run.attempts[0].rc == 22  # curl --fail on HTTP 404


def test_unset_url_skips_the_collector() -> None:
    run = collect_on(LocalTransport(), prometheus.COLLECTOR, NoRecorder(), RunOptions(params={}))
    assert run.status == "skipped" and "metrics_url" in (run.reason or "")


def test_p99_runbook_live_over_loopback(server: tuple[str, Scrapes], tmp_path: Any) -> None:
    from nightowl.collectors import get_collector
    from nightowl.engine.session import run_runbook
    from nightowl.library import runbooks

    url, scrapes = server
    loaded = runbooks.load("p99-regression")
    params = {k: p.default for k, p in loaded.runbook.parameters.items()}
    params.update(metrics_url=url + "/metrics", window_seconds=0)
    runs, bundle = run_runbook(loaded, {"local": LocalTransport}, get_collector, RunOptions(params=params), tmp_path)
    assert runs[0].verdict is not None and runs[0].verdict["id"] == "load-increase"
    assert scrapes.served == 2
    recorded = bundle / "hosts" / "local"
    assert (recorded / "metrics.1.out").exists() and (recorded / "metrics.2.out").exists()
