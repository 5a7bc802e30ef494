"""Engine-log wordings of every era (issue 13), kept apart from the tables of ``engine_log``.

vLLM from 0.1 to V1, TGI 0.9 to 2.x, SGLang 0.3 to today and TensorRT-LLM (C++ runtime, Triton
backend and PyTorch executor) say the same things in different words. Their start-up markers,
traceback hints, failures, error classes and logged values are rows of nightowl/knowledge/engine_log.yaml
(values: one row type, read by ``engine_log.values``). Each row names the public report it was read from
(samples and sources: fixtures/corpus-extra/engine-log/SOURCE.md). This module undoes what terminals and
log viewers do to lines (k9s frames, hard wraps) and derives the facts the runbooks need from old logs
that never print the final error (vLLM <= 0.4 block counts against the model length).
"""

from __future__ import annotations

import re
from typing import Any

from nightowl.collectors.base import number

# vLLM allocates KV memory in blocks of 16 tokens unless --block-size says otherwise (vllm/config.py
# CacheConfig default block_size=16 in every release from 0.1 to V1).
VLLM_DEFAULT_BLOCK_SIZE = 16


# --- line clean-up ----------------------------------------------------------------------------------
_WRAPPABLE_END = re.compile(r"[A-Za-z0-9_]$")
_WRAPPED_START = re.compile(r"[a-z_]")
_LABEL_START = re.compile(r"[a-z_]+: ")  # "note: run with ..." starts a line of its own
_WRAP_WIDTH = 79  # terminals wrap at 80 columns or more


def normalize(lines: list[str]) -> list[str]:
    """Lines as the engine wrote them: k9s frames removed, terminal hard wraps joined back.

    A wrap is a long line ending inside a word followed by one starting in lower case with no log
    prefix ("... (4.26 GiB KV cach" / "e is needed, ..."; vLLM V1 pasted from a terminal).
    """
    out: list[str] = []
    for line in _records(lines):
        stripped = line.strip()
        if stripped.startswith("│"):  # k9s / box-drawing log viewer frame (TGI issue 653)
            line = stripped[1:].removesuffix("│").strip()
        if (
            out
            and len(out[-1]) >= _WRAP_WIDTH
            and _WRAPPED_START.match(line)
            and _WRAPPABLE_END.search(out[-1])
            and " | " not in line[:40]
            and not _LABEL_START.match(line)
        ):
            out[-1] += line
            continue
        out.append(line)
    return out


# Where an engine's log record starts: vLLM's "ERROR 06-19 11:25:01 ", TGI's "2024-08-30T18:59:12.959986Z  INFO ",
# SGLang's "[2024-08-30 18:59:12 TP0] ". A page that lost the log's newlines (a paste into a form, a web view)
# runs the records together on one line, each head after a blank.
_RECORD_HEAD = re.compile(
    r"(?<= )(?:(?:INFO|WARNING|ERROR|DEBUG|CRITICAL) \d\d-\d\d \d\d:\d\d:\d\d "
    r"|\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d+Z +(?:INFO|WARN|ERROR|DEBUG) "
    r"|\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(?: [A-Z]+\d+)*\] )"
)


def _records(lines: list[str]) -> list[str]:
    """Each record on a line of its own where a page ran records together (a line that starts with a record's
    head and holds another, or holds two or more: a prefix such as "(APIServer pid=1) " before each); other
    lines as they are."""
    out: list[str] = []
    for line in lines:
        heads = [m.start() for m in _RECORD_HEAD.finditer(line)] if len(line) > 120 else []
        if len(heads) < 2 - bool(heads and _RECORD_HEAD.match(" " + line[:48], 1)):
            out.append(line)
            continue
        starts = [0, *heads]
        out.extend(line[a:b].rstrip() for a, b in zip(starts, [*heads, len(line)], strict=True) if line[a:b].strip())
    return out


def kv_extras(found: dict[str, Any]) -> dict[str, Any]:
    """KV figures only these eras print (engine_log.yaml ``kv_extras`` values, as ``engine_log.values``
    reads them): TRT-LLM bytes, SGLang K and V sizes (summed into GiB)."""
    extras: dict[str, Any] = {}
    if "tokens" in found:
        extras["tokens"] = found["tokens"]
    if "kv_cache_bytes" in found:
        extras["kv_cache_gib"] = round(found["kv_cache_bytes"] / 2**30, 2)
    if "k_gib" in found and "v_gib" in found:
        extras["kv_cache_gib"] = round(found["k_gib"] + found["v_gib"], 2)
    return extras


