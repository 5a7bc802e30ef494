"""Three runbook conditions that were long Jinja expressions are collector facts now (issue 21 item 3):
``nccl_log.hang_evidence`` (nccl-hang), ``kernel_log.memory_xid_codes`` with ``nvidia_smi.memory_error_gpus``
(silent-corruption's memory evidence) and ``gpu_topology.nvlink_gap_within_first`` (preflight's TP group).

Each fact is checked against the expression it replaces, computed here in Python from the other facts,
on every recorded output of its kind, and on hand-made cases that make it true and false.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from nightowl.collectors import get_collector
from nightowl.collectors.nccl import nccl_log

ROOT = Path(__file__).resolve().parents[2]
RUNBOOKS = ROOT / "runbooks"
# The error kinds the nccl-hang condition listed before it became a fact.
OLD_HANG_KINDS = {
    "timeout", "ib_completion", "ibv_failed", "no_route", "connection_refused", "connection_reset",
    "connection_aborted", "connection_closed", "connect_timeout", "net_plugin_error", "proxy_failed",
    "socket_recv_failed", "cuda_failure", "remote_error", "unhandled_system_error", "unhandled_cuda_error",
    "internal_error", "process_down",
}  # fmt: skip
OLD_MEMORY_XIDS = {48, 63, 64, 94, 95, 140}


def recorded(kind: str) -> list[Path]:
    """Every recorded output of ``kind``: recorded hosts and rehearsals, and the collector cases' inputs."""
    files = {p for p in (ROOT / "fixtures").rglob(f"{kind}*.out")}
    for case in (ROOT / "tests" / "collectors" / "cases" / kind).glob("*.json"):
        source = json.loads(case.read_text()).get("input")
        if isinstance(source, str) and (ROOT / source).is_file():
            files.add(ROOT / source)
    return sorted(files)


def facts(kind: str, text: str) -> dict[str, Any]:
    collector = get_collector(kind)
    return collector.facts(collector.parse(text))


# --- nccl_log.hang_evidence --------------------------------------------------------------------


def old_hang_condition(f: dict[str, Any]) -> bool:
    return bool(
        f.get("watchdog_timeouts")
        or f.get("timeout_ranks")
        or ((f.get("missing_init_ranks") or []) and not f.get("ends_in_init"))
        or f.get("dist_backend_errors")
        or set(f.get("error_kinds") or []) & OLD_HANG_KINDS
    )


def test_hang_evidence_is_the_old_condition_on_every_recorded_nccl_log() -> None:
    files = recorded("nccl-log")
    assert len(files) >= 20
    seen = set()
    for path in files:
        f = facts("nccl-log", path.read_text(errors="replace"))
        assert f["hang_evidence"] is old_hang_condition(f), path
        seen.add(f["hang_evidence"])
    assert seen == {True, False}  # the recorded logs exercise both answers


def test_the_hang_kinds_are_the_ones_the_runbook_listed() -> None:
    assert nccl_log.HANG_ERROR_KINDS == OLD_HANG_KINDS


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("", False),
        ("host:1:1 [0] NCCL INFO comm 0x1 rank 0 nranks 1 cudaDev 0 busId 1000 - Init COMPLETE\n", False),
        # the log ends while the communicator forms, nothing wrong: a cut log as much as a stuck init
        ("host:1:1 [0] NCCL INFO comm 0x1 rank 0 nranks 2 cudaDev 0 busId 1000 commId 0x2 - Init START\n", False),
        # rank 1 is not in this log (another node's, or cut from the paste): its silence is no evidence
        ("host:1:1 [0] NCCL INFO comm 0x1 rank 0 nranks 2 cudaDev 0 busId 1000 - Init COMPLETE\n", False),
        # ... unless the log shows trouble
        (
            "host:1:1 [0] NCCL INFO comm 0x1 rank 0 nranks 2 cudaDev 0 busId 1000 - Init COMPLETE\n"
            "host:1:1 [0] NCCL WARN Call to connect returned Connection refused\n",
            True,
        ),
        # ... or shows rank 1 itself without its Init COMPLETE
        (
            "host:1:1 [0] NCCL INFO comm 0x1 rank 0 nranks 2 cudaDev 0 busId 1000 - Init COMPLETE\n"
            "host:2:2 [1] NCCL INFO comm 0x2 rank 1 nranks 2 cudaDev 1 busId 2000 - Init START\n",
            True,
        ),
    ],
)
def test_hang_evidence_on_hand_made_logs(text: str, expected: bool) -> None:
    assert facts("nccl-log", text)["hang_evidence"] is expected


# --- memory evidence ---------------------------------------------------------------------------


def test_memory_xid_codes_are_the_old_list_on_every_recorded_kernel_log() -> None:
    files = recorded("kernel-log")
    assert len(files) >= 20
    any_memory = False
    for path in files:
        f = facts("kernel-log", path.read_text(errors="replace"))
        assert f["memory_xid_codes"] == [c for c in f["xid_codes"] if c in OLD_MEMORY_XIDS], path
        any_memory = any_memory or bool(f["memory_xid_codes"])
    assert any_memory


