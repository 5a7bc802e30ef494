"""Model config.json values as published on the Hugging Face hub, shared by the KV-size and floor tests.

Each holds the fields the sizing reads; a test adds what it needs besides (its context length, vocabulary).
"""

from __future__ import annotations

# https://huggingface.co/meta-llama/Llama-3.1-8B/blob/main/config.json (Llama 3 8B has the same shape)
LLAMA_31_8B = {
    "model_type": "llama",
    "num_hidden_layers": 32,
    "num_attention_heads": 32,
    "num_key_value_heads": 8,
    "hidden_size": 4096,
    "torch_dtype": "bfloat16",
}
# https://huggingface.co/meta-llama/Llama-3.1-70B/blob/main/config.json
LLAMA_31_70B = {
    "model_type": "llama",
    "num_hidden_layers": 80,
    "num_attention_heads": 64,
    "num_key_value_heads": 8,
    "hidden_size": 8192,
    "torch_dtype": "bfloat16",
}
# https://huggingface.co/deepseek-ai/DeepSeek-V3/blob/main/config.json: multi-head latent attention (MLA)
DEEPSEEK_V3_ATTENTION = {
    "model_type": "deepseek_v3",
    "num_hidden_layers": 61,
    "num_attention_heads": 128,
    "num_key_value_heads": 128,
    "hidden_size": 7168,
    "kv_lora_rank": 512,
    "qk_rope_head_dim": 64,
}