def derived_kv_too_small(engine: str | None, kv: dict[str, Any], settings: dict[str, Any]) -> dict[str, Any] | None:
    """vLLM <= 0.4 logged "# GPU blocks: N" and then refused a model length above N x block size; the
    refusal is often cut from a paste. Fields as engine_log.KVTooSmall, or None when it fits or is unknown."""
    if engine not in ("vllm", None):
        return None
    blocks, max_len = kv.get("gpu_blocks"), settings.get("max_model_len")
    if not isinstance(blocks, int) or not isinstance(max_len, int):
        return None
    capacity = blocks * int(settings.get("block_size") or VLLM_DEFAULT_BLOCK_SIZE)
    if capacity >= max_len:
        return None
    return {"max_model_len": max_len, "kv_tokens": capacity}


# --- the OOM message: who holds the memory ----------------------------------------------------------
SIZE = r"(-?[\d.]+)\s*(bytes|B|KiB|MiB|GiB|TiB|KB|MB|GB|TB)\b"
_SIZE = SIZE
# PyTorch, SGLang and TGI print binary sizes; "GB" in their logs means GiB as well.
GIB_PER_UNIT = {
    "bytes": 2**-30, "B": 2**-30, "KiB": 2**-20, "KB": 2**-20, "MiB": 2**-10, "MB": 2**-10,
    "GiB": 1.0, "GB": 1.0, "TiB": 1024.0, "TB": 1024.0,
}  # fmt: skip
_OTHER_PROCESS = re.compile(r"Process (\d+) has " + _SIZE + r" memory in use")
_THIS_PROCESS = re.compile(r"this process has " + _SIZE + r" memory in use")
# TGI 0.9 panic: "Currently allocated     : 16.08 GiB\nRequested               : 4.83 GiB\nDevice limit : 22.20 GiB"
_TGI_FIELDS = (
    ("tried_gib", re.compile(r"Requested\s*: " + _SIZE)),
    ("total_gib", re.compile(r"Device limit\s*: " + _SIZE)),
    ("free_gib", re.compile(r"Free \(according to CUDA\)\s*: " + _SIZE)),
    ("allocated_by_pytorch_gib", re.compile(r"Currently allocated\s*: " + _SIZE)),
)


def gib(value: str, unit: str) -> float | None:
    """A size as the engines print it (``15.77``, ``GiB``) in GiB; None when it is not one."""
    amount = number(value)
    if amount is None or unit not in GIB_PER_UNIT:
        return None
    return float(amount) * GIB_PER_UNIT[unit]


def oom_sizes(line: str) -> dict[str, float | None]:
    """Sizes of OOM wordings engine_log's table does not read (TGI's Rust panic)."""
    sizes: dict[str, float | None] = {}
    for name, pattern in _TGI_FIELDS:
        match = pattern.search(line)
        if match:
            sizes[name] = gib(match.group(1), match.group(2))
    return sizes


def oom_holders(text: str) -> dict[str, Any]:
    """Who holds the GPU's memory, from the OOM message (PyTorch >= 2.1 lists every process NVML sees:
    itself as "this process", the others as "Process N"; inside a container NVML's PIDs are the host's,
    so the engine itself can show as "Process N").

    ``oom_holder``: ``self`` (only this process listed), ``other`` (this process and others listed:
    another process surely holds memory), ``unknown-process`` (only "Process N" lines: another process,
    or this one seen from a container), None when the message lists no process.
    """
    others = [(int(m.group(1)), gib(m.group(2), m.group(3))) for m in _OTHER_PROCESS.finditer(text)]
    this = _THIS_PROCESS.search(text)
    holder = None
    if this and others:
        holder = "other"
    elif this:
        holder = "self"
    elif others:
        holder = "unknown-process"
    return {
        "oom_holder": holder,
        "oom_processes": [{"pid": pid, "in_use_gib": size} for pid, size in others],
        "oom_other_processes_gib": round(sum(s or 0.0 for _, s in others), 2) if others else None,
    }


def outside_pytorch_gib(oom: dict[str, Any] | None) -> float | None:
    """GPU memory in use but not by this process's PyTorch allocator (other processes, TRT engines,
    CUDA contexts, NCCL buffers): total - free - what PyTorch reserved. None when a size is missing."""
    if not oom:
        return None
    total, free = oom.get("total_gib"), oom.get("free_gib")
    if oom.get("allocated_by_pytorch_gib") is not None and oom.get("reserved_unallocated_gib") is not None:
        reserved = oom["allocated_by_pytorch_gib"] + oom["reserved_unallocated_gib"]
    else:
        reserved = None
    if total is None or free is None or reserved is None:
        return None
    return round(max(0.0, total - free - reserved), 2)
