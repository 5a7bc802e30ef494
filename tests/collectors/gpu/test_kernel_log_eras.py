"""kernel-log: the formats of issue 13 (GPU addresses in every form, non-Xid GPU failures, the host around
the GPU) on composed lines, and the new patterns stay linear on hostile input."""

from __future__ import annotations

import re
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nightowl.collectors.base import to_jsonable
from nightowl.collectors.gpu import kernel_log
from nightowl.collectors.gpu.kernel_log import patterns
from tests.hostile.watchdog import LINEAR_SECONDS, finishes_within


def facts_of(text: str) -> dict[str, Any]:
    return kernel_log.facts(kernel_log.parse(text))


@pytest.mark.parametrize(
    "address",
    ["0000:18:00", "0000:18:00.0", "18:00.0", "18:00", "00000000:18:00.0", "0000:18:00".upper(), "PCI:18:00"],
)
def test_one_gpu_in_every_written_form(address: str) -> None:
    bare = address.removeprefix("PCI:")
    xid = f"NVRM: Xid (PCI:{bare}): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus."
    fallen = f"NVRM: GPU {bare}: GPU has fallen off the bus."
    for lines in ((xid, fallen), (fallen, xid)):  # either order: one event
        events = to_jsonable(kernel_log.parse("\n".join(lines)))["events"]
        assert [(e["kind"], e["code"], e["pci"]) for e in events] == [("xid", 79, "0000:18:00")]
        assert events[0]["fallen_off_bus"] is True
        assert facts_of("\n".join(lines))["fallen_off_bus_gpus"] == ["0000:18:00"]


def test_fallen_off_bus_of_another_gpu_stays_its_own_event() -> None:
    text = (
        "NVRM: Xid (PCI:0000:18:00): 79, GPU has fallen off the bus.\n"
        "NVRM: GPU 0000:3b:00.0: GPU has fallen off the bus."
    )
    facts = facts_of(text)
    assert [e["kind"] for e in facts["events"]] == ["xid", "fallen_off_bus"]
    assert facts["fallen_off_bus_gpus"] == ["0000:18:00", "0000:3b:00"]


@pytest.mark.parametrize(
    ("line", "status"),
    [
        (
            "NVRM: Xid (PCI:0000:3b:00): 63, pid=12, name=python, Row Remapper: New row (0x1f) marked for "
            "remapping, reset gpu to activate.",
            "reset-pending",
        ),
        (
            "NVRM: Xid (PCI:0000:3b:00): 64, pid=12, name=python, Row Remapper: Failed to mark row for remapping.",
            "failed",
        ),
        ("NVRM: Xid (PCI:0000:3b:00): 64, Dynamic Page Retirement: Blacklisting failed for address 0x1", "failed"),
    ],
)
def test_xid_63_64_carry_their_instruction(line: str, status: str) -> None:
    facts = facts_of(line)
    assert facts["events"][0]["remap_status"] == status
    key = "remap_reset_pending_gpus" if status == "reset-pending" else "remap_failed_gpus"
    assert facts[key] == ["0000:3b:00"]


def test_xid_63_without_instruction_is_neither() -> None:
    facts = facts_of("NVRM: Xid (PCI:0000:3b:00): 63, ECC page retirement recording event")
    assert facts["remap_reset_pending_gpus"] == [] and facts["remap_failed_gpus"] == []


def test_hung_task_before_the_xid_is_not_a_wedged_driver() -> None:
    before = (
        "[ 10.0] INFO: task python:12 blocked for more than 120 seconds.\n[ 11.0] NVRM: Xid (PCI:0000:3b:00): 45, Ch 1"
    )
    after = "\n".join(reversed(before.splitlines()))
    assert facts_of(before)["wedged_driver"] is False
    assert facts_of(after)["wedged_driver_gpus"] == ["0000:3b:00"]


@pytest.mark.parametrize(
    ("severity", "bucket"),
    [("Corrected", "correctable"), ("Uncorrected (Non-Fatal)", "nonfatal"), ("Uncorrected (Fatal)", "fatal")],
)
def test_aer_severity_buckets_name_the_device(severity: str, bucket: str) -> None:
    text = f"[ 5.0] pcieport 0000:00:03.0: AER: {severity} error received: 0000:3b:00.0"
    facts = facts_of(text)
    assert facts["pcie_aer_by_severity"][bucket] == 1
    assert facts[f"pcie_aer_{bucket}_devices"] == ["0000:00:03", "0000:3b:00"]


