"""The decode floor: the least time one decode step can take, from memory bandwidth alone.

A decode step reads, on every GPU of the tensor-parallel group, its share of the weights plus the KV
cache of every sequence in the batch; at small and medium batch sizes that read, not compute, bounds
the step (inter-token latency is the decode clock: vLLM docs/design/metrics.md, docs/sources.md#serving-metrics). So

    step_seconds >= (weight_bytes_read / tp + batch x kv_bytes_per_sequence_per_gpu) / bandwidth

and the group produces at most ``batch / step_seconds`` tokens per second. Measured inter-token
latency far above this floor is a scheduling, batching or interference problem, not physics.

Choices, stated once:

* Weights read per step are every parameter except the input embedding table (a decode step gathers
  ``batch`` rows of it, not the table); with tied embeddings the shared matrix is read once, as the
  LM head. Norm vectors are replicated across TP ranks but are counted as sharded (they are < 0.01%).
* Mixture-of-experts layers read only the experts the batch routes to: the expected number of
  distinct experts under uniform routing, ``E x (1 - (1 - k/E)^batch)``, plus shared experts.
* KV bytes come from ``kv_size.kv_bytes_per_token`` (per GPU, replicated heads counted as vLLM does);
  a sliding-window layer holds at most ``window`` tokens per sequence.
* Bandwidth is the vendor's peak figure (``GPU_BANDWIDTH``, from nightowl/knowledge/sku_profiles.yaml);
  real kernels reach 70-90% of it, so the floor is a floor, not a prediction.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any, NamedTuple

from nightowl import knowledge
from nightowl.llmperf.kv_size import DTYPE_BYTES, UnsupportedModel, kv_bytes_per_token


class Bandwidth(NamedTuple):
    gpu: str
    bytes_per_second: float
    basis: str  # "datasheet": the vendor's figure; "derived": computed or carried over from a sibling part
    source: str


GB = 1e9
BASES = ("datasheet", "derived")


@functools.cache
def gpu_bandwidth() -> tuple[Bandwidth, ...]:
    """Peak memory bandwidth per GPU: ``memory_bandwidth`` of nightowl/knowledge/sku_profiles.yaml, each
    row with its source; ``source`` reads ``[confidence] source`` as the other tables' sources do."""
    rows = []
    for index, entry in enumerate((knowledge.read_yaml("sku_profiles.yaml") or {}).get("memory_bandwidth") or []):
        where = f"sku_profiles.yaml: memory_bandwidth[{index}]"
        speed, basis = knowledge.field(entry, "gb_per_s", where), knowledge.field(entry, "basis", where)
        if not isinstance(speed, (int, float)) or isinstance(speed, bool) or speed <= 0:
            raise knowledge.KnowledgeError(f"{where}: gb_per_s must be a positive number, got {speed!r}")
        if basis not in BASES:
            raise knowledge.KnowledgeError(f"{where}: basis {basis!r} is not one of {', '.join(BASES)}")
        source = knowledge.sourced(entry, where, required=True)
        rows.append(Bandwidth(str(knowledge.field(entry, "gpu", where)), speed * GB, basis, source))
    return tuple(rows)


def __getattr__(name: str) -> Any:
    """``GPU_BANDWIDTH``, read from nightowl/knowledge/sku_profiles.yaml on first use."""
    if name == "GPU_BANDWIDTH":
        return gpu_bandwidth()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


WEIGHT_DTYPE_BYTES: dict[str, float] = {**DTYPE_BYTES, "int8": 1, "int4": 0.5, "fp4": 0.5, "nvfp4": 0.5}


@dataclass(frozen=True)
class WeightCount:
    total_params: int
    read_params_dense: int  # every parameter a step reads when all experts are read
    expert_params_per_layer: int  # one routed expert's parameters, one layer (0 for dense models)
    moe_layers: int
    experts: int
    experts_per_token: int


@dataclass(frozen=True)
class DecodeFloor:
    gpu: str
    bandwidth_bytes_per_second: float
    bandwidth_basis: str
    bandwidth_source: str
    tp: int
    batch: int
    context: int
    weight_bytes_per_element: float
    weight_bytes_per_gpu: float
    kv_bytes_per_gpu: float
    bytes_per_gpu: float
    step_seconds: float
    tokens_per_second: float  # of the whole TP group: one token per sequence per step
    per_sequence_tokens_per_second: float
    notes: tuple[str, ...]


def bandwidth_for(gpu: str) -> Bandwidth:
    wanted = gpu.upper().replace(" ", "-").replace("_", "-")
    for row in gpu_bandwidth():
        if row.gpu.upper() == wanted:
            return row
    known = ", ".join(row.gpu for row in gpu_bandwidth())
    raise ValueError(f"no bandwidth figure for GPU {gpu!r}; known: {known}")


def _text(config: dict[str, Any]) -> dict[str, Any]:
    nested = config.get("text_config")
    return {**config, **nested} if isinstance(nested, dict) and "num_hidden_layers" not in config else config


def _int(config: dict[str, Any], *keys: str) -> int | None:
    for key in keys:
        value = config.get(key)
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return value
    return None