def test_memory_xid_codes_on_a_hand_made_log() -> None:
    log = (
        "[ 10.0] NVRM: Xid (PCI:0000:3b:00): 13, pid=1, Graphics Exception\n"
        "[ 11.0] NVRM: Xid (PCI:0000:3b:00): 94, pid=1, Contained: CE User Channel\n"
        "[ 12.0] NVRM: Xid (PCI:0000:5e:00): 48, pid=1, An uncorrectable double bit error\n"
    )
    f = facts("kernel-log", log)
    assert f["xid_codes"] == [13, 48, 94] and f["memory_xid_codes"] == [48, 94]


def test_memory_error_gpus_is_the_union_of_the_four_lists_on_every_recorded_nvidia_smi() -> None:
    files = recorded("nvidia-smi")
    assert len(files) >= 20
    names = (
        "dram_uncorrectable_volatile_gpus",
        "retired_pages_pending_gpus",
        "remap_pending_gpus",
        "remap_failure_gpus",
    )
    any_error = False
    for path in files:
        f = facts("nvidia-smi", path.read_text(errors="replace"))
        union = list(dict.fromkeys(pci for name in names for pci in f[name]))
        assert f["memory_error_gpus"] == union, path
        any_error = any_error or bool(union)
    assert any_error


# --- gpu_topology.nvlink_gap_within_first ------------------------------------------------------


def old_nvlink_condition(f: dict[str, Any], tp: int) -> bool:
    """preflight's condition as it was (status ok and tp > 1 are checked by the runbook either way)."""
    if f.get("gpu_pairs_without_nvlink") is None:
        return False
    group = [d["name"] for d in f["devices"] if d["type"] == "gpu"][:tp]
    return any(p["a"] in group and p["b"] in group for p in f["gpu_pairs_without_nvlink"])


def new_nvlink_condition(f: dict[str, Any], tp: int) -> bool:
    return f["nvlink_gap_within_first"] is not None and f["nvlink_gap_within_first"] <= tp


MATRIX = """\
\tGPU0\tGPU1\tGPU2\tGPU3\tCPU Affinity\tNUMA Affinity
GPU0\t X \tNV12\tNV12\tSYS\t0-15\t0
GPU1\tNV12\t X \tNV12\tSYS\t0-15\t0
GPU2\tNV12\tNV12\t X \tPHB\t0-15\t0
GPU3\tSYS\tSYS\tPHB\t X \t0-15\t0

Legend:

  X    = Self
  SYS  = Connection traversing PCIe as well as the SMP interconnect between NUMA nodes
  PHB  = Connection traversing PCIe as well as a PCIe Host Bridge (typically the CPU)
  NV#  = Connection traversing a bonded set of # NVLinks
"""


@pytest.mark.parametrize("tp", [2, 3, 4, 8])
def test_the_gap_answers_as_the_old_condition_on_a_matrix_with_one_gpu_off_nvlink(tp: int) -> None:
    f = facts("gpu-topology", MATRIX)
    assert f["mode"] == "topology" and len(f["gpu_pairs_without_nvlink"]) == 3
    assert f["nvlink_gap_within_first"] == 4  # GPU3 is the first without NVLink to the others
    assert new_nvlink_condition(f, tp) is old_nvlink_condition(f, tp) is (tp >= 4)


@pytest.mark.parametrize("tp", [2, 4, 8, 16])
def test_the_gap_answers_as_the_old_condition_on_every_recorded_matrix(tp: int) -> None:
    files = recorded("gpu-topology") + sorted((ROOT / "fixtures" / "corpus" / "gpu").glob("topo-*.txt"))
    assert files
    for path in files:
        f = facts("gpu-topology", path.read_text(errors="replace"))
        assert new_nvlink_condition(f, tp) is old_nvlink_condition(f, tp), path


def test_a_p2p_matrix_knows_no_gap() -> None:
    path = ROOT / "fixtures" / "corpus" / "gpu" / "topo-p2p-rw-2gpu-gns-club3090-1229.txt"
    f = facts("gpu-topology", path.read_text())
    assert f["mode"] != "topology" and f["nvlink_gap_within_first"] is None


# --- the runbooks read the facts ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("runbook", "fact", "gone"),
    [
        ("nccl-hang.yaml", "nccl_log.hang_evidence", "'process_down'"),
        ("silent-corruption.yaml", "nvidia_smi.memory_error_gpus", "[48, 63, 64, 94, 95, 140]"),
        ("silent-corruption.yaml", "kernel_log.memory_xid_codes", "map(attribute='kernel_log.xid_codes'"),
        ("preflight.yaml", "gpu_topology.nvlink_gap_within_first", "selectattr('a', 'in'"),
    ],
)
def test_the_runbook_reads_the_fact_instead_of_the_long_condition(runbook: str, fact: str, gone: str) -> None:
    text = (RUNBOOKS / runbook).read_text()
    assert fact in text and gone not in text
