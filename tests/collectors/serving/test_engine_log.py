"""engine-log collector: one JSON case per corpus log, phase rules on formats not in the corpus."""

# ruff: noqa: E501 - log lines are kept verbatim, one per source line

from __future__ import annotations

import pytest

from nightowl.collectors.base import to_jsonable
from nightowl.collectors.serving.engine_log import (
    COLLECTOR,
    ENGINE_PHASES,
    MARKERS,
    facts,
    parse,
)
from tests.helpers import assert_subset


def test_collector_declaration() -> None:
    assert COLLECTOR.kind == "engine-log"
    sources = [argv[0] if argv[0] != "sh" else argv[2].split()[1] for argv in COLLECTOR.commands]
    assert sources == ["tail", "docker", "kubectl", "kubectl", "journalctl"]
    assert ("journalctl", "-u", "{engine_unit}", "--no-pager", "-n", "5000") in COLLECTOR.commands
    assert "--previous" in COLLECTOR.commands[2]  # the container that died comes first


def test_marker_table_is_consistent() -> None:
    for marker in MARKERS:
        assert marker.source and marker.edge in ("start", "end", "during")
        assert marker.engine is None or marker.phase in ENGINE_PHASES[marker.engine]


# --- vLLM V1 formats not in the corpus ---------------------------------------------------------

V1_HEAD = """\
(EngineCore_DP0 pid=812) INFO 10-24 01:22:10 [gpu_model_runner.py:2602] Starting to load model /models/llama...
(EngineCore_DP0 pid=812) INFO 10-24 01:22:31 [default_loader.py:267] Loading weights took 19.92 seconds
(EngineCore_DP0 pid=812) INFO 10-24 01:22:32 [gpu_model_runner.py:2653] Model loading took 14.99 GiB and 20.5 seconds
(EngineCore_DP0 pid=812) INFO 10-24 01:22:45 [monitor.py:34] torch.compile takes 9.80 s in total
(EngineCore_DP0 pid=812) INFO 10-24 01:22:47 [gpu_worker.py:298] Available KV cache memory: 52.31 GiB
(EngineCore_DP0 pid=812) INFO 10-24 01:22:47 [kv_cache_utils.py:1087] GPU KV cache size: 428,512 tokens
(EngineCore_DP0 pid=812) INFO 10-24 01:22:47 [kv_cache_utils.py:1091] Maximum concurrency for 131,072 tokens per request: 3.27x
"""
OOM_LINE = "(EngineCore_DP0 pid=812) ERROR 10-24 01:22:50 [core.py:708] torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 79.19 GiB of which 1.06 GiB is free. Including non-PyTorch memory, this process has 78.12 GiB memory in use. Of the allocated memory 74.50 GiB is allocated by PyTorch, and 2.50 GiB is reserved by PyTorch but unallocated."
API_TAIL = (
    "(APIServer pid=700) RuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): {}"
)


def test_v1_oom_during_graph_capture_far_above_the_last_line() -> None:
    capture = "(EngineCore_DP0 pid=812) Capturing CUDA graphs (mixed prefill-decode, PIECEWISE):  41%|####      | 27/67 [00:03<00:04,  8.1it/s]\n"
    text = V1_HEAD + capture + OOM_LINE + "\n" + "\n".join([API_TAIL] * 30)
    result = facts(parse(text))
    assert result["last_phase"] == "kv-cache"
    assert result["oom_phase"] == "cuda-graph"
    assert result["kv_cache"] == {
        "gpu_blocks": None,
        "tokens": 428512,
        "max_concurrency": 3.27,
        "cpu_blocks": None,
        "block_size": None,
        "tokens_per_request": 131072,
        "kv_cache_gib": 52.31,
    }
    assert_subset(result["oom"], {"tried_gib": 2.0, "free_gib": 1.06, "total_gib": 79.19, "fragmentation": True})
    assert "engine-core-failed" in result["error_kinds"]


def test_v1_oom_after_capture_is_sampler_warmup_and_after_ready_is_runtime() -> None:
    captured = (
        V1_HEAD
        + "(EngineCore_DP0 pid=812) INFO [gpu_model_runner.py:3480] Graph capturing finished in 12 secs, took 0.54 GiB\n"
    )
    assert parse(captured + OOM_LINE).oom.phase == "sampler-warmup"
    ready = captured + "(APIServer pid=700) INFO:     Application startup complete.\n"
    assert parse(ready + OOM_LINE).oom.phase == "runtime"
    assert parse(ready).last_phase == "ready"


