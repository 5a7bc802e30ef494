"""Fixes the twelfth field set called for in the NCCL log's reading (issue "Never cry wolf"): a job log holding only
PyTorch's "CUDA error: uncorrectable ECC error encountered" (jade-hpc-gpu#194) was unreadable, and NCCL's init
failing on "Cuda failure 999" (NVIDIA/nccl#1653) was a network misconfiguration."""

from __future__ import annotations

from pathlib import Path

from nightowl.collectors.coverage import assess
from tests.helpers import ROOT, facts_of, replayed_action

ECC = (
    "RuntimeError: CUDA error: uncorrectable ECC error encountered\n"
    "CUDA kernel errors might be asynchronously reported at some other API call, so the stacktrace below might be "
    "incorrect.\nFor debugging consider passing CUDA_LAUNCH_BLOCKING=1.\n"
)


def _action(tmp_path: Path, log: str) -> str:
    params = ("--param", "nccl_log=/var/log/nccl.log")
    return replayed_action(tmp_path, "nccl-hang", {"nccl-log.out": log}, "nccl-healthy-ib", params)


def test_a_cuda_error_line_is_known_structure_of_a_job_log() -> None:
    coverage = assess("nccl-log", ECC, facts_of("nccl-log", ECC))["coverage"]
    assert coverage["understood"] is True and coverage["recognised"] == 1


def test_a_job_log_of_an_uncorrectable_ecc_error_alone_is_a_gpu_fault(tmp_path: Path) -> None:
    assert _action(tmp_path, ECC) == "drain-and-reset"


def test_an_init_that_fails_on_a_cuda_failure_is_escalated_not_reconfigured(tmp_path: Path) -> None:
    log = (ROOT / "fixtures/hosts/nccl-cuda-failure-init/nccl-log.out").read_text()
    assert _action(tmp_path, log) == "escalate"
    network = log.replace("Cuda failure 999 'unknown error'", "Connection refused")
    assert _action(tmp_path, network) != "escalate"
