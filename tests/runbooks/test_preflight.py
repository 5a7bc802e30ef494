"""preflight runbook: rehearsals on recorded hosts, and the checks the corpus cannot show, on composed hosts."""

from __future__ import annotations

from pathlib import Path

import pytest

from nightowl.library import runbooks
from nightowl.library.rehearse import rehearsal_cases, rehearse
from tests.helpers import ROOT
from tests.runbook_helpers import make_host, run_on

CORPUS = ROOT / "fixtures" / "corpus" / "gpu"
H100_TABLE = (CORPUS / "nvsmi-table-h100-sxm-x8-565.txt").read_text()
# An 8-GPU `nvidia-smi topo -m` in the layout of the corpus's DGX A100 sample, composed: GPU0-3 and
# GPU4-7 are two NVLink islands, joined only through the CPUs (SYS), as on PCIe boards with bridges.
TWO_ISLANDS = (
    "\n".join(
        ["\tGPU0\tGPU1\tGPU2\tGPU3\tGPU4\tGPU5\tGPU6\tGPU7\tCPU Affinity\tNUMA Affinity"]
        + [
            f"GPU{i}\t"
            + "\t".join("X" if i == j else ("NV4" if i // 4 == j // 4 else "SYS") for j in range(8))
            + f"\t{0 if i < 4 else 32}-{31 if i < 4 else 63}\t{i // 4}"
            for i in range(8)
        ]
    )
    + "\n"
)


@pytest.mark.parametrize("case", rehearsal_cases("preflight"), ids=lambda c: c["name"][:50])
def test_rehearsal(case: dict) -> None:
    result = rehearse("preflight", case)
    assert result.passed, f"{result.problems} (path {result.path})"


def test_runbook_validates_and_names_a_fix_in_every_failing_verdict() -> None:
    loaded = runbooks.load("preflight")
    verdicts = {n.verdict.id: n.verdict for n in loaded.runbook.nodes.values() if n.verdict}
    for verdict_id, verdict in verdicts.items():
        if verdict.action != "none":
            assert "Fix:" in verdict.summary or "nightowl triage" in verdict.summary, verdict_id


# a /dev/shm that was read: without it "ready" cannot be said (absence is not health)
SHM = (ROOT / "fixtures" / "hosts" / "preflight-h100-ready" / "dev-shm.out").read_text()


def test_tp_group_across_nvlink_islands(tmp_path: Path) -> None:
    host = make_host(
        tmp_path, "two-islands", {"nvidia-smi.out": H100_TABLE, "gpu-topology.out": TWO_ISLANDS, "dev-shm.out": SHM}
    )
    verdict, path = run_on("preflight", host, {"tp": 4})
    assert verdict["id"] == "ready", verdict  # GPU0-3 share NVLink
    verdict, path = run_on("preflight", host, {"tp": 8})
    assert verdict["id"] == "tp-group-without-nvlink"
    assert path[-2:] == ["nvlink", "tp-group-without-nvlink"]
    assert "GPU0-GPU4 SYS" in verdict["summary"]


def test_cpu_governor(tmp_path: Path) -> None:
    # the one word the kernel's scaling_governor file holds (composed: no corpus sample)
    host = make_host(
        tmp_path, "powersave", {"nvidia-smi.out": H100_TABLE, "cpu-governor.out": "powersave\n", "dev-shm.out": SHM}
    )
    verdict, _ = run_on("preflight", host)
    assert verdict["id"] == "cpu-governor-not-performance" and verdict["action"] == "reconfigure"
    assert run_on("preflight", host, {"require_performance_governor": False})[0]["id"] == "ready"
    performance = make_host(
        tmp_path, "performance", {"nvidia-smi.out": H100_TABLE, "cpu-governor.out": "performance\n", "dev-shm.out": SHM}
    )
    assert run_on("preflight", performance)[0]["id"] == "ready"


def test_docker_default_shm(tmp_path: Path) -> None:
    df = (
        "Filesystem     1K-blocks  Used Available Use% Mounted on\n"
        "shm                65536     0     65536   0% /dev/shm\n"
    )
    host = make_host(tmp_path, "docker-shm", {"nvidia-smi.out": H100_TABLE, "dev-shm.out": df})
    verdict, _ = run_on("preflight", host)
    assert verdict["id"] == "shm-too-small" and "--ipc=host" in verdict["summary"]


def test_version_comparison_is_numeric(tmp_path: Path) -> None:
    host = make_host(
        tmp_path, "h100", {"nvidia-smi.out": H100_TABLE, "dev-shm.out": SHM}
    )  # driver 565.57.01, CUDA 12.7
    assert run_on("preflight", host, {"min_driver": "565.57.1"})[0]["id"] == "ready"
    assert run_on("preflight", host, {"min_driver": 570})[0]["id"] == "driver-too-old"  # --param min_driver=570
    assert run_on("preflight", host, {"min_driver": "99.99"})[0]["id"] == "ready"  # 565 > 99 as numbers
    assert run_on("preflight", host, {"min_cuda": 12.10})[0]["id"] == "ready"  # YAML reads 12.10 as 12.1


def test_nvidia_smi_missing_blocks_everything(tmp_path: Path) -> None:
    df = (ROOT / "fixtures" / "hosts" / "preflight-h100-ready" / "dev-shm.out").read_text()
    host = make_host(
        tmp_path, "no-smi", {"nvidia-smi.rc": "127\n", "nvidia-smi.err": "nvidia-smi: not found\n", "dev-shm.out": df}
    )
    verdict, path = run_on("preflight", host)
    assert verdict["id"] == "gpus-not-visible" and path == ["collect", "gpus", "gpus-not-visible"]
