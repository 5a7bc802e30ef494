"""gpu-topology collector: one JSON case per captured sample, plus tab layouts and NIC legends."""

from __future__ import annotations

from nightowl.collectors import get_collector
from nightowl.collectors.gpu.gpu_topology import COLLECTOR, facts, parse


def test_collector() -> None:
    assert get_collector("gpu-topology") is COLLECTOR
    assert COLLECTOR.commands == (("nvidia-smi", "topo", "-m"),)


# Tab-separated as nvidia-smi prints it: double tabs leave empty cells, NIC rows have no affinity.
TABBED = (
    "\tGPU0\tGPU1\tGPU2\tNIC0\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID\n"
    "GPU0\t X \tNV18\tNV17\tPXB\t0-55\t0\t\tN/A\n"
    "GPU1\tNV18\t X \tSYS\tSYS\t56-111\t1\t\tN/A\n"
    "GPU2\tNV17\tSYS\t X \tSYS\t56-111\t1\t\tN/A\n"
    "NIC0\tPXB\tSYS\tSYS\t X \n\nLegend:\n\n  X    = Self\n"
    "  NV#  = Connection traversing a bonded set of # NVLinks\n"
    "\nNIC Legend:\n\n  NIC0: mlx5_0\n"
)


def test_tabbed_matrix_with_nic_legend_and_a_pcie_pair() -> None:
    derived = facts(parse(TABBED))
    assert derived["warnings"] == []
    assert derived["devices"][3] == {"name": "NIC0", "type": "nic", "device": "mlx5_0"}
    assert derived["cpu_affinity"] == {"GPU0": "0-55", "GPU1": "56-111", "GPU2": "56-111"}
    assert derived["numa_affinity"] == {"GPU0": "0", "GPU1": "1", "GPU2": "1"}
    assert derived["gpu_numa_id"] == {"GPU0": None, "GPU1": None, "GPU2": None}
    assert derived["matrix"]["NIC0"] == {"GPU0": "PXB", "GPU1": "SYS", "GPU2": "SYS", "NIC0": "X"}
    assert derived["gpu_pairs_without_nvlink"] == [{"a": "GPU1", "b": "GPU2", "link": "SYS"}]
    assert derived["nvlink_all_pairs"] is False
    assert derived["nvlink_min_bonded"] == 17


def test_full_nvlink_mesh() -> None:
    text = "        GPU0    GPU1    CPU Affinity\nGPU0     X      NV6     0-23\nGPU1    NV6      X      0-23\n"
    derived = facts(parse(text))
    assert derived["nvlink_all_pairs"] is True and derived["gpu_pairs_without_nvlink"] == []


def test_not_topology_output() -> None:
    derived = facts(parse("nothing here\n"))
    assert derived["devices"] == [] and derived["nvlink_all_pairs"] is None and derived["warnings"]
