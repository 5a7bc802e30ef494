"""KV-cache sizing against worked examples (vllm/v1/kv_cache_interface.py) and KV sizes engines logged in the corpus."""

from __future__ import annotations

import pytest

from nightowl.llmperf.kv_size import UnsupportedModel, kv_bytes_per_token, max_concurrency
from tests.llmperf.model_configs import DEEPSEEK_V3_ATTENTION, LLAMA_31_8B, LLAMA_31_70B

DEEPSEEK_V3 = {**DEEPSEEK_V3_ATTENTION, "qk_nope_head_dim": 128, "v_head_dim": 128, "torch_dtype": "bfloat16"}
# config.json values as published on the Hugging Face hub
GEMMA2_9B = {
    "model_type": "gemma2",
    "num_hidden_layers": 42,
    "num_attention_heads": 16,
    "num_key_value_heads": 8,
    "head_dim": 256,
    "hidden_size": 3584,
    "sliding_window": 4096,
    "torch_dtype": "bfloat16",
}
GIB = 2**30


# --- worked examples after vllm/v1/kv_cache_interface.py --------------------------------------------


def test_llama_8b_gqa() -> None:
    kv = kv_bytes_per_token(LLAMA_31_8B, tp=1, dtype="auto")
    assert kv.layout == "gqa" and kv.head_dim == 128
    assert kv.bytes_per_token == 131_072  # 128 KiB


def test_llama_70b_total_and_per_gpu_at_tp8() -> None:
    assert kv_bytes_per_token(LLAMA_31_70B, 1, "bf16").bytes_per_token == 327_680
    at_tp8 = kv_bytes_per_token(LLAMA_31_70B, 8, "bf16")
    assert at_tp8.kv_heads_per_rank == 1
    assert at_tp8.bytes_per_token == 40 * 1024
    assert at_tp8.bytes_per_token_all_ranks == 327_680


def test_kv_heads_are_replicated_when_tp_exceeds_them() -> None:
    at_tp16 = kv_bytes_per_token(LLAMA_31_70B, 16, "bf16")
    assert at_tp16.kv_heads_per_rank == 1 and at_tp16.bytes_per_token == 40 * 1024
    assert at_tp16.bytes_per_token_all_ranks == 16 * 40 * 1024


def test_deepseek_v3_mla_replicated_on_every_rank() -> None:
    for tp in (1, 8):
        kv = kv_bytes_per_token(DEEPSEEK_V3, tp, "bfloat16")
        assert kv.layout == "mla" and kv.head_dim == 576
        assert kv.bytes_per_token == 70_272
    assert kv_bytes_per_token(DEEPSEEK_V3, 8, "bf16").bytes_per_token_all_ranks == 8 * 70_272
    assert kv_bytes_per_token(DEEPSEEK_V3, 8, "fp8_ds_mla").bytes_per_token == 40_016


def test_fp8_halves_the_cache() -> None:
    assert kv_bytes_per_token(LLAMA_31_8B, 1, "fp8").bytes_per_token == 65_536


def test_mha_and_mqa_layouts() -> None:
    mha = {"model_type": "gpt2", "n_layer": 12, "n_head": 12, "n_embd": 768}
    kv = kv_bytes_per_token(mha, 1, "fp16")
    assert kv.layout == "mha" and kv.bytes_per_token == 2 * 12 * 12 * 64 * 2
    falcon_7b = {
        "model_type": "falcon",
        "num_hidden_layers": 32,
        "num_attention_heads": 71,
        "hidden_size": 4544,
        "multi_query": True,
        "new_decoder_architecture": False,
    }
    kv = kv_bytes_per_token(falcon_7b, 1, "bf16")
    assert kv.layout == "mqa" and kv.bytes_per_token == 2 * 32 * 1 * 64 * 2


# --- sliding-window layers -------------------------------------------------------------------------


def test_gemma2_alternates_sliding_and_global_layers() -> None:
    kv = kv_bytes_per_token(GEMMA2_9B, 1, "bf16")
    per_layer = 2 * 8 * 256 * 2
    assert (kv.full_attention_layers, kv.sliding_window_layers, kv.sliding_window) == (21, 21, 4096)
    assert kv.bytes_per_token == 21 * per_layer
    assert kv.sliding_bytes_per_token == 21 * per_layer
    assert kv.bytes_per_token_all_layers == 42 * per_layer
    # a 32k request holds every token in the global layers, only the window in the local ones
    held = kv.per_request_bytes(32_768, max_num_batched_tokens=2048)
    window_blocks = -(-(4096 - 1 + 2048) // 16) + 1
    assert held == 32_768 * kv.bytes_per_token + window_blocks * 16 * kv.sliding_bytes_per_token
    with pytest.raises(ValueError, match="max_num_batched_tokens"):
        kv.per_request_bytes(32_768)


def test_layer_types_list_wins() -> None:
    config = {
        **LLAMA_31_8B,
        "sliding_window": 128,
        "num_hidden_layers": 4,
        "layer_types": ["sliding_attention", "full_attention", "sliding_attention", "full_attention"],
    }
    kv = kv_bytes_per_token(config, 1, "bf16")
    assert (kv.full_attention_layers, kv.sliding_window_layers) == (2, 2)


def test_disabled_or_absent_window_is_full_attention() -> None:
    qwen = {
        "model_type": "qwen2",
        "num_hidden_layers": 28,
        "num_attention_heads": 28,
        "num_key_value_heads": 4,
        "hidden_size": 3584,
        "sliding_window": 131072,
        "use_sliding_window": False,
        "max_window_layers": 28,
    }
    kv = kv_bytes_per_token(qwen, 1, "bf16")
    assert kv.sliding_window_layers == 0 and kv.bytes_per_token == 2 * 28 * 4 * 128 * 2
    mistral = {
        "model_type": "mistral",
        "num_hidden_layers": 32,
        "num_attention_heads": 32,
        "num_key_value_heads": 8,
        "hidden_size": 4096,
        "sliding_window": 4096,
    }
    assert kv_bytes_per_token(mistral, 1, "bf16").sliding_window_layers == 32


# --- refused layouts -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "config,words",
    [
        ({"model_type": "jamba", "num_hidden_layers": 32, "num_attention_heads": 32}, "Mamba"),
        ({**LLAMA_31_8B, "model_type": "llama4_text", "attention_chunk_size": 8192}, "chunked"),
        ({**LLAMA_31_8B, "model_type": "mysterymodel", "sliding_window": 4096}, "which layers"),
        ({**LLAMA_31_8B, "layer_types": ["linear_attention"] * 32}, "linear_attention"),
        ({**DEEPSEEK_V3, "model_type": "someone_elses_mla"}, "MLA"),
        ({"model_type": "llama", "hidden_size": 4096}, "num_hidden_layers"),
    ],
)
def test_unsupported_layouts_raise_with_a_reason(config: dict, words: str) -> None:
    with pytest.raises(UnsupportedModel, match=words):
        kv_bytes_per_token(config, 1, "bf16")