def test_edac_counts_by_dimm_and_severity() -> None:
    text = "\n".join(
        [
            "EDAC MC0: 2 CE memory read error on CPU_SrcID#0_MC#0_Chan#1_DIMM#0 (channel:1)",
            "EDAC MC0: 3 CE memory read error on CPU_SrcID#0_MC#0_Chan#1_DIMM#0 (channel:1 page:0x2)",
            "EDAC MC1: 1 UE memory read error on CPU_SrcID#1_MC#1_Chan#2_DIMM#0 (channel:2)",
            "EDAC MC0: 1 CE Single-bit ECC on unknown memory (node:0)",
        ]
    )
    facts = facts_of(text)
    assert facts["host_memory_errors"] == {"corrected": 6, "uncorrected": 1}
    assert facts["host_memory_corrected_dimms"] == ["CPU_SrcID#0_MC#0_Chan#1_DIMM#0"]
    assert facts["host_memory_uncorrected_dimms"] == ["CPU_SrcID#1_MC#1_Chan#2_DIMM#0"]


def test_gpu_is_lost_and_domainless_rminitadapter() -> None:
    facts = facts_of("NVRM: GPU 3b:00.0: GPU is lost\nNVRM: GPU 18:00.0: RmInitAdapter failed! (0x26:0xffff:1227)")
    assert facts["gpu_lost_gpus"] == ["0000:3b:00"]
    assert facts["adapter_init_failed_gpus"] == ["0000:18:00"]
    assert facts["adapter_init_errors"] == ["0x26:0xffff:1227"]


def test_bare_probe_block_continues_without_indent_or_time() -> None:
    text = "\n".join(
        [
            "NVRM: The NVIDIA probe routine was not called for 1 device(s).",
            "NVRM: This can occur when a driver such as nouveau, rivafb,",
            "NVRM: nvidiafb, or rivatv was loaded and obtained ownership of",
            "NVRM: the NVIDIA device(s).",
        ]
    )
    events = to_jsonable(kernel_log.parse(text))["events"]
    assert [e.get("subkind") for e in events] == ["driver_conflict"]


# --- the new patterns stay linear: a hostile line is read at once -----------------------------------------
NEW_PATTERNS = [
    patterns._EDAC,
    patterns._GHES_FIELD,
    patterns._HUNG_TASK,
    patterns._API_MISMATCH,
    patterns._GPU_ADDRESS,
    patterns._BLOCK_CONTINUATION,
    patterns._NOUVEAU_DEVICE,
]


@settings(max_examples=60, deadline=None)
@given(
    st.sampled_from(
        [
            "EDAC MC0: 1 CE ",
            "INFO: task a:",
            "[Hardware Error]:  section_type: ",
            "GPU 00:",
            "NVRM: GPU ",
            "NVRM: API mismatch: ",
        ]
    ),
    st.sampled_from([" ", ":", "0", "a ", "on ", ":1 ", "("]),
)
def test_new_patterns_are_linear_on_repeated_pieces(head: str, piece: str) -> None:
    # 20 000 repeats: a quadratic pattern would take minutes here; a linear one is instant.
    hostile = head + piece * 20_000
    finishes_within(LINEAR_SECONDS, _read_hostile, hostile)


def _read_hostile(hostile: str) -> None:
    for pattern in NEW_PATTERNS:
        pattern.search(hostile)
    kernel_log.parse(hostile)


def test_new_patterns_have_no_nested_quantifiers() -> None:
    nested = re.compile(r"\((?:[^()]|\\\()*[*+]\)[*+]")
    for pattern in NEW_PATTERNS:
        assert not nested.search(pattern.pattern), pattern.pattern


@pytest.mark.parametrize(
    "line",
    [
        "[12146.826127] NVRM Xid (PCI:0000:0b:00) : 32, Channel ID 00000009 intr 00008000",  # pre-2015 drivers
        "Mar  3 10:01:02 node kernel: NVRM: Xid (PCI:0000:0b:00) : 32, Channel ID 00000009 intr 00008000",
        "[12146.826127] NVRM: Xid (PCI:0000:0b:00): 32, Channel ID 00000009 intr 00008000",
    ],
)
def test_the_old_xid_line_without_a_colon_after_nvrm_or_before_the_code(line: str) -> None:
    """The drivers before 2015 wrote "NVRM Xid (PCI:...) : 32" (no colon after NVRM, a blank before the colon:
    fireice-uk/xmr-stak#2054): the same Xid as today's form, never nothing."""
    events = to_jsonable(kernel_log.parse(f"{line}\n{line}"))["events"]
    assert [(e["kind"], e["code"], e["pci"], e["count"]) for e in events] == [("xid", 32, "0000:0b:00", 2)]


def test_nvrm_without_its_colon_inside_another_message_is_not_the_driver() -> None:
    line = '[ 5.1] audit: type=1400 name="NVRM Xid (PCI:0000:0b:00) : 79" comm="cat"'
    assert to_jsonable(kernel_log.parse(line))["events"] == []
