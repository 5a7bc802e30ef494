"""engine_log.engine_name: the engine as verdicts name it, from engine_log.yaml's engine_names (one map, not one
per summary of oom.yaml)."""

from __future__ import annotations

import pytest

from nightowl import knowledge
from nightowl.collectors.serving import engine_log

VLLM = "INFO 05-01 10:00:00 [gpu_worker.py:100] Loading model weights took 10.0 GB\n"
SGLANG = "[2025-05-01 10:00:00 TP0] Load weight begin. avail mem=79.00 GB (sglang)\n"


@pytest.mark.parametrize(("text", "name"), [(VLLM, "vLLM"), (SGLANG, "SGLang"), ("no engine here\n", None)])
def test_the_fact_names_the_engine(text: str, name: str | None) -> None:
    assert engine_log.facts(engine_log.parse(text))["engine_name"] == name


def test_the_name_is_the_tables(monkeypatch: pytest.MonkeyPatch) -> None:
    """Change the row and the fact follows: the name is data."""
    real = knowledge.read_yaml("engine_log.yaml")
    changed = {**real, "engine_names": [{"engine": "vllm", "name": "vLLM-next", "source": "test"}]}
    monkeypatch.setattr(engine_log.knowledge, "read_yaml", lambda name: changed if name == "engine_log.yaml" else None)
    engine_log.engine_names.cache_clear()
    try:
        assert engine_log.facts(engine_log.parse(VLLM))["engine_name"] == "vLLM-next"
    finally:
        engine_log.engine_names.cache_clear()


def test_oom_writes_the_map_nowhere() -> None:
    from nightowl.library import runbooks

    text = runbooks.builtin_paths()["oom"].read_text()
    assert "'sglang': 'SGLang'" not in text and text.count("engine_log.engine_name") == 4
