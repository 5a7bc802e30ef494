"""nvidia-smi-query collector (`--query-gpu ... --format=csv`)."""

from __future__ import annotations

from nightowl.collectors import get_collector
from nightowl.collectors.base import to_jsonable
from nightowl.collectors.gpu.nvidia_smi.nvidia_smi_query import COLLECTOR, DEFAULT_FIELDS, facts, parse


def test_collector_fixes_the_field_list() -> None:
    collector = get_collector("nvidia-smi-query")
    assert collector is COLLECTOR
    (argv,) = collector.commands
    assert argv[0] == "nvidia-smi" and argv[-1] == "--format=csv,noheader,nounits"
    assert argv[1] == "--query-gpu=" + ",".join(DEFAULT_FIELDS)


ROWS = [
    [
        "0",
        "00000000:18:00.0",
        "NVIDIA H100 80GB HBM3",
        "GPU-b42d",
        "565.57.01",
        "30",
        "97",
        "81559",
        "100",
        "0",
    ]
    + ["0x0000000000000080", "4", "5", "16", "16"],
    ["1", "00000000:2A:00.0", "NVIDIA H100 80GB HBM3", "GPU-c111", "565.57.01", "31", "3", "81559", "1", "2"]
    + ["0x0000000000000001", "1", "5", "16", "16"],
    ["2", "00000000:3A:00.0", "[Unknown Error]", "[N/A]", "565.57.01", "ERR!", "[N/A]", "81559", "1", "[N/A]"]
    + ["[N/A]", "[N/A]", "[N/A]", "16", "16"],
]
NOHEADER = "".join(", ".join(row) + "\n" for row in ROWS)


def test_noheader_nounits_uses_the_collector_fields() -> None:
    result = parse(NOHEADER)
    assert result.header is False and result.fields == DEFAULT_FIELDS and result.gpu_count == 3
    first, second, third = result.gpus
    assert first["pci.bus_id"] == "00000000:18:00.0" and first["driver_version"] == "565.57.01"
    assert first["clocks_event_reasons.active"] == 0x80 and first["memory.total"] == 81559
    assert third["name"] is None and third["temperature.gpu"] is None and third["uuid"] is None
    assert [(e.pci, e.index, e.field) for e in result.errors] == [
        ("0000:3a:00", 2, "name"),
        ("0000:3a:00", 2, "temperature.gpu"),
    ]
    derived = facts(result)
    assert derived["hw_slowdown_gpus"] == ["0000:18:00"]  # 0x80 = hw_power_brake_slowdown
    assert derived["pcie_degraded_gpus"] == ["0000:18:00"]  # gen 4 of 5 at 97 %; GPU 1 idle is not counted
    assert derived["dram_uncorrectable_volatile_gpus"] == ["0000:2a:00"]
    assert derived["gpus_with_field_errors"] == ["0000:3a:00"]


def test_header_with_units_in_values() -> None:
    text = (
        "index, pci.bus_id, memory.total [MiB], utilization.gpu [%], gpu_recovery_action\n"
        "0, 00000000:04:00.0, 81559 MiB, 12 %, None\n1, 00000000:05:00.0, 81559 MiB, 0 %, Reset\n"
    )
    result = parse(text)
    assert result.units == {"memory.total": "MiB", "utilization.gpu": "%"}
    assert result.gpus[0]["memory.total"] == 81559 and result.gpus[0]["utilization.gpu"] == 12
    assert facts(result)["recovery_actions"] == {"0000:05:00": "Reset"}


def test_tool_failure_and_garbage() -> None:
    result = parse("No devices were found\n")
    assert result.gpu_count == 0 and result.errors[0].message == "No devices were found"
    garbage = parse('{\n  "a": 1,\n}\nsome, words, here\n')
    assert garbage.gpus == () and garbage.warnings


def test_query_shares_the_q_parsers_vocabulary() -> None:
    """Values and failures read the same as in `nvidia-smi -q` (one vocabulary, nvidia_smi_tree)."""
    text = (
        "index, pci.bus_id, memory.used [MiB], temperature.gpu\n"
        "0, 00000000:1B:00.0, Not Found, Error\n"
        "GPU 00000000:1C:00.0: GPU is lost. Reboot the system to recover this GPU\n"
    )
    result = to_jsonable(parse(text))
    gpu = result["gpus"][0]
    assert gpu["memory.used"] is None and gpu["temperature.gpu"] is None
    assert {e["field"] for e in result["errors"] if e["field"]} == {"temperature.gpu"}
    lost = [e for e in result["errors"] if e["field"] is None]
    assert lost and lost[0]["pci"] == "0000:1c:00" and lost[0]["message"].startswith("GPU is lost")


