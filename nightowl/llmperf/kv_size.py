"""KV-cache bytes per token from a model's config.json, and what that buys in concurrency.

Follows vLLM's accounting (vllm/v1/kv_cache_interface.py @001cabc and vllm/config/model.py,
docs/sources.md#vllm-kv-cache):

* full attention (MHA / GQA / MQA): ``(head_k + head_v) x kv_heads_per_rank x dtype`` per layer,
  ``kv_heads_per_rank = max(1, kv_heads // tp)`` (heads are replicated when TP > kv heads);
* MLA (DeepSeek family): ``(kv_lora_rank + qk_rope_head_dim) x dtype`` per layer, no factor 2,
  one latent "head" that every TP rank holds in full (replicated, not sharded);
* sliding-window layers are counted apart (``sliding_bytes_per_token``): a request holds at most
  ``min(sliding_window - 1 + max_num_batched_tokens, context)`` tokens in them, plus one block,
  so they cost about a constant per request instead of growing with context.
  ``bytes_per_token_all_layers`` is the figure when they are budgeted as full attention
  (vLLM V0, or ``--disable-hybrid-kv-cache-manager``).

A layout this module does not know (SSM / Mamba hybrids, chunked-local attention, a sliding
window it cannot place on layers, an MLA ``kv_lora_rank`` on an unknown model type) raises
``UnsupportedModel``: a wrong KV figure would send someone to change the wrong knob.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

GIB = 2**30

# bytes per element of the KV cache (vllm/v1/kv_cache_interface.py); "auto" means the model dtype
DTYPE_BYTES: dict[str, int] = {
    "bfloat16": 2,
    "bf16": 2,
    "float16": 2,
    "fp16": 2,
    "half": 2,
    "float32": 4,
    "fp32": 4,
    "float": 4,
    "fp8": 1,
    "fp8_e4m3": 1,
    "fp8_e5m2": 1,
}
# fixed bytes per token per layer, whatever the latent width (FlashMLA sparse, V3.2) [P, docs/sources.md#vllm-kv-cache]
FIXED_MLA_BYTES: dict[str, int] = {"fp8_ds_mla": 656}

# model types for which vLLM takes the MLA path when kv_lora_rank is set
# (vllm/config/model.py is_deepseek_mla; docs/sources.md#vllm-kv-cache [P]; exact membership [M])
MLA_MODEL_TYPES = frozenset(
    {
        "deepseek_v2",
        "deepseek_v3",
        "deepseek_v32",
        "deepseek_mtp",
        "kimi_k2",
        "longcat_flash",
        "pangu_ultra_moe",
    }
)
# model types whose layers hold recurrent state (Mamba, linear attention): not modelled here
# [P docs/sources.md#vllm-kv-cache]
STATE_SPACE_MODEL_TYPES = frozenset(
    {
        "mamba",
        "mamba2",
        "jamba",
        "zamba",
        "zamba2",
        "bamba",
        "falcon_h1",
        "nemotron_h",
        "granitemoehybrid",
        "qwen3_next",
        "minimax",
        "minimax_m1",
        "lfm2",
        "plamo2",
    }
)
# where sliding-window layers sit when config.json has no `layer_types` list
# (HF transformers config classes [M]; vLLM names `sliding_window_pattern`, `max_window_layers`)
ALL_LAYERS_SLIDING_TYPES = frozenset({"mistral", "mixtral"})  # one window on every layer
ALTERNATING_SLIDING_TYPES = frozenset({"gemma2"})  # even layers local, odd layers global
PATTERN_SLIDING_TYPES = {"gemma3": 6, "gemma3_text": 6}  # default sliding_window_pattern
LAYER_TYPE_NAMES = {"full_attention": "full", "sliding_attention": "sliding"}


class UnsupportedModel(ValueError):
    """The config describes a KV layout this module does not compute."""


@dataclass(frozen=True)
class KVSize:
    layout: str  # mha | gqa | mqa | mla
    tp: int
    dtype_bytes: int
    num_layers: int
    full_attention_layers: int
    sliding_window_layers: int
    sliding_window: int | None
    kv_heads: int  # total; 1 for MLA
    kv_heads_per_rank: int
    head_dim: int  # K + V width / 2 for attention; the latent width for MLA
    bytes_per_token: int  # per GPU, full-attention layers: the part that grows with context
    sliding_bytes_per_token: int  # per GPU, sliding-window layers (bounded per request)
    bytes_per_token_all_layers: int  # per GPU if sliding layers were budgeted as full attention
    bytes_per_token_all_ranks: int  # over the TP group (MLA: tp copies of the same latent)

    def per_request_bytes(self, tokens: int, max_num_batched_tokens: int | None = None, block_size: int = 16) -> int:
        """KV bytes one request of ``tokens`` holds on one GPU, rounded up to whole blocks."""
        full = math.ceil(tokens / block_size) * block_size * self.bytes_per_token
        if not self.sliding_window_layers:
            return full
        if max_num_batched_tokens is None or self.sliding_window is None:
            raise ValueError("a sliding-window model needs max_num_batched_tokens to size a request")
        held = min(self.sliding_window - 1 + max_num_batched_tokens, tokens)
        blocks = math.ceil(held / block_size) + 1  # vLLM keeps one extra block for the window edge
        return full + blocks * block_size * self.sliding_bytes_per_token


@dataclass(frozen=True)
class Concurrency:
    kv_cache_gib: float  # what is left for KV on one GPU (may be <= 0: nothing fits)
    gpu_blocks: int | None
    kv_tokens: int | None  # None for sliding-window models (vLLM's token count is per group there)
    max_concurrency: float  # requests of max_model_len that fit at once


def kv_bytes_per_token(config: dict[str, Any], tp: int = 1, dtype: str = "auto") -> KVSize:
    """KV-cache bytes per token for ``config`` (a parsed config.json) at tensor parallel ``tp``."""
    if tp < 1:
        raise ValueError(f"tensor parallel size must be >= 1, got {tp}")
    text = _text_config(config)
    model_type = str(text.get("model_type") or config.get("model_type") or "")
    _refuse_unsupported(text, model_type)
    layers = _first_int(text, ("num_hidden_layers", "n_layer", "num_layers"))
    if layers is None:
        raise UnsupportedModel("config has no num_hidden_layers (nor n_layer / num_layers)")
    if text.get("kv_lora_rank") is not None:
        return _mla_size(text, model_type, layers, tp, dtype)
    return _attention_size(text, model_type, layers, tp, dtype)


def _text_config(config: dict[str, Any]) -> dict[str, Any]:
    """Multimodal configs keep the language model under text_config."""
    nested = config.get("text_config")
    if isinstance(nested, dict) and "num_hidden_layers" not in config:
        return {**config, **nested}
    return config


def _refuse_unsupported(text: dict[str, Any], model_type: str) -> None:
    hybrid_keys = ("layers_block_type", "hybrid_override_pattern")
    if model_type in STATE_SPACE_MODEL_TYPES or any(key in text for key in hybrid_keys):
        raise UnsupportedModel(
            f"model_type {model_type!r} has Mamba/SSM or hybrid layers: their state is "
            "a fixed size per request, not per token; not modelled"
        )
    if text.get("attention_chunk_size"):
        raise UnsupportedModel(
            f"model_type {model_type!r} uses chunked-local attention (attention_chunk_size); not modelled"
        )
    unknown = {t for t in text.get("layer_types") or () if t not in LAYER_TYPE_NAMES}
    if unknown:
        raise UnsupportedModel(f"layer_types has kinds this module does not size: {sorted(unknown)}")


def _first_int(config: dict[str, Any], keys: tuple[str, ...]) -> int | None:
    for key in keys:
        value = config.get(key)
        if isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0:
            return int(value)
    return None


def _dtype_bytes(dtype: str, config: dict[str, Any]) -> int:
    name = dtype.lower()
    if name == "auto":
        name = str(config.get("torch_dtype") or config.get("dtype") or "").lower()
        if not name:
            raise ValueError("dtype 'auto' needs torch_dtype (or dtype) in config.json; pass the dtype")
    if name not in DTYPE_BYTES:
        raise ValueError(f"unknown KV-cache dtype {dtype!r}; known: {', '.join(sorted(DTYPE_BYTES))}")
    return DTYPE_BYTES[name]


def _mla_size(text: dict[str, Any], model_type: str, layers: int, tp: int, dtype: str) -> KVSize:
    if model_type not in MLA_MODEL_TYPES:
        raise UnsupportedModel(
            f"kv_lora_rank is set but model_type {model_type!r} is not a known MLA "
            "family; vLLM picks the MLA cache by model type"
        )
    latent = int(text["kv_lora_rank"]) + int(text.get("qk_rope_head_dim") or 0)
    if dtype.lower() in FIXED_MLA_BYTES:
        per_layer, element = FIXED_MLA_BYTES[dtype.lower()], 1
    else:
        element = _dtype_bytes(dtype, text)
        per_layer = latent * element
    per_gpu = layers * per_layer
    return KVSize("mla", tp, element, layers, layers, 0, None, 1, 1, latent, per_gpu, 0, per_gpu, per_gpu * tp)


def _attention_size(text: dict[str, Any], model_type: str, layers: int, tp: int, dtype: str) -> KVSize:
    heads = _first_int(text, ("num_attention_heads", "n_head", "num_heads"))
    kv_heads = _kv_heads(text, heads)
    head_dim = _first_int(text, ("head_dim", "hidden_size_per_head"))
    if head_dim is None:
        hidden = _first_int(text, ("hidden_size", "n_embd", "d_model"))
        if hidden is None or heads is None:
            raise UnsupportedModel("config gives neither head_dim nor hidden_size and num_attention_heads")
        head_dim = hidden // heads
    element = _dtype_bytes(dtype, text)
    per_rank = max(1, kv_heads // tp)
    per_layer = 2 * per_rank * head_dim * element
    kinds = _layer_kinds(text, model_type, layers)
    sliding = kinds.count("sliding")
    layout = "mqa" if kv_heads == 1 else "mha" if kv_heads == heads else "gqa"
    window = int(text["sliding_window"]) if sliding else None
    return KVSize(
        layout,
        tp,
        element,
        layers,
        layers - sliding,
        sliding,
        window,
        kv_heads,
        per_rank,
        head_dim,
        (layers - sliding) * per_layer,
        sliding * per_layer,
        layers * per_layer,
        layers * per_layer * tp,
    )


def _kv_heads(text: dict[str, Any], heads: int | None) -> int:
    if text.get("multi_query") and not text.get("new_decoder_architecture"):
        return 1  # Falcon-7B style multi-query attention
    kv_heads = _first_int(text, ("num_key_value_heads", "num_kv_heads", "n_head_kv", "multi_query_group_num"))
    if kv_heads is None:
        kv_heads = heads  # no KV-head field: plain multi-head attention
    if kv_heads is None:
        raise UnsupportedModel("config has no num_attention_heads nor num_key_value_heads")
    return kv_heads


def _layer_kinds(text: dict[str, Any], model_type: str, layers: int) -> list[str]:
    """'full' or 'sliding' per layer (see the tables at the top for where each rule comes from)."""
    declared = text.get("layer_types")
    if declared:
        if len(declared) != layers:
            raise UnsupportedModel(f"layer_types lists {len(declared)} layers, num_hidden_layers is {layers}")
        return [LAYER_TYPE_NAMES[t] for t in declared]
    window = text.get("sliding_window")
    if not window or text.get("use_sliding_window") is False:
        return ["full"] * layers
    if text.get("use_sliding_window") is True and "max_window_layers" in text:
        first_sliding = int(text["max_window_layers"])  # Qwen2: layers from max_window_layers on
        return ["sliding" if i >= first_sliding else "full" for i in range(layers)]
    if model_type in ALL_LAYERS_SLIDING_TYPES:
        return ["sliding"] * layers
    if model_type in ALTERNATING_SLIDING_TYPES:
        return ["sliding" if i % 2 == 0 else "full" for i in range(layers)]
    if model_type in PATTERN_SLIDING_TYPES:
        pattern = int(text.get("sliding_window_pattern") or PATTERN_SLIDING_TYPES[model_type])
        return ["full" if (i + 1) % pattern == 0 else "sliding" for i in range(layers)]
    raise UnsupportedModel(
        f"sliding_window={window} on model_type {model_type!r} without layer_types: "
        "cannot tell which layers use the window"
    )


def max_concurrency(
    kv: KVSize,
    gpu_mem_gib: float,
    utilization: float,
    weights_gib: float,
    max_model_len: int,
    non_kv_gib: float = 0.0,
    block_size: int = 16,
    max_num_batched_tokens: int | None = None,
) -> Concurrency:
    """How many ``max_model_len`` requests the KV cache of one GPU holds (vLLM budget, docs/sources.md#vllm-kv-cache).

    ``gpu_mem_gib`` is the card's total memory, ``utilization`` vLLM's gpu_memory_utilization,
    ``weights_gib`` the weights per GPU, ``non_kv_gib`` the activation peak plus non-torch memory
    (vLLM logs both). Blocks are whole ``block_size`` token pages, as vLLM allocates them.
    """
    if max_model_len < 1:
        raise ValueError("max_model_len must be >= 1")
    available_gib = gpu_mem_gib * utilization - weights_gib - non_kv_gib
    available = max(0.0, available_gib) * GIB
    if kv.sliding_window_layers:
        per_request = kv.per_request_bytes(max_model_len, max_num_batched_tokens, block_size)
        return Concurrency(available_gib, None, None, available / per_request)
    blocks = int(available // (block_size * kv.bytes_per_token))
    tokens = blocks * block_size
    return Concurrency(available_gib, blocks, tokens, tokens / max_model_len)
