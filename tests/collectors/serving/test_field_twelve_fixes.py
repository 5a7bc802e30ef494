"""Fixes the twelfth field set called for in the engine-log reader (issue "Never cry wolf"): vLLM V1's own words for a
dead engine core and a failed worker (vllm-project/vllm#20056, #31681, #34643, modelscope/ms-swift#8387,
OpenRLHF#1193) were "cannot judge", or a clean start where the server had been ready."""

from __future__ import annotations

import pytest

from tests.helpers import facts_of


@pytest.mark.parametrize(
    ("line", "kind"),
    [
        ("INFO 06-25 04:34:01 [async_llm.py:345] Request cmpl-eab3a9-0 failed (engine dead).", "engine-dead"),
        (
            "ERROR 01-04 21:58:22 [core_client.py:564] Engine core proc EngineCore_DP0 died unexpectedly, shutting "
            "down client.",
            "engine-dead",
        ),
        ("(APIServer pid=2018618) ERROR 03-20 [async_llm.py:708] AsyncLLM output_handler failed.", "engine-dead"),
        ("ERROR 02-13 18:05 [multiproc_executor.py:852] WorkerProc hit an exception.", "worker-failed"),
        (
            "(EngineCore_DP0 pid=58) ERROR 03-05 [core.py:1094] Invocation of collective_rpc method failed",
            "worker-failed",
        ),
    ],
)
def test_v1s_engine_and_worker_failures_are_errors_the_log_names(line: str, kind: str) -> None:
    assert kind in facts_of("engine-log", line + "\n")["error_kinds"]
