"""Engine start-up arguments from real log lines and from container command lines."""

from __future__ import annotations

import json
from pathlib import Path

from nightowl.collectors.serving import container_state, engine_log
from nightowl.collectors.serving.engine_args import from_argv

ROOT = Path(__file__).resolve().parents[3] / "fixtures"


def test_v1_non_default_args_line() -> None:
    text = (ROOT / "corpus/serving/vllm_v0.11.0_startup_args_gpu_util_0.98_qwen3vl_issue27466.txt").read_text()
    result = engine_log.parse(text)
    assert result.engine_args_source == "non-default"
    assert result.engine_args["max_model_len"] == "16384" and result.engine_args["served_model_name"] == "qwenvl"
    assert "port" not in result.engine_args and "host" not in result.engine_args  # per replica by design


def test_v0_engine_config_line() -> None:
    name = "vllm-0.2.7-gpu-blocks-229-cpu-blocks-512-then-traceback-issue2418.txt"
    result = engine_log.parse((ROOT / "corpus-extra/engine-log" / name).read_text())
    assert result.engine_args_source == "config"
    assert result.engine_args["max_seq_len"] == "4096" and result.engine_args["enforce_eager"] == "off"
    assert result.engine_args["tokenizer"].endswith("alpaca-2")


def test_command_line_drops_secrets_and_reads_flags() -> None:
    args = from_argv(["vllm", "serve", "/m", "--max-num-seqs", "128", "--enforce-eager", "--api-key", "sk-x"])
    assert args == {"model": "/m", "max_num_seqs": "128", "enforce_eager": "on"}


def test_container_image_node_and_args() -> None:
    pod = {
        "spec": {
            "nodeName": "gpu-7",
            "containers": [{"name": "vllm", "image": "vllm/vllm-openai:v0.6.3", "args": ["--dtype=half"]}],
        },
        "status": {"containerStatuses": [{"name": "vllm", "restartCount": 0, "state": {"running": {}}}]},
    }
    state = container_state.parse(json.dumps(pod))
    assert (state.image, state.node, state.engine_args) == ("vllm/vllm-openai:v0.6.3", "gpu-7", {"dtype": "half"})
    docker = [
        {"Name": "/v", "Args": ["--max-model-len", "8192"], "Config": {"Image": "img:1"}, "State": {"ExitCode": 0}}
    ]
    state = container_state.parse(json.dumps(docker))
    assert (state.image, state.node, state.engine_args) == ("img:1", None, {"max_model_len": "8192"})
