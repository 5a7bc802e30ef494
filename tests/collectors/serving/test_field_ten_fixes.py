"""Fixes the tenth field set called for in the engine-log reader (issue "Never cry wolf"): vLLM's engine dying
under its V0 multiprocessing client (vllm-project/vllm#11578) or V1's workers' fatal signal (vllm-project/vllm#16259)
and SGLang's failed health check (sgl-project/sglang#10856) were "cannot judge" or a clean start; health endpoints
answering 200 (sglang#6624, #11648) were not "ready"."""

from __future__ import annotations

import pytest

from tests.helpers import facts_of


@pytest.mark.parametrize(
    "line",
    [
        "ERROR 02-05 01:21:05 client.py:300] RuntimeError('Engine process (pid 76) died.')",
        "CRITICAL 02-05 01:21:10 launcher.py:101] MQLLMEngine is already dead, terminating server process",
        "vllm.engine.multiprocessing.MQEngineDeadError: Engine loop is not running.",
        "CRITICAL 04-08 04:00:01 [core_client.py:361] Got fatal signal from worker processes, shutting down. See stack "
        "trace above for root cause issue.",
    ],
)
def test_the_engine_dying_is_an_engine_death(line: str) -> None:
    assert "engine-dead" in facts_of("engine-log", line + "\n")["error_kinds"]


def test_sglangs_failed_health_check_is_an_error() -> None:
    line = (
        "[2025-09-24 05:48:14] Health check failed. Server couldn't get a response from detokenizer for last 20 "
        "seconds. tic start time: 05:47:54. last_heartbeat time: 05:42:53\n"
    )
    assert facts_of("engine-log", line)["error_kinds"] == ["health-check-failed"]


@pytest.mark.parametrize(
    ("path", "ready"),
    [("/health_generate", True), ("/health", True), ("/generate", True), ("/v1/models", True), ("/metrics", False)],
)
def test_a_server_answering_its_api_or_health_with_200_is_ready(path: str, ready: bool) -> None:
    line = f'[2025-05-26 07:52:49] INFO:     10.142.1.14:60288 - "GET {path} HTTP/1.1" 200 OK\n'
    assert (facts_of("engine-log", line)["last_phase"] == "ready") is ready
