"""nvidia-smi of R590/R595/R610: new version keys, bracketed notes, the new table header, WDDM, repair status.

No -q or table output of these drivers is in the corpus yet: the texts below are composed in the layout
public reports show (``-q`` header lines quoted in Jaded-Encoding-Thaumaturgy/vs-jetpack#297, the table
header in sgl-project/sglang#27487, the deprecation in docs.nvidia.com/deploy/nvidia-smi) with values of
our own; the repair fields follow NVML's nvmlDeviceGetRepairStatus (TPC / channel repair pending).
"""

from __future__ import annotations

from nightowl.collectors import get_collector
from nightowl.collectors.base import to_jsonable

NVSMI = get_collector("nvidia-smi")

Q_610 = """
==============NVSMI LOG==============

Timestamp                                              : Tue Dec  1 10:00:00 2026
Driver Version                                         : 610.57.04 {note_kmd}
CUDA Version                                           : 13.3 {note_umd}
KMD Version                                            : 610.57.04
CUDA UMD Version                                       : 13.3

Attached GPUs                                          : 1
GPU 00000000:63:00.0
    Product Name                                       : NVIDIA B200
    GPU UUID                                           : GPU-00000000-1111-2222-3333-444444444444
    Driver Model
        Current                                        : N/A
        Pending                                        : N/A
    GPU Recovery Action                                : None
    Repair Status
        Channel Repair Pending                         : {channel}
        TPC Repair Pending                             : {tpc}
    ECC Errors
        Volatile
            SRAM Correctable                           : 0
            SRAM Uncorrectable Parity                  : 0
            SRAM Uncorrectable SEC-DED                 : 0
            DRAM Correctable                           : 0
            DRAM Uncorrectable                         : 0
        Aggregate
            SRAM Correctable                           : 0
            SRAM Uncorrectable Parity                  : 0
            SRAM Uncorrectable SEC-DED                 : 0
            DRAM Correctable                           : 0
            DRAM Uncorrectable                         : 0
"""


NOTE = "[Deprecated; will be removed in CUDA 14.0. Use {} instead]"
Q_610 = Q_610.replace("{note_kmd}", NOTE.format("KMD Version")).replace("{note_umd}", NOTE.format("CUDA UMD Version"))


def _parse(text: str) -> dict:
    return to_jsonable(NVSMI.parse(text))


def test_new_keys_first_and_notes_stripped() -> None:
    data = _parse(Q_610.format(channel="No", tpc="No"))
    assert data["driver_version"] == "610.57.04"
    assert data["cuda_version"] == "13.3"
    assert data["gpu_count"] == 1 and data["errors"] == []
    assert data["gpus"][0]["channel_repair_pending"] is False
    assert data["warnings"] == []


def test_only_the_deprecated_keys_with_notes() -> None:
    lines = [line for line in Q_610.splitlines() if not line.startswith(("KMD Version", "CUDA UMD Version"))]
    data = _parse("\n".join(lines).format(channel="No", tpc="No"))
    assert (data["driver_version"], data["cuda_version"]) == ("610.57.04", "13.3")


def test_a_deprecated_key_holding_only_its_note_falls_back() -> None:
    text = Q_610.replace("13.3 [Deprecated", "[Deprecated").format(channel="No", tpc="No")
    data = _parse(text)
    assert data["cuda_version"] == "13.3"  # from CUDA UMD Version
    without_new = "\n".join(line for line in text.splitlines() if not line.startswith("CUDA UMD"))
    assert _parse(without_new)["cuda_version"] is None  # the note is not a version


def test_repair_pending_is_a_fact() -> None:
    facts = NVSMI.facts(NVSMI.parse(Q_610.format(channel="Yes", tpc="No")))
    assert facts["channel_repair_pending_gpus"] == ["0000:63:00"]
    assert facts["tpc_repair_pending_gpus"] == []
    facts = NVSMI.facts(NVSMI.parse(Q_610.format(channel="No", tpc="Yes")))
    assert facts["tpc_repair_pending_gpus"] == ["0000:63:00"]


