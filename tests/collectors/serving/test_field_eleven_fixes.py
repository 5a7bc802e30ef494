"""Fixes the eleventh field set called for in the engine-log reader (issue "Never cry wolf"): V1's "EngineCore
encountered a fatal error" (zai-org/GLM-V#172), V0's "Server didn't reply within 5000 ms" (vllm-project/vllm#9230),
collective timeouts in an engine's workers (vllm#13535, #5084) and TGI's client-side "Server error" (tgi#3140) were
"cannot judge"; a server that shut down after it was ready (gpustack/gpustack#4300) was a clean start."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from nightowl.cli.main import main
from tests.helpers import facts_of


@pytest.mark.parametrize(
    ("line", "kind"),
    [
        ("(EngineCore_0 pid=633) ERROR 09-08 [core.py:702] EngineCore encountered a fatal error.", "engine-dead"),
        ("ERROR 10-10 01:53:56 client.py:412] TimeoutError: Server didn't reply within 5000 ms", "engine-dead"),
        (
            "(RayWorkerWrapper pid=270291) [rank3]:[E219 08:58:32.606 ProcessGroupNCCL.cpp:616] [Rank 3] Watchdog "
            "caught collective operation timeout: WorkNCCL(SeqNum=5, OpType=ALLREDUCE, Timeout(ms)=600000) ran for 6",
            "collective-timeout",
        ),
        (
            "ERROR worker_base.py:148] RuntimeError: [../third_party/gloo/gloo/transport/tcp/pair.cc:525] Timed out "
            "waiting 1800000ms for recv operation to complete",
            "collective-timeout",
        ),
        (
            "ERROR batch{batch_size=1}:prefill:prefill{id=0 size=1}: text_generation_client: "
            "router/client/src/lib.rs:33: Server error: CANCELLED",
            "shard-request-failed",
        ),
    ],
)
def test_the_engine_failing_after_start_is_an_error_the_log_names(line: str, kind: str) -> None:
    assert kind in facts_of("engine-log", line + "\n")["error_kinds"]


READY = 'INFO:     192.168.1.201:50028 - "POST /v1/chat/completions HTTP/1.1" 200 OK\n'
SHUTDOWN = (
    "INFO 01-19 13:55:01 [launcher.py:80] Shutting down FastAPI HTTP server.\n"
    "INFO:     Shutting down\nINFO:     Waiting for application shutdown.\nINFO:     Application shutdown complete.\n"
)


@pytest.mark.parametrize(("text", "shut_down"), [(READY + SHUTDOWN, True), (SHUTDOWN + READY, False), (READY, False)])
def test_a_shutdown_after_ready_is_read(text: str, shut_down: bool) -> None:
    assert facts_of("engine-log", text)["shut_down"] is shut_down


def test_a_server_that_shut_down_after_ready_is_cannot_judge_not_a_clean_start(tmp_path: Path) -> None:
    host = tmp_path / "host"
    host.mkdir()
    (host / "engine-log.out").write_text(READY + SHUTDOWN)
    args = ["triage", "engine-start", "--replay", str(host), "--format", "json", "--out", str(tmp_path / "out")]
    (entry,) = json.loads(CliRunner().invoke(main, args).output)["hosts"]
    assert entry.get("verdict") is None and "shut down" in str(entry.get("error") or entry)
