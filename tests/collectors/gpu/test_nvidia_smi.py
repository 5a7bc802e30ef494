"""nvidia-smi collector: one JSON case per captured sample, plus the layouts the corpus lacks."""

from __future__ import annotations

from nightowl.collectors import get_collector
from nightowl.collectors.gpu.nvidia_smi.nvidia_smi import COLLECTOR, facts, normalize_pci, parse


def test_collector_is_registered() -> None:
    collector = get_collector("nvidia-smi")
    assert collector is COLLECTOR
    assert collector.commands == (("nvidia-smi", "-q", "-x"), ("nvidia-smi", "-q"))
    assert collector.timeout == 20


def test_shared_pci_helper_is_reexported() -> None:
    assert normalize_pci("00000000:5A:00.0") == "0000:5a:00"


# --- layouts and states with no captured sample (shapes per NVIDIA DTD v12/v13 and driver text)

XML_V12 = """<?xml version="1.0" ?>
<!DOCTYPE nvidia_smi_log SYSTEM "nvsmi_device_v12.dtd">
<nvidia_smi_log>
\t<driver_version>535.104.05</driver_version>
\t<cuda_version>12.2</cuda_version>
\t<attached_gpus>2</attached_gpus>
\t<gpu id="00000000:07:00.0">
\t\t<product_name>NVIDIA A100-SXM4-80GB</product_name>
\t\t<uuid>GPU-aaaa</uuid>
\t\t<gpu_recovery_action>Reset</gpu_recovery_action>
\t\t<pci>
\t\t\t<pci_bus_id>00000000:07:00.0</pci_bus_id>
\t\t\t<pci_gpu_link_info>
\t\t\t\t<pcie_gen><max_link_gen>4</max_link_gen><current_link_gen>3</current_link_gen></pcie_gen>
\t\t\t\t<link_widths><max_link_width>16x</max_link_width><current_link_width>16x</current_link_width></link_widths>
\t\t\t</pci_gpu_link_info>
\t\t</pci>
\t\t<clocks_event_reasons>
\t\t\t<clocks_event_reason_gpu_idle>Not Active</clocks_event_reason_gpu_idle>
\t\t\t<clocks_event_reason_hw_thermal_slowdown>Active</clocks_event_reason_hw_thermal_slowdown>
\t\t\t<clocks_event_reason_display_clocks_setting>Active</clocks_event_reason_display_clocks_setting>
\t\t</clocks_event_reasons>
\t\t<utilization><gpu_util>97 %</gpu_util></utilization>
\t\t<ecc_errors>
\t\t\t<volatile>
\t\t\t\t<sram_correctable>2</sram_correctable>
\t\t\t\t<sram_uncorrectable_parity>1</sram_uncorrectable_parity>
\t\t\t\t<sram_uncorrectable_secded>2</sram_uncorrectable_secded>
\t\t\t\t<dram_correctable>0</dram_correctable>
\t\t\t\t<dram_uncorrectable>3</dram_uncorrectable>
\t\t\t</volatile>
\t\t\t<aggregate>
\t\t\t\t<sram_correctable>5</sram_correctable>
\t\t\t\t<sram_uncorrectable_parity>N/A</sram_uncorrectable_parity>
\t\t\t\t<sram_uncorrectable_secded>7</sram_uncorrectable_secded>
\t\t\t\t<dram_correctable>9</dram_correctable>
\t\t\t\t<dram_uncorrectable>3</dram_uncorrectable>
\t\t\t\t<sram_threshold_exceeded>Yes</sram_threshold_exceeded>
\t\t\t</aggregate>
\t\t</ecc_errors>
\t\t<remapped_rows>
\t\t\t<remapped_row_corr>0</remapped_row_corr>
\t\t\t<remapped_row_unc>2</remapped_row_unc>
\t\t\t<remapped_row_pending>Yes</remapped_row_pending>
\t\t\t<remapped_row_failure>Yes</remapped_row_failure>
\t\t\t<row_remapper_histogram>
\t\t\t\t<row_remapper_histogram_max>638 bank(s)</row_remapper_histogram_max>
\t\t\t\t<row_remapper_histogram_none>2 bank(s)</row_remapper_histogram_none>
\t\t\t</row_remapper_histogram>
\t\t</remapped_rows>
\t</gpu>
\t<gpu id="00000000:0F:00.0">
\t\t<product_name>Unknown Error</product_name>
\t\t<uuid>Unknown Error</uuid>
\t</gpu>
</nvidia_smi_log>
"""


