"""MIG (issue 23.4): MIG mode, the instances, and which instance an ECC count belongs to, in -q, XML and the table.

No MIG-enabled capture is in the corpus: the texts are composed in the layouts of NVIDIA's MIG user guide
(https://docs.nvidia.com/datacenter/tesla/mig-user-guide/, "nvidia-smi" examples) and the nvsmi_device DTD v12
(<mig_mode>, <mig_devices><mig_device>), with values of our own.
"""

from __future__ import annotations

from nightowl.collectors import get_collector

NVSMI = get_collector("nvidia-smi")


def _mig_block(index: int, gi: int, sram_ue: int) -> str:
    return f"""        MIG 3g.40gb     Device              {index}
            GPU Instance ID               : {gi}
            Compute Instance ID           : 0
            Device Attributes
                Shared
                    Multiprocessor count  : 42
            ECC Errors
                Volatile
                    SRAM Uncorrectable    : {sram_ue}
            FB Memory Usage
                Total                     : 40192 MiB
                Used                      : 37 MiB
            BAR1 Memory Usage
                Total                     : 32767 MiB
                Used                      : 0 MiB
"""


Q_MIG = (
    """
==============NVSMI LOG==============

Driver Version                            : 550.54.15
CUDA Version                              : 12.4

Attached GPUs                             : 1
GPU 00000000:07:00.0
    Product Name                          : NVIDIA A100-SXM4-80GB
    MIG Mode
        Current                           : Enabled
        Pending                           : Enabled
    MIG Devices
"""
    + _mig_block(0, 1, 0)
    + _mig_block(1, 2, 2)
    + """    ECC Errors
        Volatile
            SRAM Correctable              : 0
            SRAM Uncorrectable            : 2
            DRAM Correctable              : 0
            DRAM Uncorrectable            : 0
    BAR1 Memory Usage
        Total                             : 131072 MiB
"""
)


def test_q_mig_devices_and_their_ecc() -> None:
    facts = NVSMI.facts(NVSMI.parse(Q_MIG))
    assert facts["mig_enabled_gpus"] == ["0000:07:00"]
    assert [(m["index"], m["profile"], m["gpu_instance_id"]) for m in facts["mig_instances"]] == [
        (0, "3g.40gb", 1),
        (1, "3g.40gb", 2),
    ]
    assert facts["mig_uncorrectable_ecc_instances"] == [
        {
            "gpu": "0000:07:00",
            "index": 1,
            "profile": "3g.40gb",
            "gpu_instance_id": 2,
            "sram_uncorrectable": 2,
            "dram_uncorrectable": None,
        }
    ]
    gpu = facts["gpus"][0]
    assert gpu["ecc"]["volatile"]["sram_uncorrectable"] == 2  # the GPU's own count, not an instance's
    assert facts["warnings"] == [] and facts["errors"] == []


XML_MIG = """<?xml version="1.0" ?>
<!DOCTYPE nvidia_smi_log SYSTEM "nvsmi_device_v12.dtd">
<nvidia_smi_log>
\t<driver_version>535.104.05</driver_version>
\t<attached_gpus>1</attached_gpus>
\t<gpu id="00000000:07:00.0">
\t\t<product_name>NVIDIA A100-SXM4-80GB</product_name>
\t\t<mig_mode>
\t\t\t<current_mig>Enabled</current_mig>
\t\t\t<pending_mig>Enabled</pending_mig>
\t\t</mig_mode>
\t\t<mig_devices>
\t\t\t<mig_device>
\t\t\t\t<index>0</index>
\t\t\t\t<gpu_instance_id>1</gpu_instance_id>
\t\t\t\t<compute_instance_id>0</compute_instance_id>
\t\t\t\t<ecc_error_count>
\t\t\t\t\t<volatile_count>
\t\t\t\t\t\t<sram_uncorrectable>3</sram_uncorrectable>
\t\t\t\t\t</volatile_count>
\t\t\t\t</ecc_error_count>
\t\t\t\t<fb_memory_usage><total>81050 MiB</total></fb_memory_usage>
\t\t\t\t<bar1_memory_usage><total>131072 MiB</total></bar1_memory_usage>
\t\t\t</mig_device>
\t\t</mig_devices>
\t</gpu>
</nvidia_smi_log>
"""


def test_xml_mig_device() -> None:
    facts = NVSMI.facts(NVSMI.parse(XML_MIG))
    assert facts["mig_enabled_gpus"] == ["0000:07:00"]
    assert facts["mig_uncorrectable_ecc_instances"][0]["gpu_instance_id"] == 1
    assert facts["gpus"][0]["mig_devices"][0]["bar1_total_mib"] == 131072


TABLE_MIG = """+-----------------------------------------------------------------------------------------+
| NVIDIA-SMI 550.54.15              Driver Version: 550.54.15      CUDA Version: 12.4     |
|-----------------------------------------+------------------------+----------------------+
| GPU  Name                 Persistence-M | Bus-Id          Disp.A | Volatile Uncorr. ECC |
| Fan  Temp   Perf          Pwr:Usage/Cap |           Memory-Usage | GPU-Util  Compute M. |
|                                         |                        |               MIG M. |
|=========================================+========================+======================|
|   0  NVIDIA A100-SXM4-80GB          On  |   00000000:07:00.0 Off |                   On |
| N/A   33C    P0             45W /  400W |      74MiB /  81920MiB |     N/A      Default |
|                                         |                        |              Enabled |
+-----------------------------------------+------------------------+----------------------+

+-----------------------------------------------------------------------------------------+
| MIG devices:                                                                            |
+------------------+----------------------------------+-----------+-----------------------+
| GPU  GI  CI  MIG |                     Memory-Usage |        Vol|      Shared           |
|      ID  ID  Dev |                       BAR1-Usage | SM     Unc| CE ENC DEC OFA JPG    |
|                  |                                  |        ECC|                       |
|==================+==================================+===========+=======================|
|  0    1   0   0  |              37MiB / 40192MiB    | 42      0 |  3   0    2    0    0 |
|                  |                 0MiB / 32767MiB  |           |                       |
+------------------+----------------------------------+-----------+-----------------------+
|  0    2   0   1  |              37MiB / 40192MiB    | 42      1 |  3   0    2    0    0 |
|                  |                 0MiB / 32767MiB  |           |                       |
+------------------+----------------------------------+-----------+-----------------------+
"""


def test_table_mig_section() -> None:
    facts = NVSMI.facts(NVSMI.parse(TABLE_MIG))
    assert facts["gpu_count"] == 1 and facts["mig_enabled_gpus"] == ["0000:07:00"]
    assert [m["gpu_instance_id"] for m in facts["mig_instances"]] == [1, 2]
    assert [m["gpu_instance_id"] for m in facts["mig_uncorrectable_ecc_instances"]] == [2]


def test_mig_off_reads_as_before() -> None:
    text = Q_MIG.replace(": Enabled", ": Disabled")
    head = text.split("    MIG Devices\n")[0] + "    MIG Devices                           : None\n"
    facts = NVSMI.facts(NVSMI.parse(head))
    assert facts["mig_enabled_gpus"] == [] and facts["mig_instances"] == []