def count_weights(config: dict[str, Any]) -> WeightCount:
    """Parameters of a Llama-style decoder (dense or MoE) from config.json; others raise UnsupportedModel."""
    text = _text(config)
    if text.get("kv_lora_rank") is not None:
        raise UnsupportedModel("MLA attention (DeepSeek family): give the weight size with --weights-gib")
    hidden = _int(text, "hidden_size")
    layers = _int(text, "num_hidden_layers")
    heads = _int(text, "num_attention_heads")
    vocab = _int(text, "vocab_size")
    if None in (hidden, layers, heads, vocab):
        raise UnsupportedModel("config needs hidden_size, num_hidden_layers, num_attention_heads, vocab_size")
    assert hidden and layers and heads and vocab
    kv_heads = _int(text, "num_key_value_heads") or heads
    head_dim = _int(text, "head_dim") or hidden // heads
    attention = hidden * heads * head_dim * 2 + hidden * kv_heads * head_dim * 2  # q, o; k, v
    norms = 2 * hidden
    experts = _int(text, "num_local_experts", "num_experts", "n_routed_experts") or 0
    per_token = _int(text, "num_experts_per_tok") or 0
    dense_mlp = 3 * hidden * (_int(text, "intermediate_size") or 0)  # gate, up, down
    if experts:
        expert_width = _int(text, "moe_intermediate_size", "intermediate_size") or 0
        expert = 3 * hidden * expert_width
        shared = 3 * hidden * (_int(text, "shared_expert_intermediate_size") or 0)
        router = hidden * experts
        layer = attention + norms + router + shared + experts * expert
    else:
        expert, layer = 0, attention + norms + dense_mlp
    if not (dense_mlp or expert):
        raise UnsupportedModel("config has no intermediate_size for the MLP")
    embedding = vocab * hidden
    tied = bool(text.get("tie_word_embeddings", False))
    total = layers * layer + embedding * (1 if tied else 2) + hidden
    read = layers * layer + embedding + hidden  # the LM head (or the tied matrix) once; final norm
    return WeightCount(total, read, expert, layers if experts else 0, experts, per_token)


def expected_experts(experts: int, per_token: int, batch: int) -> float:
    """Distinct experts a batch touches per layer under uniform routing."""
    if experts == 0:
        return 0.0
    return experts * (1.0 - (1.0 - per_token / experts) ** batch)


def weight_dtype_bytes(config: dict[str, Any], dtype: str | None) -> float:
    """Bytes per weight element: the option, else the checkpoint's quantization, else torch_dtype."""
    name = (dtype or "").lower()
    if not name or name == "auto":
        quant = config.get("quantization_config") or {}
        method = str(quant.get("quant_method") or "").lower()
        if method == "fp8":
            return 1.0
        if method in ("awq", "gptq", "compressed-tensors") and quant.get("bits"):
            return int(quant["bits"]) / 8
        name = str(_text(config).get("torch_dtype") or config.get("torch_dtype") or "").lower()
    if name not in WEIGHT_DTYPE_BYTES:
        raise ValueError(
            f"unknown weight dtype {name or dtype!r}; pass --dtype (one of {', '.join(WEIGHT_DTYPE_BYTES)})"
        )
    return float(WEIGHT_DTYPE_BYTES[name])


def _kv_bytes_per_gpu(config: dict[str, Any], tp: int, kv_dtype: str, batch: int, context: int) -> float:
    kv = kv_bytes_per_token(config, tp, kv_dtype)
    sliding_tokens = min(context, kv.sliding_window) if kv.sliding_window else 0
    return float(batch * (context * kv.bytes_per_token + sliding_tokens * kv.sliding_bytes_per_token))


def _kv_dtype(config: dict[str, Any], kv_dtype: str, weight_dtype: str | None) -> str:
    """ "auto" is the model dtype; without torch_dtype in config.json, a 16-bit --dtype stands in for it."""
    if kv_dtype != "auto" or _text(config).get("torch_dtype") or config.get("torch_dtype"):
        return kv_dtype
    if weight_dtype and DTYPE_BYTES.get(weight_dtype.lower()) == 2:
        return weight_dtype
    return kv_dtype  # kv_size raises and asks for the dtype


def decode_floor(
    config: dict[str, Any],
    gpu: str,
    tp: int = 1,
    batch: int = 1,
    context: int = 2048,
    dtype: str | None = None,
    kv_dtype: str = "auto",
    weights_gib: float | None = None,
) -> DecodeFloor:
    """Floor of one decode step for ``batch`` sequences of ``context`` tokens on TP ``tp`` GPUs."""
    if tp < 1 or batch < 1 or context < 0:
        raise ValueError("tp and batch must be >= 1 and context >= 0")
    bandwidth = bandwidth_for(gpu)
    notes: list[str] = []
    if weights_gib is not None:
        element = 0.0
        weight_bytes = weights_gib * 2**30
        notes.append(f"weights given: {weights_gib} GiB in total (all of them read each step)")
    else:
        element = weight_dtype_bytes(config, dtype)
        count = count_weights(config)
        read = float(count.read_params_dense)
        if count.experts:
            touched = min(count.experts, expected_experts(count.experts, count.experts_per_token, batch))
            read -= count.moe_layers * (count.experts - touched) * count.expert_params_per_layer
            notes.append(f"MoE: {touched:.1f} of {count.experts} experts read per layer (uniform routing)")
        weight_bytes = read * element
    kv_bytes = _kv_bytes_per_gpu(config, tp, _kv_dtype(config, kv_dtype, dtype), batch, context)
    per_gpu = weight_bytes / tp + kv_bytes
    step = per_gpu / bandwidth.bytes_per_second
    return DecodeFloor(
        gpu=bandwidth.gpu,
        bandwidth_bytes_per_second=bandwidth.bytes_per_second,
        bandwidth_basis=bandwidth.basis,
        bandwidth_source=bandwidth.source,
        tp=tp,
        batch=batch,
        context=context,
        weight_bytes_per_element=element,
        weight_bytes_per_gpu=weight_bytes / tp,
        kv_bytes_per_gpu=kv_bytes,
        bytes_per_gpu=per_gpu,
        step_seconds=step,
        tokens_per_second=batch / step,
        per_sequence_tokens_per_second=1.0 / step,
        notes=tuple(notes),
    )
