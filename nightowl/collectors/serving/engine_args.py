"""The serving engine's arguments, read from its start-up log or from the container's command line.

Pure helpers for ``engine-log`` and ``container-state`` (not a collector of their own):

* vLLM V1 logs the arguments that differ from their defaults once at start-up:
  ``non-default args: {'model': '/models/x', 'max_model_len': 16384, ...}`` (vllm-project/vllm
  vllm/entrypoints/utils.py ``log_non_default_args``; fixtures/corpus/serving issue 27466);
* older vLLM logs its whole engine config: ``Initializing an LLM engine (v0.4.0) with config:
  model='/m', tokenizer='/m', ..., max_seq_len=4096, ...`` (vllm/engine/llm_engine.py; corpus-extra
  engine-log issue 2418);
* a container's command line (``docker inspect`` ``Args``, a pod's ``command`` + ``args``):
  ``--max-model-len 8192``, ``--enforce-eager``, ``--gpu-memory-utilization=0.9``.

Every value becomes a short display string (``on``/``off`` for booleans, lists joined by commas) so a
verdict can name it as is. Keys that carry secrets or only say where the server listens are
dropped: they differ between replicas on purpose, or must never reach a verdict.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

NON_DEFAULT = re.compile(r"non-default args: (\{.*\})\s*$")
V0_CONFIG = re.compile(r"Initializing an LLM engine(?: \(v?[\w.+-]+\))? with config: (.*?)\)?\s*$")
# Listening address and secrets: per-replica by design, or never to be printed.
IGNORED = frozenset({"host", "port", "model_tag", "uvicorn_log_level", "ssl_keyfile", "ssl_certfile"})
SECRET = re.compile(r"(?:^|_)(?:key|token)$|secret|password|credential", re.I)  # api_key, hf_token; not tokenizer


def display(value: Any) -> str:
    """A value as a person writes it: on/off, plain numbers, lists joined by commas, never a Python repr."""
    if isinstance(value, bool):
        return "on" if value else "off"
    if value is None:
        return "none"
    if isinstance(value, (list, tuple, set)):
        return ",".join(display(v) for v in value)
    if isinstance(value, Mapping):
        return " ".join(f"{k}={display(v)}" for k, v in value.items())
    return str(value).strip("'\"")


def _kept(pairs: Iterable[tuple[str, Any]]) -> dict[str, str]:
    return {k: display(v) for k, v in pairs if k not in IGNORED and not SECRET.search(k)}


def from_log(lines: Sequence[str]) -> tuple[dict[str, str], str | None]:
    """(arguments, source) from the last start-up line that lists them; ({}, None) when there is none.

    source is ``non-default`` (V1: absent means default) or ``config`` (V0: the whole config).
    """
    for line in reversed(lines):
        match = NON_DEFAULT.search(line)
        if match:
            return _kept(_literal_dict(match.group(1)).items()), "non-default"
        match = V0_CONFIG.search(line)
        if match:
            return _kept(_config_pairs(match.group(1))), "config"
    return {}, None


def _literal_dict(text: str) -> dict[str, Any]:
    """The logged dict; a value that is not a Python literal (an object repr) is kept as its text."""
    try:
        value = ast.literal_eval(text)
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        return dict(_config_pairs(text.strip("{}"), sep=":"))
    return value if isinstance(value, dict) else {}


def _split_top(text: str) -> list[str]:
    """Split at commas outside brackets and quotes."""
    parts, depth, quote, start = [], 0, "", 0
    for i, char in enumerate(text):
        if quote:
            quote = "" if char == quote else quote
        elif char in "'\"":
            quote = char
        elif char in "([{":
            depth += 1
        elif char in ")]}":
            depth -= 1
        elif char == "," and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    parts.append(text[start:])
    return [p.strip() for p in parts if p.strip()]


def _config_pairs(text: str, sep: str = "=") -> list[tuple[str, Any]]:
    pairs = []
    for part in _split_top(text):
        key, found, value = part.partition(sep)
        if found:
            pairs.append((key.strip().strip("'\""), _scalar(value.strip())))
    return pairs


def _scalar(text: str) -> Any:
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        return text


def from_argv(argv: Sequence[str]) -> dict[str, str]:
    """``--max-model-len 8192 --enforce-eager --dtype=half`` -> {max_model_len: 8192, enforce_eager: on, dtype: half}.

    Positional words before the first option (the program, ``serve MODEL``) are skipped, except that
    ``vllm serve MODEL`` names the model.
    """
    args: list[tuple[str, Any]] = []
    words = [str(w) for w in argv]
    if "serve" in words:
        at = words.index("serve")
        if at + 1 < len(words) and not words[at + 1].startswith("-"):
            args.append(("model", words[at + 1]))
    i = 0
    while i < len(words):
        word = words[i]
        i += 1
        if not word.startswith("--") or word == "--":
            continue
        name, eq, text = word[2:].partition("=")
        value: Any = text
        if not eq:
            if i < len(words) and not words[i].startswith("--"):
                value, i = words[i], i + 1
            else:
                value = True  # a flag alone
        args.append((name.replace("-", "_"), value))
    return _kept(args)
