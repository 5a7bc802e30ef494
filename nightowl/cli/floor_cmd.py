"""`nightowl floor`: the least time a decode step can take, from memory bandwidth."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click

from nightowl.cli.common import TEXT_JSON_OPTION, config_file_option
from nightowl.cli.exit import ExitStatus


def _load_config(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise click.ClickException(f"cannot read {path}: {exc}") from exc
    if not isinstance(data, dict):
        raise click.ClickException(f"{path} is not a JSON object (a model's config.json)")
    return data


def _gib(value: float) -> str:
    return f"{value / 2**30:,.2f} GiB"


@click.command()
@config_file_option("the model's config.json")
@click.option("--gpu", required=True, help="GPU model, e.g. H100-SXM, H200, A100-SXM4-80GB, L40S")
@click.option("--tp", default=1, show_default=True, help="tensor-parallel size")
@click.option("--batch", default=1, show_default=True, help="sequences decoded together")
@click.option("--context", default=2048, show_default=True, help="tokens already in each sequence's KV cache")
@click.option("--dtype", default=None, help="weight dtype (bf16, fp8, int4, ...); default: from config.json")
@click.option("--kv-dtype", default="auto", show_default=True, help="KV-cache dtype (auto = model dtype, fp8)")
@click.option(
    "--weights-gib",
    type=float,
    default=None,
    help="total weight size, for models config.json cannot be counted from (MLA, custom)",
)
@TEXT_JSON_OPTION
def floor(
    config_path: Path,
    gpu: str,
    tp: int,
    batch: int,
    context: int,
    dtype: str | None,
    kv_dtype: str,
    weights_gib: float | None,
    fmt: str,
) -> None:
    """Decode floor: bytes each GPU reads per decode step (its share of the weights plus the KV
    cache of the batch) over the GPU's memory bandwidth, and the tokens per second that implies.

    Measured inter-token latency far above the floor is scheduling, batching or interference, not
    physics. Bandwidth is the vendor's peak; kernels reach 70-90% of it.
    """
    from nightowl.llmperf.floor import decode_floor
    from nightowl.llmperf.kv_size import UnsupportedModel

    config = _load_config(config_path)
    try:
        result = decode_floor(
            config, gpu, tp=tp, batch=batch, context=context, dtype=dtype, kv_dtype=kv_dtype, weights_gib=weights_gib
        )
    except (UnsupportedModel, ValueError) as exc:
        click.echo(f"nightowl: {exc}", err=True)
        raise SystemExit(ExitStatus.USAGE) from exc
    if fmt == "json":
        click.echo(json.dumps(result.__dict__, indent=2))
        return
    lines = [
        f"GPU             {result.gpu}: {result.bandwidth_bytes_per_second / 1e12:.3f} TB/s "
        f"({result.bandwidth_basis}; {result.bandwidth_source})",
        f"group           TP={result.tp}, batch {result.batch}, context {result.context} tokens",
        f"weights / GPU   {_gib(result.weight_bytes_per_gpu)} read per step",
        f"KV cache / GPU  {_gib(result.kv_bytes_per_gpu)} read per step",
        f"floor           {result.step_seconds * 1000:.3f} ms per decode step (inter-token latency cannot be lower)",
        f"ceiling         {result.tokens_per_second:,.1f} tokens/s for the group, "
        f"{result.per_sequence_tokens_per_second:,.1f} per sequence",
    ]
    lines += [f"note            {note}" for note in result.notes]
    click.echo("\n".join(lines))
