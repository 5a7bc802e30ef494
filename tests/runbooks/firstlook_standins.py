"""Loopback stand-in replicas of one vLLM service for the first-look runbook (127.0.0.1, http.server).

Each serves /health, /version, /v1/models, /metrics and a streamed /v1/completions. The /metrics
scrapes use vLLM's metric names and HELP texts (fixtures/corpus/serving: the v0.5 metric inventory
of functionary PR 263), the TTFT bucket bounds and starting counts of the bloom-560m scrape (IBM/vllm
PR 18) and the TPOT bounds and counts of the Qwen2.5-32B scrape (production-stack#318); each scrape
adds the requests of one window on top, so counters only grow unless the replica "restarts".
"""

from __future__ import annotations

import json
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

MODEL = "Qwen/Qwen2.5-Coder-32B-Instruct"
TTFT_BOUNDS = (0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08)
TTFT_START = (0, 0, 0, 112, 211, 211, 213)  # bloom-560m scrape, IBM/vllm PR 18
TPOT_BOUNDS = (0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0)
TPOT_START = (0, 3328, 131575, 132336, 133907, 134962, 134965, 134978, 134980, 134983, 134993, 135001)


@dataclass
class Window:
    """What one window adds: requests (each with one TTFT), tokens (each with one ITL), gauges at its end."""

    requests: int = 20
    ttft: float = 0.03
    itl: float = 0.04
    tokens_per_request: int = 50
    prompt_per_request: int = 400
    waiting: int = 0
    running: int = 8
    kv: float = 0.4
    preemptions: int = 0
    errors: int = 0


@dataclass
class Replica:
    version: str = "0.6.3"
    health_status: int = 200
    health_delay: float = 0.0
    root: str = "/models/Qwen2.5-Coder-32B-Instruct"
    max_model_len: int = 32768
    stream_done: bool = True
    stream_hold: float = 0.0  # > 0: the stream's first chunk, then the connection held this long and closed
    metrics_status: int = 200  # not 200: /metrics answers this with no body (a gateway that hides it)
    windows: list[Window] = field(default_factory=lambda: [Window(), Window(), Window()])
    restart_at_scrape: int | None = None  # this scrape (0-based) shows a new process
    scrapes: int = 0
    url: str = ""

    def scrape(self) -> str:
        index = min(self.scrapes, len(self.windows) - 1)
        self.scrapes += 1
        restarted = self.restart_at_scrape is not None and index >= self.restart_at_scrape
        done = self.windows[self.restart_at_scrape if restarted else 0 : index + 1]
        return render(done, 1_700_000_000.0 + (500.0 if restarted else 0.0), fresh=restarted)


def _buckets(name: str, bounds: tuple[float, ...], start: tuple[int, ...], adds: list[tuple[float, int]]) -> list[str]:
    lines, label = [], f'model_name="{MODEL}"'
    counts = list(start)
    total = float(start[-1])
    mean_start = sum(b * (c - p) for b, c, p in zip(bounds, start, (0, *start[:-1]), strict=True))
    value_sum = mean_start
    for value, n in adds:
        for i, bound in enumerate(bounds):
            if value <= bound:
                counts[i] += n
        total += n
        value_sum += value * n
    for bound, count in zip(bounds, counts, strict=True):
        lines.append(f'{name}_bucket{{le="{bound}",{label}}} {float(count)}')
    lines.append(f'{name}_bucket{{le="+Inf",{label}}} {total}')
    lines += [f"{name}_count{{{label}}} {total}", f"{name}_sum{{{label}}} {value_sum}"]
    return lines