def test_xml_dtd_v12_names_and_error_states() -> None:
    result = parse(XML_V12)
    assert result.warnings == ()
    assert result.gpu_count == 2
    first, second = result.gpus
    assert first.pci == "0000:07:00"
    assert first.recovery_action == "Reset"
    assert first.clocks_event_reasons_active == ("hw_thermal_slowdown", "display_clock_setting")
    assert first.ecc.volatile.sram_uncorrectable == 3  # parity 1 + SEC-DED 2
    assert first.ecc.aggregate.sram_uncorrectable == 7  # N/A parity + 7
    assert first.ecc.volatile.dram_uncorrectable == 3
    assert first.sram_threshold_exceeded is True
    assert first.remapped_rows is not None and first.remapped_rows.uncorrectable == 2
    assert first.remapped_rows.bank_histogram is not None and first.remapped_rows.bank_histogram.none == 2
    assert second.name is None and second.pci == "0000:0f:00"
    derived = facts(result)
    assert derived["recovery_actions"] == {"0000:07:00": "Reset"}
    assert derived["hw_slowdown_gpus"] == ["0000:07:00"]
    assert derived["pcie_degraded_gpus"] == ["0000:07:00"]  # gen 3 of 4 at 97 % utilization
    assert derived["dram_uncorrectable_volatile_gpus"] == ["0000:07:00"]
    assert derived["remap_pending_gpus"] == ["0000:07:00"]
    assert derived["remap_failure_gpus"] == ["0000:07:00"]
    assert derived["sram_threshold_exceeded_gpus"] == ["0000:07:00"]
    assert derived["gpus_missing_or_unreadable"] == ["0000:0f:00"]  # identity fields unreadable
    assert derived["error_count"] == 2


VOLTA_XML = """<nvidia_smi_log><driver_version>418.87.01</driver_version><attached_gpus>1</attached_gpus>
<gpu id="00000000:00:1E.0"><product_name>Tesla V100-SXM2-16GB</product_name>
<ecc_errors><volatile>
<single_bit><device_memory>4</device_memory><register_file>1</register_file><l1_cache>0</l1_cache>
<l2_cache>2</l2_cache><texture_memory>N/A</texture_memory><texture_shm>N/A</texture_shm><cbu>N/A</cbu><total>7</total></single_bit>
<double_bit><device_memory>1</device_memory><register_file>0</register_file><l1_cache>0</l1_cache>
<l2_cache>0</l2_cache><texture_memory>N/A</texture_memory><texture_shm>N/A</texture_shm><cbu>0</cbu><total>1</total></double_bit>
</volatile></ecc_errors>
<retired_pages><multiple_single_bit_retirement><retired_count>2</retired_count></multiple_single_bit_retirement>
<double_bit_retirement><retired_count>1</retired_count></double_bit_retirement>
<pending_blacklist>No</pending_blacklist><pending_retirement>Yes</pending_retirement></retired_pages>
<remapped_rows>N/A</remapped_rows>
</gpu></nvidia_smi_log>"""


def test_xml_volta_single_double_bit_layout() -> None:
    result = parse(VOLTA_XML)
    gpu = result.gpus[0]
    assert gpu.ecc.volatile.dram_correctable == 4 and gpu.ecc.volatile.sram_correctable == 3
    assert gpu.ecc.volatile.dram_uncorrectable == 1 and gpu.ecc.volatile.sram_uncorrectable == 0
    assert gpu.ecc.aggregate.dram_correctable is None
    assert gpu.retired_pages is not None
    assert (gpu.retired_pages.single_bit, gpu.retired_pages.double_bit, gpu.retired_pages.pending) == (
        2,
        1,
        True,
    )
    assert gpu.remapped_rows is None
    assert facts(result)["retired_pages_pending_gpus"] == ["0000:00:1e"]