# --- a header row of any field set and order (issue 23.2); composed: no full-query capture in the corpus.
# Field names and units as `nvidia-smi --help-query-gpu` prints them; the deprecated cell as R590+ prints it.
WIDE_FIELDS = [
    "timestamp",
    "driver_version",
    "count",
    "name",
    "serial",
    "uuid",
    "pci.bus_id",
    "pci.domain",
    "pcie.link.gen.current",
    "pcie.link.gen.max",
    "pcie.link.width.current",
    "pcie.link.width.max",
    "index",
    "fan.speed [%]",
    "pstate",
    "clocks_throttle_reasons.active",
    "clocks_throttle_reasons.hw_slowdown",
    "memory.total [MiB]",
    "memory.used [MiB]",
    "utilization.gpu [%]",
    "ecc.mode.current",
    "ecc.errors.corrected.volatile.total",
    "ecc.errors.uncorrected.volatile.total",
    "ecc.errors.uncorrected.volatile.dram",
    "retired_pages.pending",
    "remapped_rows.pending",
    "temperature.gpu",
    "power.draw [W]",
    "gpu_recovery_action",
] + [f"clocks_event_reasons_counters.field{n} [us]" for n in range(200)]


def _wide_row(index: int, bus: str, uncorrected: str) -> str:
    cells = [
        "2026/12/01 10:00:00.123",
        "610.57.04",
        "2",
        "NVIDIA H100 80GB HBM3",
        "[N/A]",
        f"GPU-0000000{index}-1111-2222-3333-444444444444",
        bus,
        "0x0000",
        "5",
        "5",
        "16",
        "16",
        str(index),
        "[N/A]",
        "P0",
        "0x0000000000000001",
        "Not Active",
        "81559 MiB",
        "559 MiB",
        "0 %",
        "Enabled",
        "0",
        uncorrected,
        "[Requested functionality has been deprecated]",
        "[Requested functionality has been deprecated]",
        "No",
        "34",
        "71.13 W",
        "None",
    ] + ["0"] * 200
    return ", ".join(cells)


def test_header_row_names_the_columns_in_any_order() -> None:
    header = ", ".join(WIDE_FIELDS)
    text = "\n".join([header, _wide_row(0, "00000000:1B:00.0", "0"), _wide_row(1, "00000000:43:00.0", "2")])
    result = parse(text)
    assert result.header and result.gpu_count == 2 and result.warnings == ()
    assert len(result.fields) == len(WIDE_FIELDS) == 229
    gpu = result.gpus[0]
    assert gpu["ecc.errors.uncorrected.volatile.dram"] is None  # deprecated cell: missing, not an error
    assert gpu["clocks_event_reasons.hw_slowdown"] == "Not Active"  # old name, new key
    assert gpu["power.draw"] == 71.13 and result.units["power.draw"] == "W"
    derived = facts(result)
    assert derived["error_count"] == 0 and derived["gpus_with_field_errors"] == []
    assert derived["dram_uncorrectable_volatile_gpus"] == ["0000:43:00"]
    # the same columns reversed read the same values
    order = list(reversed(range(len(WIDE_FIELDS))))
    rows = [line.split(", ") for line in text.splitlines()]
    reversed_text = "\n".join(", ".join(row[i] for i in order) for row in rows)
    assert parse(reversed_text).gpus == result.gpus


def test_a_long_cell_is_converted_as_a_short_one_but_not_remembered() -> None:
    """Short cells repeat from round to round and are remembered; a long one (a garbled output's) is converted
    each time and never held by the cache."""
    from nightowl.collectors.gpu.nvidia_smi import nvidia_smi_query as query

    long_cell = " NVIDIA " + "H" * (query.SHORT_CELL * 4) + " "
    query._remembered.cache_clear()  # what earlier tests left there must not decide the counts below
    assert query.convert("name", long_cell) == (long_cell.strip(), False)
    assert query._remembered.cache_info().currsize == 0
    assert query.convert("memory.total [MiB]", " 81559 MiB") == (81559, False)
    assert query.convert("memory.total [MiB]", "[N/A]") == (None, False)
    assert query._remembered.cache_info().currsize == 2
