"""Regression tests for the engine-log misses the seventh field set showed (fixtures/field/serving-7; issue "never
cry wolf"), each built on the format family the miss belongs to, in several shapes:

- the out-of-memory wordings of the layers under PyTorch (the driver API's "CUDA driver error: out of memory",
  PyTorch < 2.0's "cuda runtime error (2)", the runtime and driver API's error names, Triton's launcher, cuBLAS and
  cuDNN handles that cannot get their workspace), under vLLM V1's process prefixes or none: a CUDA OOM;
- TGI's launcher reporting that a shard process it started died ("Shard N crashed", then the closing
  ``Error: ShardFailed``): an error the log names, before or after the server was ready;
- SGLang's uvicorn lines (SGLang stamps them ``[YYYY-MM-DD HH:MM:SS]``; vLLM's carry no stamp) and its native
  endpoints in uvicorn's access lines: the engine is SGLang.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers import facts_of
from tests.runbook_helpers import make_host, run_on

# ---- CUDA out-of-memory wordings under vLLM V1's prefixes -----------------------------------------------------

# fixtures/field/serving-7/vllm-v1-enginecore-error-prefix-gptq-marlin-repack-cuda-driver-error-out-of-memory-
# process-enginecore-cut-club3090-60.txt, its last lines (source: https://github.com/noonghunna/club-3090/issues/60,
# comment by timxx): the EngineCore ran out of GPU memory repacking GPTQ weights while loading.
CLUB3090_60 = """\
(EngineCore pid=74) ERROR 05-07 00:37:03 [core.py:1136]   File "/usr/local/lib/python3.12/dist-packages/torch/_ops.py", line 1269, in __call__
(EngineCore pid=74) ERROR 05-07 00:37:03 [core.py:1136]     return self._op(*args, **kwargs)
(EngineCore pid=74) ERROR 05-07 00:37:03 [core.py:1136]            ^^^^^^^^^^^^^^^^^^^^^^^^^
(EngineCore pid=74) ERROR 05-07 00:37:03 [core.py:1136] RuntimeError: CUDA driver error: out of memory
(EngineCore pid=74) Process EngineCore:
(EngineCore pid=74) Traceback (most recent call last):
(EngineCore pid=74)   File "/usr/lib/python3.12/multiprocessing/process.py", line 314, in _bootstrap
(EngineCore pid=74)     self.run()
(EngineCore pid=74)   File "/usr/local/lib/python3.12/dist-packages/vllm/v1/engine/core.py", line 1140, in run_engine_core
(EngineCore pid=74)     raise e
"""  # noqa: E501

# Each layer's own wording (PyTorch c10/cuda/driver_api.h, THCudaCheck, the CUDA runtime and driver API error
# names, Triton's CUDA launcher, NCCL's CUDACHECK, cuBLAS and cuDNN status names), written here.
OOM_LINES = [
    "RuntimeError: CUDA driver error: out of memory",
    "RuntimeError: cuda runtime error (2) : out of memory at /pytorch/aten/src/THC/THCCachingAllocator.cpp:510",
    "RuntimeError: CUDA Error: out of memory at /workspace/csrc/cumem_allocator.cpp:62",
    "RuntimeError: CUDA error: CUBLAS_STATUS_ALLOC_FAILED when calling `cublasCreate(handle)`",
    "RuntimeError: cuDNN error: CUDNN_STATUS_ALLOC_FAILED",
    "RuntimeError: CUDA error: cudaErrorMemoryAllocation",
    "numba.cuda.cudadrv.driver.CudaAPIError: [2] Call to cuMemAlloc results in CUDA_ERROR_OUT_OF_MEMORY",
    "RuntimeError: Triton Error [CUDA]: out of memory",
    "RuntimeError: CUDA failed with error out of memory",
    "custom_all_reduce.cuh:307 'Cuda failure 'out of memory''",
]
PREFIXES = [
    "",
    "(EngineCore pid=74) ERROR 05-07 00:37:03 [core.py:1136] ",
    "(EngineCore_DP0 pid=270) ERROR 11-19 12:16:36 [v1/engine/core.py:842] ",
    "(Worker_TP1 pid=104299) ERROR 03-02 10:11:12 [multiproc_executor.py:597] ",
    "(VllmWorker rank=0 pid=5120) ERROR 04-01 09:00:00 [multiproc_executor.py:470] ",
]


@pytest.mark.parametrize("prefix", PREFIXES)
@pytest.mark.parametrize("line", OOM_LINES)
def test_every_layers_oom_wording_is_a_cuda_oom(prefix: str, line: str) -> None:
    got = facts_of("engine-log", prefix + line + "\n")
    assert (got["has_oom"], got["oom_kind"]) == (True, "cuda-oom"), prefix + line


def test_the_field_excerpt_is_an_oom_and_its_action_a_reconfigure(tmp_path: Path) -> None:
    got = facts_of("engine-log", CLUB3090_60)
    assert (got["engine"], got["oom_kind"]) == ("vllm", "cuda-oom")
    verdict, path = run_on("engine-start", make_host(tmp_path, "club3090", {"engine-log.out": CLUB3090_60}))
    assert "out-of-memory" in path and verdict["action"] == "reconfigure", (verdict, path)


@pytest.mark.parametrize(
    "line",
    [
        "(EngineCore_DP0 pid=270) INFO 11-19 12:10:00 [gpu_worker.py:298] Available KV cache memory: 10.52 GiB",
        "(EngineCore_DP0 pid=270) ERROR 11-19 12:16:36 [core.py:842] RuntimeError: CUDA error: an illegal memory "
        "access was encountered",
        "RuntimeError: CUDA error: device-side assert triggered",
    ],
)
def test_other_cuda_errors_and_memory_lines_are_no_oom(line: str) -> None:
    assert facts_of("engine-log", line + "\n")["has_oom"] is False


# ---- TGI's launcher: a shard it started died ------------------------------------------------------------------

# fixtures/field/serving-7/tgi-2.0-shard-traceback-tail-systemexit-rank0-shard-crashed-terminating-webserver-
# tgi1993.txt, its last lines (source: https://github.com/huggingface/text-generation-inference/issues/1993).
TGI1993 = """\
  File "/opt/conda/lib/python3.10/_sitebuiltins.py", line 26, in __call__
    raise SystemExit(code)
