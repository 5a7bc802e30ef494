"""`nightowl kv-size CONFIG`: KV-cache bytes per token per GPU from a model's config.json, and the
concurrency a memory budget allows (vLLM's accounting: vllm/v1/kv_cache_interface.py, docs/sources.md#vllm-kv-cache)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click

from nightowl.cli.common import TEXT_JSON_OPTION, number_option

GIB = 2**30


@click.command("kv-size")
@click.argument("config", type=click.Path(dir_okay=False, path_type=Path, allow_dash=True))
@number_option("--tp", click.IntRange(min=1), 1, "tensor parallel size")
@click.option(
    "--dtype",
    default="auto",
    show_default=True,
    help="KV-cache dtype: auto (the model's torch_dtype), bf16, fp16, fp8, fp8_ds_mla, ...",
)
@number_option(
    "--max-model-len", click.IntRange(min=1), None, "tokens of the longest request (default: max_position_embeddings)"
)
@number_option(
    "--gpu-mem",
    click.FloatRange(min=0, min_open=True),
    None,
    "memory of one GPU, GiB (with --weights: budget as vLLM does)",
)
@number_option(
    "--util", click.FloatRange(0, 1, min_open=True), 0.9, "vLLM --gpu-memory-utilization: a share of the WHOLE card"
)
@number_option("--weights", click.FloatRange(min=0), None, "weights per GPU, GiB")
@number_option(
    "--non-kv", click.FloatRange(min=0), 0.0, "activation peak + non-torch memory per GPU, GiB (vLLM logs both)"
)
@number_option(
    "--kv-gib",
    click.FloatRange(min=0),
    None,
    "KV memory available per GPU, GiB, as the engine logged it (instead of --gpu-mem)",
)
@number_option("--block-size", click.IntRange(min=1), 16)
@number_option(
    "--max-num-batched-tokens",
    click.IntRange(min=1),
    None,
    "needed for sliding-window models (a request holds window + this many tokens)",
)
@TEXT_JSON_OPTION
def kv_size(
    config: Path,
    tp: int,
    dtype: str,
    max_model_len: int | None,
    gpu_mem: float | None,
    util: float,
    weights: float | None,
    non_kv: float,
    kv_gib: float | None,
    block_size: int,
    max_num_batched_tokens: int | None,
    fmt: str,
) -> None:
    """KV-cache bytes per token per GPU for CONFIG (a config.json; - reads stdin).

    Standard, GQA/MQA, MLA (the latent is replicated on every TP rank) and sliding-window layers;
    a layout it does not model (Mamba/SSM hybrids, chunked-local attention) is refused, never
    guessed. With --gpu-mem and --weights (or --kv-gib) it also gives the blocks, the tokens the
    cache holds and how many requests of --max-model-len fit at once.

    Exit status: 0 computed; 2 unreadable config, bad option or unsupported layout.
    """
    from nightowl.llmperf.kv_size import UnsupportedModel, kv_bytes_per_token

    model = _read_config(config)
    try:
        kv = kv_bytes_per_token(model, tp=tp, dtype=dtype)
    except (UnsupportedModel, ValueError) as exc:
        raise click.UsageError(f"{config}: {exc}") from exc
    length = max_model_len or _int(model.get("max_position_embeddings"))
    if (gpu_mem is None) != (weights is None):
        raise click.UsageError("--gpu-mem and --weights go together (or give --kv-gib)")
    if kv_gib is not None and gpu_mem is not None:
        raise click.UsageError("give either --kv-gib or --gpu-mem/--weights, not both")
    if kv.sliding_window_layers and length and max_num_batched_tokens is None:
        raise click.UsageError("a sliding-window model needs --max-num-batched-tokens to size a request")
    result = _result(kv, length, block_size, max_num_batched_tokens)
    budget = (
        kv_gib
        if kv_gib is not None
        else (gpu_mem * util - weights - non_kv if gpu_mem is not None and weights is not None else None)
    )
    if budget is not None and length:
        result["budget"] = _budget(kv, budget, length, block_size, max_num_batched_tokens)
    if gpu_mem is not None:
        result["budget"] = {
            **result.get("budget", {}),
            "gpu_mem_gib": gpu_mem,
            "util": util,
            "requested_gib": gpu_mem * util,
            "weights_gib": weights,
            "non_kv_gib": non_kv,
        }
    if fmt == "json":
        click.echo(json.dumps(result, indent=2))
    else:
        click.echo(_text(result))


def _read_config(config: Path) -> dict[str, Any]:
    try:
        with click.open_file(str(config)) as stream:  # "-" is stdin
            text = stream.read()
        model = json.loads(text)
    except OSError as exc:
        raise click.UsageError(f"cannot read {config}: {exc.strerror}") from exc
    except ValueError as exc:
        raise click.UsageError(f"{config} is not JSON: {exc}") from exc
    if not isinstance(model, dict):
        raise click.UsageError(f"{config} is not a config.json object")
    return model


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def _result(kv: Any, length: int | None, block_size: int, batched: int | None) -> dict[str, Any]:
    from nightowl.collectors.base import to_jsonable

    result: dict[str, Any] = {"kv": to_jsonable(kv), "max_model_len": length}
    if length:
        per_request = kv.per_request_bytes(length, batched, block_size)
        result["per_request_bytes"] = per_request
        result["per_request_gib"] = per_request / GIB
    return result


def _budget(kv: Any, kv_gib: float, length: int, block_size: int, batched: int | None) -> dict[str, Any]:
    from nightowl.llmperf.kv_size import max_concurrency

    # the whole budget is KV here: the card-level arithmetic was done by the caller (or the engine)
    fit = max_concurrency(kv, kv_gib, 1.0, 0.0, length, 0.0, block_size, batched)
    return {
        "kv_cache_gib": kv_gib,
        "gpu_blocks": fit.gpu_blocks,
        "kv_tokens": fit.kv_tokens,
        "max_concurrency": fit.max_concurrency,
    }


def _text(result: dict[str, Any]) -> str:
    kv = result["kv"]
    lines = [
        f"layout {kv['layout']}, {kv['num_layers']} layers ({kv['sliding_window_layers']} sliding-window), "
        f"{kv['kv_heads']} KV head(s), {kv['kv_heads_per_rank']} per GPU at TP={kv['tp']}, "
        f"head dim {kv['head_dim']}, {kv['dtype_bytes']} byte(s) per element",
        f"KV per token per GPU: {kv['bytes_per_token']:,} B ({kv['bytes_per_token'] / 1024:.1f} KiB)"
        + (
            f" + {kv['sliding_bytes_per_token']:,} B in sliding-window layers (bounded per request)"
            if kv["sliding_window_layers"]
            else ""
        ),
    ]
    if kv["layout"] == "mla" and kv["tp"] > 1:
        lines.append(
            f"MLA: every one of the {kv['tp']} GPUs holds the same latent "
            f"({kv['bytes_per_token_all_ranks']:,} B per token over the group)"
        )
    if "per_request_gib" in result:
        lines.append(
            f"one request of {result['max_model_len']:,} tokens: {result['per_request_gib']:.2f} GiB of KV per GPU"
        )
    budget = result.get("budget") or {}
    if "kv_cache_gib" in budget:
        if "requested_gib" in budget:
            lines.append(
                f"budget: {budget['gpu_mem_gib']} GiB x {budget['util']} = {budget['requested_gib']:.2f} GiB, "
                f"minus weights {budget['weights_gib']} GiB and non-KV {budget['non_kv_gib']} GiB"
            )
        lines.append(
            f"KV memory per GPU: {budget['kv_cache_gib']:.2f} GiB"
            + (
                f" = {budget['gpu_blocks']:,} blocks = {budget['kv_tokens']:,} tokens"
                if budget["gpu_blocks"] is not None
                else ""
            )
        )
        lines.append(
            f"maximum concurrency for {result['max_model_len']:,} tokens per request: "
            f"{budget['max_concurrency']:.2f}x"
            + (" (one max-length request does not fit)" if budget["max_concurrency"] < 1 else "")
        )
    return "\n".join(lines)
