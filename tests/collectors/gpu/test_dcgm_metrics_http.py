"""`dcgm-metrics` read from the exporter's own /metrics over real HTTP (issue 47): an exporter that answers its
GET with another status than 200 is a blind monitor, "cannot judge: DCGM is not reporting health" (exit 3), as
the other blind cases, not a failed command with curl's generic text; a 200 is read as before.

A loopback stand-in answers as dcgm-exporter does when it cannot gather from DCGM: NVIDIA/dcgm-exporter
internal/pkg/server/server.go@d5e5f51 (``Metrics``: a ``Gather()`` error is ``http.Error(w, "internal server
error", http.StatusInternalServerError)``, with ``X-Content-Type-Options: nosniff``)."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from nightowl.collectors.gpu import dcgm_metrics
from nightowl.engine.runner import RunOptions, collect_on
from nightowl.transports.base import CommandResult
from nightowl.transports.local import LocalTransport
from tests.helpers import facts_of, loopback_http

ROOT = Path(__file__).resolve().parents[3]
XID79 = (ROOT / "fixtures/dcgm/derived/xid79-t4.prom").read_bytes()
EXPORTER_500 = (500, b"internal server error\n")  # http.Error adds the newline


class Exporter:
    """What the stand-in answers: a status and a body, and the paths it was asked for."""

    def __init__(self) -> None:
        self.status, self.body = 200, XID79
        self.asked: list[str] = []


@pytest.fixture
def exporter() -> Iterator[tuple[str, Exporter]]:
    state = Exporter()

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 - http.server's name
            state.asked.append(self.path)
            self.send_response(state.status)
            self.send_header("Content-Type", "text/plain; charset=utf-8")
            self.send_header("X-Content-Type-Options", "nosniff")
            self.send_header("Content-Length", str(len(state.body)))
            self.end_headers()
            self.wfile.write(state.body)

        def log_message(self, *args: Any) -> None:
            return None

    with loopback_http(Handler) as url:
        yield f"{url}/metrics", state


def triage(runbook: str, url: str, out: Path) -> Any:
    from nightowl.cli.main import main

    args = ["triage", runbook, "--dcgm", f"gpu-17={url}", "--format", "json", "--out", str(out), "--history", "off"]
    return CliRunner().invoke(main, args)


@pytest.mark.parametrize("runbook", ["xid", "node-health"])
def test_an_http_500_from_the_exporter_is_dcgm_not_reporting_health(
    runbook: str, exporter: tuple[str, Exporter], tmp_path: Path
) -> None:
    url, state = exporter
    state.status, state.body = EXPORTER_500
    result = triage(runbook, url, tmp_path)
    assert result.exit_code == 3, result.output
    (host,) = json.loads(result.stdout)["hosts"]
    assert host["verdict"] is None and host["path"][-1] == "dcgm-blind"
    error = host["error"]
    # the wording of every blind-monitor end (runbooks/fragments/xid-judgement.yaml dcgm-blind), with the status
    assert error.startswith("cannot judge (dcgm-blind): cannot judge: DCGM is not reporting health (")
    assert "(dcgm-exporter answered HTTP 500 instead of its metrics" in error
    assert "'internal server error'" in error
    assert "no collector returned evidence" not in error and "curl: (22)" not in error
    assert state.asked == ["/metrics"]


@pytest.mark.parametrize("runbook", ["xid", "node-health"])
def test_a_200_from_the_exporter_is_still_judged(runbook: str, exporter: tuple[str, Exporter], tmp_path: Path) -> None:
    url, _ = exporter
    result = triage(runbook, url, tmp_path)
    assert result.exit_code == 1, result.output
    (host,) = json.loads(result.stdout)["hosts"]
    assert host["verdict"]["id"] == "gpu-fell-off-bus"


class NoRecorder:
    def record_command(self, host: str, kind: str, result: CommandResult, keep_output: bool) -> str | None:
        return None


def read_with_curl(url: str) -> Any:
    """The collector's own command run by curl through the local transport (``--param dcgm_url`` on a host)."""
    return collect_on(LocalTransport(), dcgm_metrics.COLLECTOR, NoRecorder(), RunOptions(params={"dcgm_url": url}))


@pytest.mark.skipif(shutil.which("curl") is None, reason="curl is not installed")
@pytest.mark.parametrize(("status", "body"), [EXPORTER_500, (404, b"404 page not found\n"), (503, b"")])
def test_curl_reads_a_non_200_answer_as_a_blind_monitor(
    status: int, body: bytes, exporter: tuple[str, Exporter]
) -> None:
    url, state = exporter
    state.status, state.body = status, body
    run = read_with_curl(url)
    assert run.status == "ok", run.reason
    facts = run.facts
    assert facts["health_reporting"] is False and facts["gpus"] == []
    assert facts["blind_reason"].startswith(f"dcgm-exporter answered HTTP {status} instead of its metrics")
    assert facts["dcgm_errors"][0]["line"].startswith(f"HTTP {status}")


@pytest.mark.skipif(shutil.which("curl") is None, reason="curl is not installed")
def test_curl_reads_a_200_scrape_to_the_same_facts_as_the_saved_one(exporter: tuple[str, Exporter]) -> None:
    url, _ = exporter
    run = read_with_curl(url)
    assert run.status == "ok", run.reason
    assert run.attempts[-1].stdout.rstrip().endswith("# nightowl: HTTP 200")  # curl wrote the status after the body
    saved = facts_of("dcgm-metrics", XID79.decode())
    read = {k: run.facts[k] for k in saved if k != "coverage"}  # the engine adds truncation and normalising marks
    assert read == {k: v for k, v in saved.items() if k != "coverage"}
    assert run.facts["health_reporting"] is True and run.facts["fallen_off_bus_gpus"]
    assert run.facts["coverage"]["unread"] == []  # the status line is a known shape, not an unread line


def test_the_status_line_is_read_and_taken_off() -> None:
    text = XID79.decode()
    assert dcgm_metrics.http_status(text + "\n# nightowl: HTTP 200\n") == (text, 200)
    assert dcgm_metrics.http_status(text) == (text, None)  # a saved scrape without it reads as before
    assert dcgm_metrics.shows_nothing("\n# nightowl: HTTP 200\n")  # an empty 200: no telemetry (no_data)
    assert not dcgm_metrics.shows_nothing("\n# nightowl: HTTP 500\n")  # an empty 500: the monitor's answer