SystemExit: 1 rank=0
2024-06-03T07:12:23.785971Z ERROR text_generation_launcher: Shard 0 crashed
2024-06-03T07:12:23.786015Z  INFO text_generation_launcher: Terminating webserver
2024-06-03T07:12:23.786034Z  INFO text_generation_launcher: Waiting for webserver to gracefully shutdown
2024-06-03T07:12:23.786231Z  INFO text_generation_router::server: router/src/server.rs:1739: signal received, starting graceful shutdown
2024-06-03T07:12:23.886159Z  INFO text_generation_launcher: webserver terminated
2024-06-03T07:12:23.886187Z  INFO text_generation_launcher: Shutting down shards
"""  # noqa: E501
# The router's ready line (TGI 2.x, router/src/server.rs), written here: the shard died after the server was up.
TGI_READY = "2024-06-03T07:00:01.000000Z  INFO text_generation_router::server: router/src/server.rs:1566: Connected\n"


@pytest.mark.parametrize(
    ("text", "kind"),
    [
        (TGI1993, "shard-crashed"),
        ("2024-01-01T00:00:00.000000Z ERROR text_generation_launcher: Shard 3 crashed\n", "shard-crashed"),
        ("Error: ShardFailed\n", "shard-crashed"),
    ],
)
def test_tgi_launcher_reports_a_shard_died(text: str, kind: str) -> None:
    assert kind in facts_of("engine-log", text)["error_kinds"]


@pytest.mark.parametrize("before", ["", TGI_READY], ids=["during-start-up", "after-ready"])
def test_a_shard_crash_is_an_error_the_log_names(tmp_path: Path, before: str) -> None:
    verdict, path = run_on("engine-start", make_host(tmp_path, "tgi", {"engine-log.out": before + TGI1993}))
    assert verdict["id"] == "engine-error" and verdict["action"] == "escalate", (verdict, path)
    assert "Shard 0 crashed" in verdict["summary"]


# ---- SGLang's uvicorn lines -----------------------------------------------------------------------------------

# fixtures/field/serving-7/sglang-uvicorn-lines-on-diff-added-side-bracket-stamps-startup-complete-get-model-info-
# 200-lws377.txt (source: https://github.com/kubernetes-sigs/lws/pull/377), without the diff's "+" on each line.
LWS377 = """\
[2025-02-11 09:06:55] INFO:     Started server process [1]
[2025-02-11 09:06:55] INFO:     Waiting for application startup.
[2025-02-11 09:06:55] INFO:     Application startup complete.
[2025-02-11 09:06:55] INFO:     Uvicorn running on http://0.0.0.0:40000 (Press CTRL+C to quit)
[2025-02-11 09:06:56] INFO:     127.0.0.1:40048 - "GET /get_model_info HTTP/1.1" 200 OK
"""


@pytest.mark.parametrize(
    "text",
    [
        LWS377,
        "".join("+" + line + "\n" for line in LWS377.splitlines()),  # as the field file has it
        "\n".join(LWS377.splitlines()[:4]) + "\n",  # the stamps alone, no access line
        "[2025-02-11 09:07:02] WARNING:  Invalid HTTP request received.\n",
        'INFO:     10.0.0.5:51234 - "GET /get_server_info HTTP/1.1" 200 OK\n',  # an endpoint only SGLang serves
        'INFO:     10.0.0.5:51234 - "POST /flush_cache HTTP/1.1" 200 OK\n',
    ],
)
def test_sglangs_uvicorn_lines_name_sglang(text: str) -> None:
    got = facts_of("engine-log", text)
    assert got["engine"] == "sglang", text


@pytest.mark.parametrize(
    "text",
    [
        # vLLM's uvicorn lines carry no stamp and its endpoints are OpenAI's
        "INFO:     Started server process [7]\nINFO:     Application startup complete.\n",
        'INFO:     127.0.0.1:40048 - "GET /v1/models HTTP/1.1" 200 OK\n',
    ],
)
def test_plain_uvicorn_lines_name_no_engine(text: str) -> None:
    assert facts_of("engine-log", text)["engine"] is None
