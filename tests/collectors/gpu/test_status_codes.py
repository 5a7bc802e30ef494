"""Driver status codes printed as numbers (nightowl/knowledge/nv_status_codes.csv, kernel_log/status_codes.py).

The field set's nvidia-modeset lines (NVIDIA/open-gpu-kernel-modules#1252) end in a status tuple whose last
field is 0x00000062, NV_ERR_RESET_REQUIRED: a GPU that needs a reset, said only by number and only by
nvidia-modeset, was read as a healthy log.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from nightowl.collectors.gpu.kernel_log import status_codes
from tests.helpers import ROOT, facts_of, replayed_action

FIELD_SAMPLE = (
    ROOT / "fixtures/field/kernel-log/indented-no-stamp-nvidia-modeset-display-engine-errors-unload-ogkm-pr1252.txt"
)
MODESET = "nvidia-modeset: ERROR: GPU:{gpu}: Failed to query display engine channel state: 0x0000ca7e:0:0:0x{code}"
FORMS = {
    "bare": "{line}\n",
    "dmesg": "[ 8191.331802] {line}\n",
    "journal": "Mar 03 10:12:01 ws kernel: {line}\n",
    "indented": "      {line}\n",
}


@pytest.mark.parametrize(
    ("message", "name"),
    [
        ("ERROR: GPU:0: Failed to query display engine channel state: 0x0000ca7e:0:0:0x00000062", "RESET_REQUIRED"),
        ("_issueRpcAndWait: rpcSendMessage failed with status 0x0000000f for fn 78 sequence 7869!", "GPU_IS_LOST"),
        ("GPU0 kgspRpc: status=0x00000010", "GPU_IN_FULLCHIP_RESET"),
    ],
)
def test_a_judged_status_printed_as_a_number_is_named(message: str, name: str) -> None:
    assert status_codes.with_status_named(message).endswith(f"[NV_ERR_{name}])")


@pytest.mark.parametrize(
    "message",
    [
        "GPU at PCI:0000:01:00: mapped BAR at 0x00000062",  # a number that is no status
        "ERROR: GPU:0: Failed to query display engine channel state: 0x0000ca7e:0:0:0x00000065",  # a status not judged
        "Assertion failed: Reset required [NV_ERR_RESET_REQUIRED] (0x00000062) returned from status",  # named already
        "RmInitAdapter failed! (0x62:0x40:2028)",  # RmInitAdapter's own triple (its rows judge it)
    ],
)
def test_other_numbers_stay_as_they_are(message: str) -> None:
    assert status_codes.with_status_named(message) == message


@pytest.mark.parametrize("form", sorted(FORMS))
def test_an_nvidia_modeset_error_with_reset_required_is_a_gpu_reset_event(form: str) -> None:
    text = FORMS[form].format(line=MODESET.format(gpu=1, code="00000062"))
    (event,) = facts_of("kernel-log", text)["events"]
    assert (event["kind"], event["gpu_index"]) == ("gpu_reset_required", 1)
    assert event["text"].startswith("nvidia-modeset: ERROR: GPU:1:")


@pytest.mark.parametrize(
    "line",
    [
        MODESET.format(gpu=0, code="00000065"),  # NV_ERR_TIMEOUT: a display error, not judged
        "nvidia-modeset: WARNING: GPU:0: Lost display notification (0:0x00000062); continuing.",  # no ERROR
        'python3[812]: saving "nvidia-modeset: ERROR: GPU:0: x 0x0000ca7e:0:0:0x00000062" to notes.txt',  # user text
    ],
)
def test_other_nvidia_modeset_lines_are_no_event(line: str) -> None:
    assert facts_of("kernel-log", f"Mar 03 10:12:01 ws kernel: {line}\n")["events"] == []


def test_the_field_sample_gets_a_reset_not_healthy(tmp_path: Path) -> None:
    files = {"kernel-log.out": FIELD_SAMPLE.read_text()}
    assert replayed_action(tmp_path, "xid", files, "healthy-l40s") == "reset-gpu"


def test_the_rpc_status_of_a_lost_gpu_is_judged_as_the_named_one() -> None:
    line = "NVRM: _issueRpcAndWait: rpcSendMessage failed with status 0x0000000f for fn 78 sequence 7869!\n"
    assert facts_of("kernel-log", line)["xid_judgement"]["action"] == "reboot-node"
