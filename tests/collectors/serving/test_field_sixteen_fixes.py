"""Fixes the sixteenth field set called for in the engine-log reader (issue "Never cry wolf"): a vLLM V0 engine
loop that gave up on a step was "nothing wrong", a page that ran a log's records onto one line hid them, and
another docker compose service's access line made an engine that had not started "ready"."""

from __future__ import annotations

import pytest

from nightowl.collectors.serving.engine_log_eras import normalize
from tests.helpers import facts_of

STATS = (
    "INFO 06-19 11:23:59 metrics.py:341] Avg prompt throughput: 3526.1 tokens/s, Avg generation throughput: 115.2 "
    "tokens/s, Running: 8 reqs, Swapped: 0 reqs, Pending: 0 reqs, GPU KV cache usage: 0.9%, CPU KV cache usage: 0.0%."
)
TIMED_OUT = "ERROR 06-19 11:25:01 async_llm_engine.py:535] Engine iteration timed out. This should never happen!"
TASK_FAILED = "ERROR 06-19 11:25:01 async_llm_engine.py:52] Engine background task failed"


@pytest.mark.parametrize("line", [TIMED_OUT, TASK_FAILED])
def test_v0s_engine_loop_giving_up_is_a_dead_engine(line: str) -> None:
    assert facts_of("engine-log", f"{STATS}\n{line}\n")["error_kinds"] == ["engine-dead"]


@pytest.mark.parametrize(
    "joined",
    [
        f"{STATS} {TIMED_OUT} {TASK_FAILED}",  # vLLM's records
        "2024-08-30T18:59:12.959986Z  INFO text_generation_launcher: Starting shard rank=0 "
        "2024-08-30T18:59:40.120000Z  INFO text_generation_launcher: Shard ready in 27.1s rank=0 "
        "2024-08-30T18:59:41.000000Z ERROR text_generation_launcher: Shard 0 failed to start",  # TGI's
        "[2024-08-30 18:59:12 TP0] Load weight begin. avail mem=78.5 GB and a few more words to be long "
        "[2024-08-30 18:59:20 TP0] Load weight end. type=LlamaForCausalLM "
        "[2024-08-30 18:59:30 TP0] Scheduler hit an exception: RuntimeError",  # SGLang's
    ],
    ids=["vllm", "tgi", "sglang"],
)
def test_records_a_page_ran_onto_one_line_are_lines_again(joined: str) -> None:
    lines = normalize([joined])
    assert len(lines) == 3 and " ".join(lines) == joined


def test_a_line_quoting_one_record_head_stays_one_line() -> None:
    line = "(APIServer pid=1) INFO 10-20 02:51:13 [launcher.py:42] Route: /v1/models, Methods: GET " + "x" * 80
    assert normalize([line]) == [line]


def test_the_joined_records_are_read_as_the_engine_wrote_them() -> None:
    facts = facts_of("engine-log", f"{STATS} {TIMED_OUT} {TASK_FAILED}\n")
    assert facts["error_kinds"] == ["engine-dead"] and facts["last_stats"]["running"] == 8


COMPOSE = [
    'retriever-redis-server       | INFO:     172.31.37.13:43390 - "POST /v1/retrieval HTTP/1.1" 200 OK',
    "tgi-service                  | 2024-08-30T18:59:12.959986Z  INFO text_generation_launcher: Args {",
    "tgi-service                  | 2024-08-30T18:59:13.012501Z  INFO text_generation_launcher: Model supports up "
    "to 32768 but tgi will now set its default to 4096 instead.",
    "tgi-service                  | 2024-08-30T18:59:14.000000Z  INFO download: text_generation_launcher: "
    "Starting download process.",
]


def test_another_compose_services_access_line_is_not_the_engine_ready() -> None:
    facts = facts_of("engine-log", "\n".join(COMPOSE) + "\n")
    assert facts["engine"] == "tgi" and facts["last_phase"] != "ready"


def test_the_engines_own_service_still_says_ready() -> None:
    ready = (
        "tgi-service                  | 2024-08-30T19:00:00.000000Z  INFO text_generation_router::server: "
        "router/src/server.rs:1900: Connected"
    )
    assert facts_of("engine-log", "\n".join([*COMPOSE, ready]) + "\n")["last_phase"] == "ready"


def test_a_compose_log_with_one_service_is_read_whole() -> None:
    one = [line for line in COMPOSE if line.startswith("retriever")]
    assert facts_of("engine-log", "\n".join(one) + "\n")["last_phase"] == "ready"


TRACEBACK = [
    "INFO 06-19 11:25:00 api_server.py:1] vLLM API server version 0.5.0",
    "INFO 06-19 11:25:01 model_runner.py:1] Loading model weights took 14.9 GiB",
    "Traceback (most recent call last):",
    '  File "x.py", line 1, in <module>',
    "ValueError: the model name is not known",
]
NGINX = "nginx-1  | 2024/06/19 11:25:00 [error] 7#7: *1 connect() failed (111: Connection refused) upstream"


@pytest.mark.parametrize(
    "wrapped",
    [
        [f"vllm-1  | {line}" for line in TRACEBACK],  # one service
        [NGINX, *(f"vllm-1  | {line}" for line in TRACEBACK)],  # another service beside it
        [f"    {line}" for line in [NGINX, *(f"vllm-1  | {line}" for line in TRACEBACK)]],  # that, pasted indented
        [f"vllm_server_1   | {line}" for line in TRACEBACK],  # compose v1's name
    ],
)
def test_the_engines_compose_lines_read_as_it_printed_them(wrapped: list[str]) -> None:
    """A traceback under the engine's compose prefix starts its line once the prefix is off: the exception the
    bare log shows, not nothing wrong."""
    bare = facts_of("engine-log", "\n".join(TRACEBACK) + "\n")
    assert bare["error_kinds"] == ["unclassified-exception"]
    assert facts_of("engine-log", "\n".join(wrapped) + "\n")["error_kinds"] == bare["error_kinds"]
