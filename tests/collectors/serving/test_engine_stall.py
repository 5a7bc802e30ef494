"""An engine that holds requests but moves (almost) no tokens (engine_log.stalled_stats, engine-start's
engine-stalled): the field set's vLLM 0.8 log of 2 running requests at 0.4 token/s (vllm-project/vllm#15018)
was called a clean start."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers import ROOT, facts_of, replayed_action

V0 = (
    "INFO 03-18 09:04:{s:02d} [metrics.py:481] Avg prompt throughput: {p} tokens/s, Avg generation throughput: {g} "
    "tokens/s, Running: {r} reqs, Swapped: 0 reqs, Pending: {w} reqs, GPU KV cache usage: 0.6%, CPU KV cache usage: 0%."
)
V1 = (
    "(APIServer pid=1) INFO 11-02 10:00:{s:02d} [loggers.py:123] Engine 000: Avg prompt throughput: {p} tokens/s, "
    "Avg generation throughput: {g} tokens/s, Running: {r} reqs, Waiting: {w} reqs, GPU KV cache usage: 1.2%, "
    "Prefix cache hit rate: 0.0%"
)
FIELD_SAMPLE = ROOT / "fixtures/field/engine-log/vllm-0.8-v0-metrics-py481-0.4tps-two-requests-slow-vllm15018.txt"


def _log(form: str, rows: list[tuple[float, float, int, int]]) -> str:
    line = V0 if form == "v0" else V1
    return "".join(line.format(s=10 * i, p=p, g=g, r=r, w=w) + "\n" for i, (p, g, r, w) in enumerate(rows))


def _action(tmp_path: Path, text: str) -> str:
    return replayed_action(tmp_path, "engine-start", {"engine-log.out": text})


@pytest.mark.parametrize("form", ["v0", "v1"])
@pytest.mark.parametrize(
    ("rows", "stalled"),
    [
        ([(120.0, 35.2, 2, 0)] + [(0.0, 0.0, 2, 0)] * 3, 3),  # ran, then stuck with 2 requests
        ([(0.0, 0.4, 2, 0)] * 4, 4),  # crawling
        ([(0.0, 0.0, 0, 5)] * 3, 3),  # requests queued, none admitted, nothing moving
        ([(0.0, 0.0, 2, 0)] * 3 + [(0.0, 41.0, 2, 0)], 0),  # moving again at the end
        ([(0.0, 0.0, 0, 0)] * 5, 0),  # idle: no request, nothing to move
        ([(4800.0, 0.2, 1, 0)] * 3, 0),  # a long prompt being read in: tokens move in
    ],
)
def test_stalled_stats_count_the_last_lines_with_requests_and_no_tokens(form: str, rows: list, stalled: int) -> None:
    assert facts_of("engine-log", _log(form, rows))["stalled_stats"] == stalled


@pytest.mark.parametrize(("lines", "action"), [(3, "escalate"), (2, "cannot-judge"), (1, "cannot-judge"), (0, "none")])
def test_three_stalled_lines_are_an_escalation_fewer_cannot_be_judged(tmp_path: Path, lines: int, action: str) -> None:
    assert _action(tmp_path, _log("v1", [(0.0, 41.0, 1, 0)] + [(0.0, 0.0, 1, 0)] * lines)) == action


def test_sglang_decode_lines_are_no_stall_measure() -> None:
    line = (
        "[2025-09-03 18:33:{s:02d} TP0] Decode batch. #running-req: 1, #token: 137, token usage: 0.00, "
        "cuda graph: True, gen throughput (token/s): 0.52, #queue-req: 0, \n"
    )
    assert facts_of("engine-log", "".join(line.format(s=s) for s in range(0, 40, 10)))["stalled_stats"] == 0


def test_the_field_sample_is_an_escalation(tmp_path: Path) -> None:
    assert _action(tmp_path, FIELD_SAMPLE.read_text()) == "escalate"


UNHEALTHY = (
    "1758 -- Didn't receive health check response for replica Replica(id='rut1591v', deployment='vLLM:Qwen--Qwen3-32B',"
    " app='RayServeApp') after 10.0s, marking it unhealthy.\n"
)


@pytest.mark.parametrize(
    ("rows", "action"),
    [
        ([(27408.8, 4.9, 49, 951)], "scale-out"),  # a deep queue: too busy to answer (ray-project/ray#54070)
        ([(0.0, 35.0, 4, 0)], "escalate"),  # no queue: the replica did not answer for another reason
    ],
)
def test_a_replica_marked_unhealthy_is_overload_only_with_a_queue(tmp_path: Path, rows: list, action: str) -> None:
    assert "replica-unhealthy" in facts_of("engine-log", UNHEALTHY)["error_kinds"]
    assert _action(tmp_path, UNHEALTHY + _log("v0", rows)) == action


@pytest.mark.parametrize(
    ("rows", "kv", "saturated"),
    [
        ([(0.0, 2349.2, 233, 754), (0.0, 2103.3, 219, 768)], "99.9", 2),  # vllm#6737: a queue behind a full cache
        ([(0.0, 2349.2, 233, 754), (0.0, 2103.3, 219, 768)], "76.0", 0),  # a queue, room in the cache: no finding
        ([(0.0, 2349.2, 233, 0), (0.0, 2103.3, 219, 0)], "99.9", 0),  # a full cache, nothing waiting: no finding
    ],
)
def test_requests_waiting_behind_a_full_kv_cache_are_counted(rows: list, kv: str, saturated: int) -> None:
    text = _log("v0", rows).replace("GPU KV cache usage: 0.6%", f"GPU KV cache usage: {kv}%")
    assert facts_of("engine-log", text)["saturated_stats"] == saturated


@pytest.mark.parametrize(("lines", "action"), [(2, "scale-out"), (1, "none")])
def test_two_saturated_lines_to_the_end_are_capacity(tmp_path: Path, lines: int, action: str) -> None:
    text = _log("v0", [(0.0, 2103.3, 219, 768)] * lines).replace(
        "GPU KV cache usage: 0.6%", "GPU KV cache usage: 99.9%"
    )
    assert _action(tmp_path, text) == action
