"""engine-start runbook: rehearsals on real logs, and the start-up categories the corpus cannot show.

Lines in the composed logs below are written here in the wording of each program's own error
message (the source named in engine_log.ERROR_CLASSES), not copied from a report.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from nightowl.collectors.serving.engine_log import ERROR_CLASSES, parse
from nightowl.library import runbooks
from nightowl.library.rehearse import rehearsal_cases, rehearse
from tests.helpers import ROOT
from tests.runbook_helpers import make_host, run_on
from tests.runbooks.test_rehearsals import NOT_IN_CORPUS

V1_PREFIX = "(EngineCore_DP0 pid=4242) ERROR 01-02 03:04:05 [core.py:700] "


@pytest.mark.parametrize("case", rehearsal_cases("engine-start"), ids=lambda c: c["name"][:50])
def test_rehearsal(case: dict) -> None:
    result = rehearse("engine-start", case)
    assert result.passed, f"{result.problems} (path {result.path})"


@pytest.mark.parametrize(
    ("line", "verdict"),
    [
        (
            "RuntimeError: The NVIDIA driver on your system is too old (found version 11040).",
            "driver-older-than-runtime",
        ),
        (
            "RuntimeError: CUDA error: CUDA driver version is insufficient for CUDA runtime version",
            "driver-older-than-runtime",
        ),
        (
            "huggingface_hub.errors.OfflineModeIsEnabled: Cannot reach https://huggingface.co/api/models/x/y: "
            "offline mode is enabled.",
            "hub-unreachable",
        ),
        ("OSError: We couldn't connect to 'https://huggingface.co' to load this file", "hub-unreachable"),
        (
            "ValueError: Model architectures ['FancyForCausalLM'] are not supported for now.",
            "architecture-not-supported",
        ),
        (
            "RuntimeError: CUDA error: no kernel image is available for execution on the device",
            "architecture-not-supported",
        ),
        (
            "OSError: [Errno 98] error while attempting to bind on address ('0.0.0.0', 8000): address already in use",
            "port-in-use",
        ),
        (
            "RuntimeError: The server socket has failed to listen on any local network address. "
            "port: 29500, useIpv6: 0, code: -98, name: EADDRINUSE, message: address already in use",
            "port-in-use",
        ),
        ("Fatal Python error: Bus error", "shm-bus-error"),
    ],
)
def test_categories_from_composed_logs(tmp_path: Path, line: str, verdict: str) -> None:
    log = "INFO 01-02 03:04:00 [api_server.py:1000] vLLM API server version 0.9.0\n" + V1_PREFIX + line + "\n"
    host = make_host(tmp_path, "composed", {"engine-log.out": log})
    result, path = run_on("engine-start", host)
    assert result["id"] == verdict, (result, path)
    assert result["action"] in ("reconfigure", "escalate")


def test_a_named_cause_outranks_the_exit_status(tmp_path: Path) -> None:
    log = V1_PREFIX + "OSError: [Errno 98] Address already in use\nvllm exited with code 1\n"
    host = make_host(tmp_path, "port", {"engine-log.out": log})
    assert run_on("engine-start", host)[0]["id"] == "port-in-use"
    assert run_on("engine-start", host, {"exit_code": 137})[0]["id"] == "port-in-use"


def test_exit_1_without_a_recognised_error(tmp_path: Path) -> None:
    log = "INFO 01-02 03:04:00 [api_server.py:1000] vLLM API server version 0.9.0\nTraceback (most recent call last):\n"
    host = make_host(tmp_path, "exit1", {"engine-log.out": log})
    verdict, path = run_on("engine-start", host, {"exit_code": 1})
    assert verdict["id"] == "engine-error" and "(exit 1)" in verdict["summary"]
    assert "no error line was recognised" in verdict["summary"]


def test_container_state_tells_oom_kill_from_external_kill(tmp_path: Path) -> None:
    # `docker inspect` shape (State.OOMKilled, State.ExitCode), composed; the log is the real ScaleLLM one
    log = (ROOT / "fixtures" / "hosts" / "engine-start-exit-137" / "engine-log.out").read_text()
    oom_killed = json.dumps([{"Name": "/vllm", "RestartCount": 1, "State": {"OOMKilled": True, "ExitCode": 137}}])
    host = make_host(tmp_path, "oomkilled", {"engine-log.out": log, "container-state.out": oom_killed})
    verdict, _ = run_on("engine-start", host, {"container": "vllm"})
    assert verdict["id"] == "host-oom-killed" and "OOMKilled" in verdict["summary"]
    external = json.dumps([{"Name": "/vllm", "RestartCount": 1, "State": {"OOMKilled": False, "ExitCode": 137}}])
    host = make_host(tmp_path, "external", {"engine-log.out": log, "container-state.out": external})
    assert run_on("engine-start", host, {"container": "vllm"})[0]["id"] == "killed-exit-137"


def test_no_log_and_no_exit_status(tmp_path: Path) -> None:
    host = make_host(
        tmp_path, "nolog", {"engine-log.rc": "1\n", "engine-log.err": "-- No entries --\n", "container-state.rc": "1\n"}
    )
    verdict, path = run_on("engine-start", host)
    assert verdict == {} and path[0] == "collect"  # every collector failed: no verdict (exit 3)


def test_gpu_unavailable_pattern_on_the_corpus_traceback() -> None:
    text = (ROOT / "fixtures" / "corpus" / "gpu" / "cuda-busy-unavailable-traceback-gb200-dradriver982.txt").read_text()
    assert [e.kind for e in parse(text).errors] == ["gpu-unavailable"]


def test_error_classes_carry_sources() -> None:
    assert all(error.source for error in ERROR_CLASSES)
    kinds = {error.kind for error in ERROR_CLASSES}
    for needed in (
        "driver-too-old",
        "hub-unreachable",
        "unsupported-architecture",
        "port-in-use",
        "nccl",
        "gpu-unavailable",
        "shm-bus-error",
    ):
        assert needed in kinds


def test_every_verdict_is_rehearsed_or_composed_here() -> None:
    loaded = runbooks.load("engine-start")
    verdicts = {n.verdict.id for n in loaded.runbook.nodes.values() if n.verdict}
    rehearsed = {c["expect"]["verdict"] for c in rehearsal_cases("engine-start") if "verdict" in c["expect"]}
    composed_here = NOT_IN_CORPUS["engine-start"]  # the verdicts no public log shows, listed there
    assert composed_here and verdicts == rehearsed | composed_here
