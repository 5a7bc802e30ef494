"""Decode floor against hand calculations (weights + KV bytes per GPU over the GPU's bandwidth)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from nightowl.cli.floor_cmd import floor
from nightowl.llmperf.floor import GPU_BANDWIDTH, bandwidth_for, count_weights, decode_floor, expected_experts
from nightowl.llmperf.kv_size import UnsupportedModel
from tests.llmperf.model_configs import DEEPSEEK_V3_ATTENTION

# config.json values as published on the Hugging Face hub
LLAMA_31_8B = {
    "model_type": "llama",
    "hidden_size": 4096,
    "intermediate_size": 14336,
    "num_hidden_layers": 32,
    "num_attention_heads": 32,
    "num_key_value_heads": 8,
    "vocab_size": 128256,
    "tie_word_embeddings": False,
    "torch_dtype": "bfloat16",
}
LLAMA_31_70B = {
    "model_type": "llama",
    "hidden_size": 8192,
    "intermediate_size": 28672,
    "num_hidden_layers": 80,
    "num_attention_heads": 64,
    "num_key_value_heads": 8,
    "vocab_size": 128256,
    "tie_word_embeddings": False,
    "torch_dtype": "bfloat16",
}
MIXTRAL_8X7B = {
    "model_type": "mixtral",
    "hidden_size": 4096,
    "intermediate_size": 14336,
    "num_hidden_layers": 32,
    "num_attention_heads": 32,
    "num_key_value_heads": 8,
    "vocab_size": 32000,
    "num_local_experts": 8,
    "num_experts_per_tok": 2,
    "tie_word_embeddings": False,
    "torch_dtype": "bfloat16",
}
H100_SXM = 3.35e12


def test_llama_8b_on_one_h100_by_hand() -> None:
    # per layer: q 4096x4096 + k 4096x1024 + v 4096x1024 + o 4096x4096 = 41,943,040
    #            MLP 3 x 4096 x 14336 = 176,160,768; two norms 8,192  -> 218,112,000 x 32 = 6,979,584,000
    # LM head 128256 x 4096 = 525,336,576 (input embedding not read); final norm 4,096
    read_params = 6_979_584_000 + 525_336_576 + 4_096  # 7,504,924,672
    assert count_weights(LLAMA_31_8B).read_params_dense == read_params
    assert count_weights(LLAMA_31_8B).total_params == 8_030_261_248  # the published "8.03B"
    weights = read_params * 2  # bf16: 15,009,849,344 B
    kv = 4096 * (2 * 32 * 8 * 128 * 2)  # context 4096 x 131,072 B per token = 536,870,912 B
    step = (weights + kv) / H100_SXM  # 15,546,720,256 B / 3.35 TB/s = 4.6408 ms
    result = decode_floor(LLAMA_31_8B, "H100-SXM", tp=1, batch=1, context=4096)
    assert result.weight_bytes_per_gpu == weights and result.kv_bytes_per_gpu == kv
    assert result.step_seconds == pytest.approx(4.6408e-3, rel=1e-4)
    assert result.step_seconds == pytest.approx(step)
    assert result.tokens_per_second == pytest.approx(215.48, rel=1e-3)


def test_llama_70b_tp4_batch_32_by_hand() -> None:
    # per layer: q,o 2 x 8192 x 8192 + k,v 2 x 8192 x 1024 = 150,994,944; MLP 3 x 8192 x 28672 = 704,643,072;
    # norms 16,384 -> 855,654,400 x 80 = 68,452,352,000; + LM head 128256 x 8192 = 1,050,673,152 + 8,192
    read_params = 68_452_352_000 + 1_050_673_152 + 8_192  # 69,503,033,344
    weights_per_gpu = read_params * 2 / 4  # 34,751,516,672 B
    # KV at TP 4: 8 KV heads / 4 = 2 per rank -> 80 x 2 x 2 x 128 x 2 = 81,920 B per token per GPU
    kv_per_gpu = 32 * 2048 * 81_920  # 5,368,709,120 B
    result = decode_floor(LLAMA_31_70B, "H100-SXM", tp=4, batch=32, context=2048)
    assert result.weight_bytes_per_gpu == weights_per_gpu
    assert result.kv_bytes_per_gpu == kv_per_gpu
    # 40,120,225,792 B / 3.35e12 B/s = 11.976 ms; 32 sequences -> 2,672 tokens/s
    assert result.step_seconds == pytest.approx(11.976e-3, rel=1e-4)
    assert result.tokens_per_second == pytest.approx(2672.0, rel=1e-3)
    assert result.per_sequence_tokens_per_second == pytest.approx(83.5, rel=1e-3)


def test_mixtral_reads_only_the_routed_experts() -> None:
    count = count_weights(MIXTRAL_8X7B)
    assert count.total_params == 46_702_792_704  # the published "46.7B"
    # batch 1 routes to exactly 2 experts: 32 x (attention 41,943,040 + norms 8,192 + router 32,768
    # + 2 x 176,160,768) + LM head 131,072,000 + final norm 4,096 = 12,748,853,248 ("12.9B active")
    result = decode_floor(MIXTRAL_8X7B, "H100-SXM", tp=1, batch=1, context=0)
    assert result.weight_bytes_per_gpu == pytest.approx(12_748_853_248 * 2)
    assert expected_experts(8, 2, 1) == pytest.approx(2.0)
    assert expected_experts(8, 2, 64) == pytest.approx(8.0, rel=1e-6)  # a big batch touches every expert


def test_fp8_weights_and_kv_halve_the_bytes() -> None:
    bf16 = decode_floor(LLAMA_31_8B, "H100-SXM", batch=8, context=1000)
    fp8 = decode_floor(LLAMA_31_8B, "H100-SXM", batch=8, context=1000, dtype="fp8", kv_dtype="fp8")
    assert fp8.bytes_per_gpu == pytest.approx(bf16.bytes_per_gpu / 2)


def test_weights_given_for_models_config_cannot_count() -> None:
    deepseek = {**DEEPSEEK_V3_ATTENTION, "vocab_size": 129280, "torch_dtype": "bfloat16"}
    with pytest.raises(UnsupportedModel):
        count_weights(deepseek)
    result = decode_floor(deepseek, "H200", tp=8, batch=1, context=1024, weights_gib=642.0)
    # 642 GiB / 8 + 1024 tokens x 70,272 B (MLA latent, replicated on every rank)
    assert result.bytes_per_gpu == pytest.approx(642 * 2**30 / 8 + 1024 * 70_272)


def test_bandwidth_table_is_labelled() -> None:
    for row in GPU_BANDWIDTH:
        assert row.basis in ("datasheet", "derived") and row.source
    assert bandwidth_for("h100-sxm").bytes_per_second == H100_SXM
    with pytest.raises(ValueError, match="known"):
        bandwidth_for("GTX-480")


def test_cli(tmp_path: Path) -> None:
    config = tmp_path / "config.json"
    config.write_text(json.dumps(LLAMA_31_8B))
    runner = CliRunner()
    result = runner.invoke(floor, ["--config", str(config), "--gpu", "H100-SXM", "--tp", "1", "--context", "4096"])
    assert result.exit_code == 0, result.output
    assert "4.641 ms per decode step" in result.output and "215.5 tokens/s" in result.output
    as_json = runner.invoke(floor, ["--config", str(config), "--gpu", "H100-SXM", "--format", "json"])
    assert json.loads(as_json.output)["tp"] == 1
    unknown = runner.invoke(floor, ["--config", str(config), "--gpu", "GTX-480"])
    assert unknown.exit_code == 2 and "known" in unknown.output