def render(windows: list[Window], started: float, fresh: bool = False) -> str:
    label = f'model_name="{MODEL}"'
    last = windows[-1]
    ttft_start = tuple(0 for _ in TTFT_START) if fresh else TTFT_START
    tpot_start = tuple(0 for _ in TPOT_START) if fresh else TPOT_START
    requests = sum(w.requests for w in windows)
    errors = float(sum(w.errors for w in windows))
    lines = [
        "# HELP process_start_time_seconds Start time of the process since unix epoch in seconds.",
        "# TYPE process_start_time_seconds gauge",
        f"process_start_time_seconds {started}",
        "# HELP http_requests_total Total number of requests by method, status and handler.",
        "# TYPE http_requests_total counter",
        f'http_requests_total{{handler="/v1/completions",method="POST",status="2xx"}} {float(requests)}',
        f'http_requests_total{{handler="/v1/completions",method="POST",status="5xx"}} {errors}',
        "# HELP vllm:num_requests_running Number of requests currently running on GPU.",
        "# TYPE vllm:num_requests_running gauge",
        f"vllm:num_requests_running{{{label}}} {float(last.running)}",
        "# HELP vllm:num_requests_waiting Number of requests waiting to be processed.",
        "# TYPE vllm:num_requests_waiting gauge",
        f"vllm:num_requests_waiting{{{label}}} {float(last.waiting)}",
        "# HELP vllm:gpu_cache_usage_perc GPU KV-cache usage. 1 means 100 percent usage.",
        "# TYPE vllm:gpu_cache_usage_perc gauge",
        f"vllm:gpu_cache_usage_perc{{{label}}} {last.kv}",
        "# HELP vllm:num_preemptions_total Cumulative number of preemption from the engine.",
        "# TYPE vllm:num_preemptions_total counter",
        f"vllm:num_preemptions_total{{{label}}} {float(sum(w.preemptions for w in windows))}",
        "# HELP vllm:prompt_tokens_total Number of prefill tokens processed.",
        "# TYPE vllm:prompt_tokens_total counter",
        f"vllm:prompt_tokens_total{{{label}}} {float(sum(w.requests * w.prompt_per_request for w in windows))}",
        "# HELP vllm:generation_tokens_total Number of generation tokens processed.",
        "# TYPE vllm:generation_tokens_total counter",
        f"vllm:generation_tokens_total{{{label}}} {float(sum(w.requests * w.tokens_per_request for w in windows))}",
        "# HELP vllm:time_to_first_token_seconds Histogram of time to first token in seconds.",
        "# TYPE vllm:time_to_first_token_seconds histogram",
        *_buckets("vllm:time_to_first_token_seconds", TTFT_BOUNDS, ttft_start, [(w.ttft, w.requests) for w in windows]),
        "# HELP vllm:time_per_output_token_seconds Histogram of time per output token in seconds.",
        "# TYPE vllm:time_per_output_token_seconds histogram",
        *_buckets(
            "vllm:time_per_output_token_seconds",
            TPOT_BOUNDS,
            tpot_start,
            [(w.itl, w.requests * w.tokens_per_request) for w in windows],
        ),
    ]
    return "\n".join(lines) + "\n"


def _handler(replica: Replica) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def _send(self, status: int, body: str, content_type: str = "application/json") -> None:
            data = body.encode()
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:  # noqa: N802 - http.server's name
            if self.path == "/health":
                time.sleep(replica.health_delay)
                self._send(replica.health_status, "")
            elif self.path == "/version":
                self._send(200, json.dumps({"version": replica.version}))
            elif self.path == "/v1/models":
                card = {"id": MODEL, "object": "model", "root": replica.root, "max_model_len": replica.max_model_len}
                self._send(200, json.dumps({"object": "list", "data": [card]}))
            elif self.path == "/metrics" and replica.metrics_status != 200:
                self._send(replica.metrics_status, "")
            elif self.path == "/metrics":
                self._send(200, replica.scrape(), "text/plain; version=0.0.4")
            else:
                self.send_error(404)

        def do_POST(self) -> None:  # noqa: N802
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            chunk = {
                "id": "cmpl-1",
                "object": "text_completion",
                "model": MODEL,
                "choices": [{"index": 0, "text": " pong", "finish_reason": None}],
            }
            end = {**chunk, "choices": [{"index": 0, "text": "", "finish_reason": "length"}]}
            body = f"data: {json.dumps(chunk)}\n\n"
            if replica.stream_hold > 0:  # SSE without a length: the client reads until the server closes
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Connection", "close")
                self.end_headers()
                self.wfile.write(body.encode())
                self.wfile.flush()
                time.sleep(replica.stream_hold)
                self.close_connection = True
                return
            if replica.stream_done:
                body += f"data: {json.dumps(end)}\n\ndata: [DONE]\n\n"
            self._send(200, body, "text/event-stream")

        def log_message(self, *args: Any) -> None:
            return None

    return Handler


@contextmanager
def replicas(specs: dict[str, Replica]) -> Iterator[dict[str, Replica]]:
    servers = []
    try:
        for replica in specs.values():
            httpd = ThreadingHTTPServer(("127.0.0.1", 0), _handler(replica))
            thread = threading.Thread(target=httpd.serve_forever, daemon=True)
            thread.start()
            servers.append((httpd, thread))
            replica.url = f"http://127.0.0.1:{httpd.server_address[1]}"
        yield specs
    finally:
        for httpd, thread in servers:
            httpd.shutdown()
            httpd.server_close()
            thread.join(timeout=5)


def record_cases(names: list[str], cases: dict[str, Any], record: Callable[[str, Any, Path], None]) -> None:
    """A recorder script's main: each named case (every case when none is named), in a folder of its own."""
    for name in names or list(cases):
        with tempfile.TemporaryDirectory() as tmp:
            record(name, cases[name], Path(tmp))
