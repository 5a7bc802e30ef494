"""engine-log: the facts of every era's wordings (cases with a "facts" key), line clean-up, linear patterns."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nightowl.collectors.serving import engine_log, engine_log_eras
from tests.helpers import ROOT, load_cases
from tests.hostile.watchdog import LINEAR_SECONDS, finishes_within


def test_an_oom_without_phase_is_an_excerpt_without_context() -> None:
    for _, case in load_cases("engine-log"):
        lines = engine_log_eras.normalize((ROOT / case["input"]).read_text().splitlines())
        result = engine_log.parse("\n".join(lines))
        if result.oom is not None and result.oom.phase is None:
            assert engine_log._progress(lines) == (None, None), case["input"]
            assert engine_log._hinted_phase(lines) is None, case["input"]


def test_terminal_wraps_are_joined_and_labels_are_not() -> None:
    wrapped = [
        "(EngineCore pid=316) ValueError: To serve at least one request with the model's max seq len (100000), "
        "(4.26 GiB KV cach",
        "e is needed, which is larger than the available KV cache memory (4.25 GiB).",
        "note: run with `RUST_BACKTRACE=1` environment variable to display a backtrace",
    ]
    lines = engine_log_eras.normalize(wrapped)
    assert len(lines) == 2 and "(4.26 GiB KV cache is needed" in lines[0]
    assert lines[1].startswith("note: ")


def test_k9s_frames_are_removed() -> None:
    line = "│ 2023-07-19T21:00:08Z  INFO text_generation_launcher: Shard ready in 12.3s                   │"
    assert engine_log_eras.normalize([line]) == [
        "2023-07-19T21:00:08Z  INFO text_generation_launcher: Shard ready in 12.3s"
    ]


@pytest.mark.parametrize(
    ("message", "holder"),
    [
        (
            "GPU 0 has a total capacity of 8 GiB of which 1 GiB is free. Including non-PyTorch memory, "
            "this process has 5 GiB memory in use.",
            "self",
        ),
        (
            "GPU 0 has a total capacity of 8 GiB of which 1 GiB is free. Process 12 has 3 GiB memory in use. "
            "Including non-PyTorch memory, this process has 4 GiB memory in use.",
            "other",
        ),
        (
            "GPU 0 has a total capacity of 8 GiB of which 1 GiB is free. Process 12 has 7 GiB memory in use.",
            "unknown-process",
        ),
    ],
)
def test_who_holds_the_gpu_at_an_oom(message: str, holder: str) -> None:
    result = engine_log.parse("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. " + message)
    facts = engine_log.facts(result)
    assert facts["oom_holder"] == holder
    # only a message listing this process AND another proves another process holds the GPU
    assert facts["oom_kind"] == ("gpu-occupied" if holder == "other" else "cuda-oom")


def test_blocks_that_fit_derive_nothing() -> None:
    text = "INFO llm_engine.py:70] Initializing an LLM engine with config: max_seq_len=2048, block_size=32\n"
    text += "# GPU blocks: 64"
    result = engine_log.parse(text)
    assert result.kv_too_small is None and result.oom is None  # 64 x 32 = 2048 tokens: fits
    smaller = engine_log.parse(text.replace("blocks: 64", "blocks: 63"))
    assert smaller.kv_too_small is not None and smaller.kv_too_small.kv_tokens == 2016


@settings(max_examples=40, deadline=None)
@given(
    st.sampled_from(["Capture cuda graph end. ", "kv_cache_free_gpu_mem_fraction ", "Requested", "Process 1 has "]),
    st.sampled_from([" ", "a", "1", ": ", "=1 ", "│"]),
)
def test_hostile_lines_are_read_at_once(head: str, piece: str) -> None:
    # 20 000 repeats: a quadratic pattern would take minutes here.
    finishes_within(LINEAR_SECONDS, engine_log.parse, head + piece * 20_000)


def test_torch_before_2_1_oom_with_an_allowed_field_reads_every_size() -> None:
    """The real TGI 866 message (torch < 2.1 with a memory fraction) has an 'allowed' field between free
    and reserved: all four sizes are read, so the memory held outside PyTorch can be told (15.77 - 0.01 - 15.40)."""
    sample = "tgi-1.0-legacy-oom-rank0-shard-cannot-start-flan-ul2-v100-issue866.txt"
    text = (ROOT / "fixtures" / "corpus-extra" / "engine-log" / sample).read_text()
    facts = engine_log.facts(engine_log.parse(text))
    assert facts["oom"]["total_gib"] == 15.77 and facts["oom"]["allocated_by_pytorch_gib"] == 15.37
    assert round(facts["oom"]["reserved_unallocated_gib"], 2) == 0.03
    assert facts["oom_outside_pytorch_gib"] == 0.36
