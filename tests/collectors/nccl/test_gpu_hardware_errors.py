"""A rank's CUDA call failing on a GPU hardware fault (the CUDA runtime's words for cudaErrorECCUncorrectable and
cudaErrorNvlinkUncorrectable) is read from a job's log: the eighth field set's training log (kohya-ss/sd-scripts#1434)
was "nothing in the logs"."""

from __future__ import annotations

import pytest

from tests.helpers import facts_of


@pytest.mark.parametrize(
    "line",
    [
        "RuntimeError: CUDA error: uncorrectable ECC error encountered",
        "[E ProcessGroupNCCL.cpp:916] [Rank 1] NCCL watchdog thread terminated with exception: CUDA error: "
        "uncorrectable ECC error encountered",
        "node:12:40 [3] NCCL WARN Cuda failure 'uncorrectable NVLink error detected during the execution'",
    ],
)
def test_a_cuda_hardware_fault_is_an_error_kind(line: str) -> None:
    assert "gpu_hardware_error" in facts_of("nccl-log", line + "\n")["error_kinds"]


def test_other_cuda_errors_are_not_hardware() -> None:
    line = "RuntimeError: CUDA error: an illegal memory access was encountered\n"
    assert "gpu_hardware_error" not in facts_of("nccl-log", line)["error_kinds"]
