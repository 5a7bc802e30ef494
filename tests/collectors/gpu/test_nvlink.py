"""nvlink collector: one JSON case per captured sample, plus the layouts the corpus lacks."""

from __future__ import annotations

from nightowl.collectors import get_collector
from nightowl.collectors.gpu.nvlink import COLLECTOR, ERRORS_COLLECTOR, facts, parse


def test_collectors() -> None:
    assert get_collector("nvlink") is COLLECTOR
    assert COLLECTOR.commands == (("nvidia-smi", "nvlink", "-s"),)
    assert ERRORS_COLLECTOR.commands == (("nvidia-smi", "nvlink", "-e"),)
    assert ERRORS_COLLECTOR.parse("GPU 0: X\n").kind == "nvlink-errors"
    assert not COLLECTOR.invasive


# --- layouts with no captured sample: inactive links, NVML all-inactive message, -s and -e concatenated,
# dcgmi -e tree, NVSwitch rows (shapes per nvidia-smi help text and DCGM dcgmi/Nvlink.cpp)

MIXED = """GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-aaaa)
\t Link 0: 26.562 GB/s
\t Link 1: <inactive>
GPU 1: NVIDIA H100 80GB HBM3 (UUID: GPU-bbbb)
\t NVML: Unable to retrieve NVLink information as all links are inActive
GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-aaaa)
\t Link 0: Replay Errors: 3
\t Link 0: Recovery Errors: 0
\t Link 0: CRC Errors: 0
\t Link 1: Replay Errors: N/A
"""


def test_status_and_errors_concatenated() -> None:
    derived = facts(parse(MIXED))
    assert derived["warnings"] == []
    gpu0 = derived["gpus"][0]
    assert gpu0["links"][0] == {
        "link": 0,
        "state": "up",
        "speed_gbps": 26.562,
        "errors": {"replay": 3, "recovery": 0, "crc_flit": None, "crc_data": None, "crc": 0},
        "raw_state": "26.562 GB/s",
    }
    assert gpu0["links"][1]["state"] == "down" and gpu0["links"][1]["errors"]["replay"] is None
    assert derived["links_down"] == [{"gpu": 0, "link": 1}]
    assert derived["links_up_per_gpu"] == {"0": 1, "1": 0}
    assert derived["gpus_with_link_errors"] == [0]
    assert derived["min_speed_gbps"] == 26.562


DCGMI_ERRORS = """+------------------------------+--------------------------------------------------+
| NVLINK Error Counts                                                             |
| GPU 2                                                                           |
+==============================+==================================================+
| Link 0                       |                                                  |
| -> CRC FLIT Error            | 0                                                |
| -> CRC Data Error            | 7                                                |
| -> Replay Error              | 0                                                |
| -> Recovery Error            | 0                                                |
+------------------------------+--------------------------------------------------+
"""

DCGMI_STATUS_SWITCH = """+----------------------+
|  NvLink Link Status  |
+----------------------+
GPUs:
    gpuId 0:
        U U U U X _ _ _ _ _ _ _ _ _ _ _ _ _
NvSwitches:
    physicalId 8:
        U D _ _

Key: Up=U, Down=D, Disabled=X, Not Supported=_
"""


def test_dcgmi_error_tree_and_switch_rows() -> None:
    derived = facts(parse(DCGMI_ERRORS))
    link = derived["gpus"][0]["links"][0]
    assert derived["gpus"][0]["index"] == 2
    assert link["errors"] == {"replay": 0, "recovery": 0, "crc_flit": 0, "crc_data": 7}
    assert derived["gpus_with_link_errors"] == [2] and derived["warnings"] == []
    status = facts(parse(DCGMI_STATUS_SWITCH))
    assert [(lk["link"], lk["state"], lk["raw_state"]) for lk in status["gpus"][0]["links"]][-1] == (
        4,
        "down",
        "Disabled",
    )
    assert status["links_up_per_gpu"] == {"0": 4}
    assert [(lk["link"], lk["state"]) for lk in status["nvswitches"][0]["links"]] == [(0, "up"), (1, "down")]


def test_not_nvlink_output() -> None:
    result = parse("hello\n")
    assert result.gpus == [] and result.warnings


# --- property tests