def test_traceback_names_the_phase() -> None:
    in_profile = (
        V1_HEAD.splitlines()[0]
        + "\n"
        + "\n".join(
            [
                '(EngineCore_DP0 pid=812) ERROR [core.py:708]   File "/vllm/v1/worker/gpu_worker.py", line 263, in determine_available_memory',
                "(EngineCore_DP0 pid=812) ERROR [core.py:708]     self.model_runner.profile_run()",
                '(EngineCore_DP0 pid=812) ERROR [core.py:708]   File "/vllm/v1/worker/gpu_model_runner.py", line 3150, in profile_run',
                "(EngineCore_DP0 pid=812) ERROR [core.py:708]     output = self._dummy_sampler_run(last_hidden_states)",
                OOM_LINE,
            ]
        )
    )
    assert parse(in_profile).oom.phase == "profiling"  # the outer frame wins over _dummy_sampler_run
    capture = "\n".join(
        [
            '  File "/vllm/v1/engine/core.py", line 92, in __init__',
            "    self._initialize_kv_caches(vllm_config)",
            '  File "/vllm/v1/engine/core.py", line 207, in _initialize_kv_caches',
            "    self.model_executor.initialize_from_config(kv_cache_configs)",
            '  File "/vllm/v1/worker/gpu_worker.py", line 340, in compile_or_warm_up_model',
            '  File "/vllm/v1/worker/gpu_model_runner.py", line 3300, in capture_model',
            OOM_LINE,
        ]
    )
    assert parse(capture).oom.phase == "cuda-graph"  # the wrapper _initialize_kv_caches names no phase


def test_v021_cuda_graph_memory_profiling_oom() -> None:
    text = (
        V1_HEAD.splitlines()[2]
        + "\n(EngineCore_DP0 pid=812) INFO [gpu_model_runner.py:4100] Profiling CUDA graph memory: PIECEWISE=51 (largest=512), FULL=35 (largest=256)\n"
        + OOM_LINE
    )
    assert parse(text).oom.phase == "cuda-graph"
    estimated = text.replace(
        OOM_LINE, "INFO [gpu_model_runner.py:4200] Estimated CUDA graph memory: 1.21 GiB total\n" + OOM_LINE
    )
    assert parse(estimated).oom.phase == "profiling"


def test_v1_kv_admission_error_with_estimated_length() -> None:
    text = (
        V1_HEAD.splitlines()[2]
        + "\n(EngineCore_DP0 pid=812) ERROR [core.py:708] ValueError: To serve at least one request with the models's max seq len (131072), (16.00 GiB KV cache is needed, which is larger than the available KV cache memory (6.52 GiB). Based on the available memory, the estimated maximum model length is 53376. Try increasing `gpu_memory_utilization` or decreasing `max_model_len` when initializing the engine."
    )
    result = facts(parse(text))
    assert_subset(
        result,
        {
            "oom": {"phase": "kv-cache", "kind": "kv-admission"},
            "kv_too_small": {
                "max_model_len": 131072,
                "kv_tokens": None,
                "estimated_max_len": 53376,
                "needed_gib": 16.0,
                "available_gib": 6.52,
            },
            "kv_admission_failed": True,
            "last_phase": "weights",
        },
    )


def test_gpu_occupied_at_start_is_device_init() -> None:
    text = "(EngineCore_DP0 pid=9) ValueError: Free memory on device (10.5/79.19 GiB) on startup is less than desired GPU memory utilization (0.9, 71.27 GiB). Decrease GPU memory utilization or reduce GPU memory used by other processes."
    assert_subset(to_jsonable(parse(text)), {"engine": "vllm", "oom": {"phase": "device-init", "kind": "gpu-occupied"}})


def test_old_torch_oom_wording() -> None:
    text = "RuntimeError: CUDA out of memory. Tried to allocate 1.50 GiB (GPU 0; 39.59 GiB total capacity; 35.00 GiB already allocated; 512.00 MiB free; 37.00 GiB reserved in total by PyTorch)"
    assert_subset(
        to_jsonable(parse(text).oom),
        {
            "tried_gib": 1.5,
            "total_gib": 39.59,
            "free_gib": 0.5,
            "allocated_by_pytorch_gib": 35.0,
            "reserved_unallocated_gib": 2.0,
            "fragmentation": True,
            "phase": None,
        },
    )


# --- SGLang, TGI, TensorRT-LLM, host ------------------------------------------------------------