XML_610 = """<?xml version="1.0" ?>
<!DOCTYPE nvidia_smi_log SYSTEM "nvsmi_device_v13.dtd">
<nvidia_smi_log>
\t<driver_version>610.57.04 [Deprecated; will be removed in CUDA 14.0. Use KMD Version instead]</driver_version>
\t<kmd_version>610.57.04</kmd_version>
\t<cuda_version>Requested functionality has been deprecated</cuda_version>
\t<cuda_umd_version>13.3</cuda_umd_version>
\t<attached_gpus>1</attached_gpus>
\t<gpu id="00000000:63:00.0">
\t\t<product_name>NVIDIA B200</product_name>
\t\t<uuid>GPU-00000000-1111-2222-3333-444444444444</uuid>
\t\t<repair_status>
\t\t\t<channel_repair_pending>No</channel_repair_pending>
\t\t\t<tpc_repair_pending>Yes</tpc_repair_pending>
\t\t</repair_status>
\t</gpu>
</nvidia_smi_log>
"""


def test_xml_new_tags() -> None:
    result = NVSMI.parse(XML_610)
    data = to_jsonable(result)
    assert (data["driver_version"], data["cuda_version"]) == ("610.57.04", "13.3")
    assert NVSMI.facts(result)["tpc_repair_pending_gpus"] == ["0000:63:00"]


TABLE_610 = """Tue Dec  1 10:00:00 2026
+-----------------------------------------------------------------------------------------+
| NVIDIA-SMI 610.57.04              KMD Version: 610.57.04     CUDA UMD Version: 13.3     |
+-----------------------------------------+------------------------+----------------------+
| GPU  Name                 Persistence-M | Bus-Id          Disp.A | Volatile Uncorr. ECC |
| Fan  Temp   Perf          Pwr:Usage/Cap |           Memory-Usage | GPU-Util  Compute M. |
|                                         |                        |               MIG M. |
|=========================================+========================+======================|
|   0  NVIDIA B200                    On  |   00000000:63:00.0 Off |                    0 |
| N/A   27C    P0            140W / 1000W |       0MiB / 183359MiB |      0%      Default |
|                                         |                        |             Disabled |
+-----------------------------------------+------------------------+----------------------+
"""

TABLE_WDDM = """+-----------------------------------------------------------------------------------------+
| NVIDIA-SMI 595.71                 KMD Version: 595.71            CUDA UMD Version: 13.2     |
+-----------------------------------------+------------------------+----------------------+
| GPU  Name                  Driver-Model | Bus-Id          Disp.A | Volatile Uncorr. ECC |
| Fan  Temp   Perf          Pwr:Usage/Cap |           Memory-Usage | GPU-Util  Compute M. |
|                                         |                        |               MIG M. |
|=========================================+========================+======================|
|   0  NVIDIA GeForce RTX 4090      WDDM  |   00000000:01:00.0  On |                  Off |
|  0%   41C    P8             21W /  450W |    1203MiB /  24564MiB |      3%      Default |
|                                         |                        |                  N/A |
+-----------------------------------------+------------------------+----------------------+
"""


def test_table_header_of_r610() -> None:
    data = _parse(TABLE_610)
    assert (data["driver_version"], data["cuda_version"]) == ("610.57.04", "13.3")
    assert data["gpus"][0]["name"] == "NVIDIA B200" and data["gpus"][0]["persistence_mode"] == "Enabled"


def test_windows_table_driver_model_column() -> None:
    data = _parse(TABLE_WDDM)
    gpu = data["gpus"][0]
    assert (data["driver_version"], data["cuda_version"]) == ("595.71", "13.2")
    assert gpu["driver_model"] == "WDDM" and gpu["persistence_mode"] is None
    assert gpu["name"] == "NVIDIA GeForce RTX 4090" and data["errors"] == []


def test_older_header_still_read() -> None:
    old = TABLE_610.replace(
        "KMD Version: 610.57.04     CUDA UMD Version: 13.3 ", "Driver Version: 565.57.01   CUDA Version: 12.7  "
    )
    data = _parse(old)
    assert (data["driver_version"], data["cuda_version"]) == ("565.57.01", "12.7")
