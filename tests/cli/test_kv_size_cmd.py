"""`nightowl kv-size`: worked examples (vllm/v1/kv_cache_interface.py) and the KV sizes engines logged in the corpus."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import pytest
from click.testing import CliRunner

from nightowl.cli.kv_size_cmd import kv_size
from tests.llmperf import model_configs as hub

# config.json values as published on the Hugging Face hub, with each model's context length
LLAMA_3_8B = {**hub.LLAMA_31_8B, "max_position_embeddings": 8192}
LLAMA_31_70B = {**hub.LLAMA_31_70B, "max_position_embeddings": 131072}
DEEPSEEK_V3 = {**hub.DEEPSEEK_V3_ATTENTION, "torch_dtype": "bfloat16", "max_position_embeddings": 163840}
JAMBA = {"model_type": "jamba", "num_hidden_layers": 32, "num_attention_heads": 32, "hidden_size": 4096}


def run(config: dict, *args: str) -> tuple[int, str]:
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "config.json"
        path.write_text(json.dumps(config))
        result = CliRunner().invoke(kv_size, [str(path), *args])
    return result.exit_code, result.output


def as_json(config: dict, *args: str) -> dict:
    code, output = run(config, *args, "--format", "json")
    assert code == 0, output
    return json.loads(output)


def test_worked_example_llama_8b() -> None:
    code, output = run(LLAMA_3_8B)
    assert code == 0
    assert "KV per token per GPU: 131,072 B (128.0 KiB)" in output  # 2 x 32 x 8 x 128 x 2
    assert "one request of 8,192 tokens: 1.00 GiB" in output


def test_worked_example_llama_70b_at_tp8() -> None:
    result = as_json(LLAMA_31_70B, "--tp", "8")
    assert result["kv"]["bytes_per_token"] == 40 * 1024 and result["kv"]["bytes_per_token_all_ranks"] == 327_680


def test_worked_example_deepseek_v3_mla_every_rank() -> None:
    code, output = run(DEEPSEEK_V3, "--tp", "8")
    assert code == 0 and "70,272 B" in output and "every one of the 8 GPUs holds the same latent" in output
    assert as_json(DEEPSEEK_V3, "--dtype", "fp8_ds_mla")["kv"]["bytes_per_token"] == 40_016


# vLLM logs (fixtures/corpus/serving): Llama-3(.1)-8B, block size 16 = 2 MiB per block at 128 KiB/token.
# The logs round the KV GiB to 2 decimals (+-0.005 GiB = +-2.6 blocks), so blocks match within 3.
@pytest.mark.parametrize(
    ("kv_gib", "length", "logged_blocks", "logged_concurrency"),
    [
        (11.12, 8192, 5691, "11.12x"),  # vllm#12330, A100 40GB: "# GPU blocks: 5691", "11.12x"
        (3.81, 20000, 1952, "1.56x"),  # vllm#10517 20k run: "GPU blocks: 1952", "1.56x"
        (2.89, 29000, 1478, "0.82x"),  # vllm#10517 29k run: 1478 blocks = 23648 tokens, "0.82x"
    ],
)
def test_matches_vllm_logged_kv_sizes(kv_gib: float, length: int, logged_blocks: int, logged_concurrency: str) -> None:
    code, output = run(LLAMA_3_8B, "--kv-gib", str(kv_gib), "--max-model-len", str(length))
    assert code == 0 and f"{length:,} tokens per request: {logged_concurrency}" in output
    budget = as_json(LLAMA_3_8B, "--kv-gib", str(kv_gib), "--max-model-len", str(length))["budget"]
    assert abs(budget["gpu_blocks"] - logged_blocks) <= 3
    assert budget["kv_tokens"] == budget["gpu_blocks"] * 16


def test_v1_logged_tokens_and_concurrency() -> None:
    # aiperf#449: "GPU KV cache size: 417,136 tokens" = 26071 blocks x 16, "131,072 tokens per request: 3.18x"
    kv_gib = 26071 * 16 * 131_072 / 2**30
    budget = as_json(LLAMA_3_8B, "--kv-gib", str(kv_gib), "--max-model-len", "131072")["budget"]
    assert budget["kv_tokens"] == 417_136 and round(budget["max_concurrency"], 2) == 3.18


def test_card_budget_is_a_share_of_the_whole_card() -> None:
    # 80 GiB x 0.9 = 72 GiB; minus 15 GiB weights and 2 GiB activations = 55 GiB = 28160 blocks of 2 MiB
    result = as_json(LLAMA_3_8B, "--gpu-mem", "80", "--util", "0.9", "--weights", "15", "--non-kv", "2")
    assert result["budget"]["gpu_blocks"] == 28_160 and result["budget"]["requested_gib"] == pytest.approx(72.0)
    code, output = run(LLAMA_3_8B, "--gpu-mem", "24", "--weights", "15", "--non-kv", "7", "--max-model-len", "29000")
    assert code == 0 and "does not fit" in output


def test_refuses_what_it_does_not_model() -> None:
    code, output = run(JAMBA)
    assert code == 2 and "Mamba/SSM" in output


def test_usage_errors(tmp_path: Path) -> None:
    assert run(LLAMA_3_8B, "--gpu-mem", "80")[0] == 2
    assert run(LLAMA_3_8B, "--kv-gib", "3", "--gpu-mem", "80", "--weights", "10")[0] == 2
    assert CliRunner().invoke(kv_size, [str(tmp_path / "missing.json")]).exit_code == 2
    (tmp_path / "c.json").write_text("not json")
    assert CliRunner().invoke(kv_size, [str(tmp_path / "c.json")]).exit_code == 2


def test_reads_stdin() -> None:
    result = CliRunner().invoke(kv_size, ["-", "--format", "json"], input=json.dumps(LLAMA_3_8B))
    assert result.exit_code == 0 and json.loads(result.output)["kv"]["bytes_per_token"] == 131_072