def test_malformed_and_truncated_xml_fall_back_with_a_warning() -> None:
    truncated = XML_V12[: XML_V12.index("<remapped_rows>")]
    result = parse(truncated)
    assert result.warnings and "read leniently" in result.warnings[0]
    assert result.gpus[0].ecc.volatile.sram_uncorrectable == 3
    broken = XML_V12.replace("<uuid>GPU-aaaa</uuid>", "<uuid>GPU & aaaa</uuid>")
    assert parse(broken).gpus[0].uuid == "GPU & aaaa"


TEXT_ACTIVE_SLOWDOWN = """
==============NVSMI LOG==============

Driver Version                            : 535.54.03
CUDA Version                              : 12.2

Attached GPUs                             : 2
GPU 00000000:5A:00.0
    Product Name                          : NVIDIA H100 80GB HBM3
    PCI
\t\tBus Id                            : 00000000:5A:00.0
\t\tGPU Link Info
\t\t\tPCIe Generation
\t\t\t\tMax                       : 5
\t\t\t\tCurrent                   : 5
\t\t\tLink Width
\t\t\t\tMax                       : 16x
\t\t\t\tCurrent                   : 8x
    Clocks Event Reasons
        Idle                              : Not Active
        HW Slowdown                       : Active
            HW Thermal Slowdown           : Not Active
            HW Power Brake Slowdown       : Active
        SW Power Cap                      : Active
    Utilization
        Gpu                               : N/A
    GPU Recovery Action                   : Drain and Reset
Unable to determine the device handle for GPU 00000000:5B:00.0: GPU is lost. Reboot the system to recover
"""


def test_text_active_reasons_tabs_and_lost_gpu() -> None:
    result = parse(TEXT_ACTIVE_SLOWDOWN)
    gpu = result.gpus[0]
    assert gpu.clocks_event_reasons_active == ("hw_slowdown", "hw_power_brake_slowdown", "sw_power_cap")
    assert gpu.pcie.width_current == 8 and gpu.pcie.width_max == 16
    derived = facts(result)
    assert derived["hw_slowdown_gpus"] == ["0000:5a:00"]
    assert derived["pcie_degraded_gpus"] == []  # utilization unknown -> not counted
    assert derived["recovery_actions"] == {"0000:5a:00": "Drain and Reset"}
    assert derived["gpus_missing_or_unreadable"] == ["0000:5b:00"]
    assert result.gpu_count == 2


def test_whole_tool_failures() -> None:
    result = parse("No devices were found\n")
    assert result.gpu_count == 0 and result.gpus == ()
    assert [(e.pci, e.message) for e in result.errors] == [(None, "No devices were found")]
    assert facts(result)["gpus_missing_or_unreadable"] == [None]


def test_gpu_header_with_unreadable_body() -> None:
    text = "Attached GPUs : 2\nGPU 00000000:18:00.0\n    Unknown Error\nGPU 00000000:19:00.0\n    Product Name : X\n"
    result = parse(text)
    assert [g.pci for g in result.gpus] == ["0000:18:00", "0000:19:00"]
    assert facts(result)["gpus_missing_or_unreadable"] == ["0000:18:00"]


def test_many_error_fields_mark_gpu_unreadable() -> None:
    fields = "\n".join(f"    Field {n}                : Unknown Error" for n in range(5))
    result = parse(f"GPU 00000000:18:00.0\n    Product Name : NVIDIA A100\n{fields}\n")
    derived = facts(result)
    assert derived["field_error_count"] == 5
    assert derived["gpus_missing_or_unreadable"] == ["0000:18:00"]


def test_grep_of_utilization_is_not_a_gpu_header() -> None:
    result = parse("        Gpu                               : 0 %\n")
    assert result.gpus == () and result.errors == () and result.gpu_count is None


def test_deep_nesting_does_not_overflow() -> None:
    text = "".join(" " * depth + "Section\n" for depth in range(3000))
    assert not any("parser error" in w for w in parse(text).warnings)
    xml = "<nvidia_smi_log>" + "<a>" * 3000 + "</a>" * 3000 + "</nvidia_smi_log>"
    assert "read leniently" in parse(xml).warnings[0]


def test_not_nvidia_smi_output() -> None:
    result = parse("hello world\nthis: is not it\n")
    assert result.gpu_count is None and result.gpus == () and result.errors == ()
    assert result.warnings
