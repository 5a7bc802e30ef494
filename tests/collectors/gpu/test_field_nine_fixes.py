"""Fixes the ninth field set called for in the GPU readers (issue "Never cry wolf"): a `topo -m` whose web paste
lost tabs between names and cells (vllm-project/vllm#13855) was read as no matrix at all, and nvidia-modeset's
"Idling display engine timed out" with no status (ValveSoftware/SteamVR-for-Linux#247) as a healthy log."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers import facts_of, replayed_action

HEADER = "\tGPU0\tGPU1\tNIC0\tNIC1\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID\n"
ROWS = "GPU0\t X \tNV18\tPXB\tSYS\t0-55\t0\t\tN/A\nGPU1\tNV18\t X \tSYS\tPXB\t56-111\t1\t\tN/A\n"


@pytest.mark.parametrize(
    ("text", "glued"),
    [
        (HEADER.replace("NIC0\tNIC1", "NIC0NIC1") + ROWS, "header"),
        (HEADER + ROWS.replace("PXB\tSYS", "PXBSYS"), "cells"),
        (HEADER.replace("GPU0\tGPU1", "GPU0GPU1") + ROWS.replace("NV18\tPXB", "NV18PXB"), "both"),
    ],
)
def test_names_and_cells_glued_by_a_lost_tab_are_split_back(text: str, glued: str) -> None:
    facts = facts_of("gpu-topology", text)
    bare = facts_of("gpu-topology", HEADER + ROWS)
    assert facts["gpu_count"] == bare["gpu_count"] == 2, glued
    assert facts["matrix"] == bare["matrix"], glued


def test_a_token_that_is_not_names_end_to_end_stays_as_it_is() -> None:
    facts = facts_of("gpu-topology", HEADER + ROWS.replace("PXB\tSYS", "PXBQ\tSYS"))
    assert facts["matrix"]["GPU0"]["NIC0"] == "PXBQ"


def _xid_action(tmp_path: Path, kernel_log: str) -> str:
    return replayed_action(tmp_path, "xid", {"kernel-log.out": kernel_log}, "healthy-l40s")


@pytest.mark.parametrize(
    ("line", "action"),
    [
        ("nvidia-modeset: ERROR: GPU:0: Idling display engine timed out: 0x0000927c:1:0:830", "escalate"),
        (
            "nvidia-modeset: ERROR: GPU:0: The requested configuration of display devices (Asustek (DP-2)) is not "
            "supported on this GPU.",
            "none",
        ),
    ],
)
def test_a_display_engine_that_does_not_idle_is_escalated_a_display_setting_is_not(
    tmp_path: Path, line: str, action: str
) -> None:
    assert _xid_action(tmp_path, f"[70878.662550] {line}\n") == action