def test_unknown_dtype_is_an_error_not_a_guess() -> None:
    with pytest.raises(ValueError, match="nvfp4"):
        kv_bytes_per_token(LLAMA_31_8B, 1, "nvfp4")
    with pytest.raises(ValueError, match="torch_dtype"):
        kv_bytes_per_token({k: v for k, v in LLAMA_31_8B.items() if k != "torch_dtype"}, 1, "auto")


# --- against KV sizes the engines logged (fixtures/corpus/serving) ---------------------------------


def test_matches_vllm_0_6_6_a100_llama3_8b_log() -> None:
    # issue12330: total_gpu_memory (39.50GiB) x 0.90; weights 14.96GiB; non_torch 0.10GiB; activation
    # peak 9.37GiB; KV 11.12GiB; '# GPU blocks: 5691'; 'Maximum concurrency for 8192 tokens ...: 11.12x'
    fit = max_concurrency(
        kv_bytes_per_token(LLAMA_31_8B, 1, "bf16"),
        gpu_mem_gib=39.50,
        utilization=0.90,
        weights_gib=14.96,
        non_kv_gib=0.10 + 9.37,
        max_model_len=8192,
    )
    assert fit.kv_cache_gib == pytest.approx(11.12)
    assert fit.gpu_blocks == pytest.approx(5691, rel=1e-3)  # the log rounds GiB to 2 decimals
    assert fit.max_concurrency == pytest.approx(11.12, abs=0.01)


@pytest.mark.parametrize(
    "kv_gib,blocks,max_len,concurrency",
    [
        (3.81, 1952, 20000, 1.56),  # issue10517, RTX 3090, 20k run
        (2.89, 1478, 29000, 0.82),  # issue10517, 29k run: one max-length request does not fit
    ],
)
def test_matches_vllm_0_6_rtx3090_llama31_8b_logs(kv_gib: float, blocks: int, max_len: int, concurrency: float) -> None:
    kv = kv_bytes_per_token(LLAMA_31_8B, 1, "bf16")
    fit = max_concurrency(kv, gpu_mem_gib=kv_gib, utilization=1.0, weights_gib=0.0, max_model_len=max_len)
    assert fit.gpu_blocks == pytest.approx(blocks, rel=2e-3)
    assert fit.max_concurrency == pytest.approx(concurrency, abs=0.01)


def test_29k_log_tokens_match_block_arithmetic() -> None:
    # '# GPU blocks: 1478' x 16-token blocks = the 23648 tokens named in the same log's error
    assert 1478 * 16 == 23648
    per_token = kv_bytes_per_token(LLAMA_31_8B, 1, "bf16").bytes_per_token
    assert 23648 * per_token / GIB == pytest.approx(2.89, abs=0.01)


def test_matches_vllm_v1_logged_concurrency() -> None:
    # aiperf449: 'GPU KV cache size: 417,136 tokens',
    # 'Maximum concurrency for 131,072 tokens per request: 3.18x'
    kv = kv_bytes_per_token(LLAMA_31_8B, 1, "bf16")
    kv_gib = 417_136 * kv.bytes_per_token / GIB
    fit = max_concurrency(kv, gpu_mem_gib=kv_gib, utilization=1.0, weights_gib=0.0, max_model_len=131_072)
    assert fit.kv_tokens == 417_136
    assert fit.max_concurrency == pytest.approx(3.18, abs=0.01)


def test_nothing_left_for_kv() -> None:
    fit = max_concurrency(kv_bytes_per_token(LLAMA_31_70B, 1, "bf16"), 79.1, 0.9, 131.0, 8192)
    assert fit.kv_cache_gib < 0 and fit.gpu_blocks == 0 and fit.max_concurrency == 0


def test_sliding_window_model_concurrency_uses_per_request_bytes() -> None:
    kv = kv_bytes_per_token(GEMMA2_9B, 1, "bf16")
    fit = max_concurrency(kv, 24.0, 0.9, 17.3, 8192, max_num_batched_tokens=2048)
    assert fit.kv_tokens is None
    assert fit.max_concurrency == pytest.approx(fit.kv_cache_gib * GIB / kv.per_request_bytes(8192, 2048))
