"""runbooks/oom.yaml on the recorded OOM hosts: verdicts, and summaries that cite the log's numbers."""

from __future__ import annotations

from typing import Any

import pytest

from nightowl.library.rehearse import rehearsal_cases, rehearse
from nightowl.transports.replay import ReplayTransport
from tests.helpers import ROOT
from tests.runbook_helpers import run_runbook_on

HOSTS = ROOT / "fixtures" / "hosts"


def verdict_of(host: str, **params: Any) -> dict[str, Any]:
    runs = run_runbook_on("oom", {host: lambda: ReplayTransport(HOSTS / host, host)}, params)
    assert runs[0].verdict is not None, runs[0].error
    return runs[0].verdict


@pytest.mark.parametrize("case", rehearsal_cases("oom"), ids=lambda c: c["host"])
def test_rehearsal(case: dict[str, Any]) -> None:
    result = rehearse("oom", case)
    assert result.passed, f"{result.name}: {result.problems} (path {result.path})"


# The corpus samples whose INDEX.md verdict is an OOM (GPU, host or KV refusal) or its near misses.
OOM_SAMPLES = (
    "container_exit_137_killed_docker_compose_scalellm_issue38.txt",
    "sglang_alloc_req_slots_out_of_memory_issue10408.txt",
    "sglang_rocm_dp8_negative_profiled_kv_tokens_after_weight_load_issue7691.txt",
    "tgi_runtime_prefill_cuda_oom_after_warmup_issue1374.txt",
    "tgi_warmup_not_enough_memory_prefill_tokens_issue1067.txt",
    "vllm_v0.11_v1_check_enough_kv_cache_memory_gpt_oss_120b_h100_issue27508.txt",
    "vllm_v0.11_v1_profile_dummy_sampler_oom_gpt_oss_120b_h100_issue27508.txt",
    "vllm_v0.13.0_weight_loading_oom_h20_qwen72b_fp8_issue31273.txt",
    "vllm_v0.5.4_gemma2_9b_8xL4_weights_blocks_then_cudagraph_issue7593.txt",
    "vllm_v0.6.3_runtime_engine_loop_oom_multistep_issue9290.txt",
    "vllm_v0.6.x_memory_profiling_29k_max_seq_len_exceeds_kv_cache_issue10517.txt",
    "vllm_v0.7_mp_worker_oom_determine_num_available_blocks_load_model_issue14095.txt",
    "vllm_v0.8.5_v1_engine_core_failed_to_start_a800_issue17431.txt",
    "vllm_v0.8_ray_gpu_util_0.98_cudagraph_capture_oom_issue15598.txt",
)


def test_every_oom_sample_of_the_corpus_is_a_rehearsed_host_unchanged() -> None:
    recorded = {
        (HOSTS / c["host"] / "engine-log.out").read_text()
        for c in rehearsal_cases("oom")
        if (HOSTS / c["host"] / "engine-log.out").exists()
    }
    for name in OOM_SAMPLES:
        assert (ROOT / "fixtures" / "corpus" / "serving" / name).read_text() in recorded, name


def test_kv_summary_cites_the_numbers() -> None:
    # vllm#10517: 2.89 GiB of KV = 1478 blocks = 23648 tokens, max seq len 29000, 0.82x, 0.9 x 23.58 GiB
    summary = verdict_of("oom-vllm-max-seq-len-29k")["summary"]
    assert "The KV cache holds 23648 tokens, max-model-len is 29000" in summary
    assert "set --max-model-len to at most 23648" in summary
    assert "Available KV memory: 2.89 GiB; one request of 29000 tokens needs 3.52 GiB" in summary  # 2.89 / 0.82
    assert "0.9 x 23.58 GiB = 21.22 GiB" in summary and "share of the whole card" in summary


def test_sglang_summary_explains_its_memory_fraction() -> None:
    summary = verdict_of("oom-sglang-negative-kv-pool")["summary"]
    assert "-561981 tokens" in summary and "166.59 GB" in summary
    assert "--mem-fraction-static" in summary and "raising it is the fix" in summary


def test_fragmentation_summary_cites_reserved_memory() -> None:
    # tgi#1374: "Tried to allocate 222.00 MiB", "1.57 GiB is reserved by PyTorch but unallocated"
    summary = verdict_of("oom-tgi-runtime-fragmentation")["summary"]
    assert "0.22 GiB" in summary and "1.57 GiB sat reserved by PyTorch but unallocated" in summary
    assert "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True" in summary and "--max-batch-total-tokens" in summary


def test_graph_capture_summary_cites_budget() -> None:
    summary = verdict_of("oom-vllm-graph-capture-ray")["summary"]
    assert "(21.2 GiB)" in summary and "gpu_memory_utilization 0.98" in summary


def test_host_oom_outranks_the_engine_log() -> None:
    verdict = verdict_of("oom-k8s-pod-oomkilled", pod="kubeshark-worker")
    assert verdict["id"] == "host-oom" and "1 restart(s)" in verdict["summary"]