def test_sglang_phases_and_pool_failure() -> None:
    text = (
        "[2025-07-02 07:40:00 TP0] Load weight begin. avail mem=78.20 GB\n"
        "[2025-07-02 07:41:58 TP0] Load weight end. type=LlamaForCausalLM, dtype=torch.bfloat16, avail mem=63.10 GB, mem usage=15.10 GB.\n"
        "[2025-07-02 07:41:59 TP0] KV Cache is allocated. #tokens: 412000, K size: 25.15 GB, V size: 25.15 GB\n"
        "[2025-07-02 07:42:00 TP0] Capture cuda graph begin. This can take up to several minutes. avail mem=11.2 GB\n"
        "[2025-07-02 07:42:01 TP0] torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 512.00 MiB. GPU 0 has a total capacity of 79.10 GiB of which 100.00 MiB is free.\n"
    )
    assert_subset(
        to_jsonable(parse(text)),
        {
            "engine": "sglang",
            "last_phase": "kv-cache",
            "weights_gib": 15.10,
            "kv_cache": {"tokens": 412000},
            "oom": {"phase": "cuda-graph", "tried_gib": 0.5},
        },
    )
    pool = "[2025-07-02 07:41:59 TP0] RuntimeError: Not enough memory. Please try to increase --mem-fraction-static."
    assert parse(pool).oom.phase == "kv-cache"
    weights_only = text.splitlines()[1] + "\n" + text.splitlines()[-1]
    assert parse(weights_only).oom.phase == "kv-cache"  # SGLang has no profiling pass


def test_tgi_kv_blocks_line() -> None:
    result = parse("2024-10-01T10:00:00Z INFO text_generation_launcher: KV-cache blocks: 3712, size: 16\n")
    assert result.engine == "tgi"
    assert to_jsonable(result.kv_cache) == {
        "gpu_blocks": 3712,
        "tokens": None,
        "max_concurrency": None,
        "cpu_blocks": None,
        "block_size": 16,
        "tokens_per_request": None,
        "kv_cache_gib": None,
    }


def test_tensorrt_llm_weight_loading_oom() -> None:
    text = "Loading weights concurrently:  47%|####7     | 667/1417 [00:03<00:05, 139.82it/s][07/23/2025-06:37:06] [TRT-LLM] [RANK 1] [E] Error executing load_single_module with args ('model.layers.29.mlp.gate_up_proj', Linear()): CUDA out of memory. Tried to allocate 126.00 MiB. GPU 0 has a total capacity of 23.53 GiB of which 43.00 MiB is free. Process 32689 has 404.00 MiB memory in use."
    assert_subset(to_jsonable(parse(text)), {"engine": "tensorrt-llm", "oom": {"phase": "weights", "total_gib": 23.53}})


def test_host_oom_kill_vs_plain_kill() -> None:
    killed = parse("vllm-0 exited with code 137\n")
    assert killed.exit_code == 137 and killed.oom is None
    oom = parse("    lastState:\n      terminated:\n        exitCode: 137\n        reason: OOMKilled\n")
    assert oom.exit_code == 137 and oom.oom is not None and oom.oom.phase == "host"


@pytest.mark.parametrize(
    "line,kind",
    [
        ("RuntimeError: The NVIDIA driver on your system is too old (found version 11040).", "driver-too-old"),
        ("cudaErrorInsufficientDriver: CUDA driver version is insufficient for CUDA runtime version", "driver-too-old"),
        ("OSError: We couldn't connect to 'https://huggingface.co' to load this file", "hub-unreachable"),
        ("ValueError: Model architectures ['FooForCausalLM'] are not supported for now.", "unsupported-architecture"),
        (
            "OSError: [Errno 98] error while attempting to bind on address ('0.0.0.0', 8000): address already in use",
            "port-in-use",
        ),
        (
            "torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:1970, unhandled system error",
            "nccl",
        ),
    ],
)
def test_startup_errors_are_classified(line: str, kind: str) -> None:
    assert kind in facts(parse(line))["error_kinds"]


def test_version_and_utilisation_from_v1_banner() -> None:
    text = "INFO 04-30 10:19:50 [core.py:58] Initializing a V1 LLM engine (v0.8.5) with config: model='Qwen/Qwen3-8B', gpu_memory_utilization=0.4\n"
    result = parse(text)
    assert (result.engine, result.version, result.gpu_memory_utilization) == ("vllm", "0.8.5", 0.4)
