"""The parser fixes real samples of issue 23/24 round two called for, beyond their parse cases (docs/evidence.md)."""

from __future__ import annotations

from nightowl.collectors.gpu import dcgmi_diag, fabric, kernel_log
from nightowl.collectors.nccl import nccl_log
from nightowl.collectors.network import ib_ports, nic_links
from nightowl.collectors.serving import engine_log
from tests.helpers import ROOT


def _kernel(text: str) -> dict:
    return kernel_log.facts(kernel_log.parse(text))


def test_mig_attributed_xid_keeps_its_gpu_and_names_the_instance() -> None:
    data = _kernel(
        "NVRM: Xid (PCI:0000:01:00 GPU-I:05): 94, pid=7194, Contained: CE User Channel (0x9). RST: No, D-RST: No\n"
        "NVRM: Xid (PCI:0000:3b:00 GPU-I:01 GPU-CI:02): 13, pid=9, name=a, Graphics Exception\n"
        "NVRM: Xid (PCI:0000:3b:00): 13, pid=10, name=b, Graphics Exception\n"
    )
    assert data["xids_by_gpu"] == {"0000:01:00": [94], "0000:3b:00": [13]}
    assert data["xid_mig_instances"] == [
        {"pci": "0000:01:00", "code": 94, "gpu_instance": 5, "compute_instance": None},
        {"pci": "0000:3b:00", "code": 13, "gpu_instance": 1, "compute_instance": 2},
    ]
    assert _kernel("NVRM: Xid (PCI:0000:3b:00): 13, pid=10, name=b, Graphics Exception\n")["xid_mig_instances"] == []


def test_dcgm_refusing_a_mig_gpu_is_no_result_not_a_failure() -> None:
    line = "GPU 2's MIG configuration is incompatible with the diagnostic because it prevents access to the entire GPU."
    data = dcgmi_diag.facts(dcgmi_diag.parse(line + "\n"))
    assert data["mig_blocked"] and data["mig_blocked_gpus"] == [2]
    assert data["overall"] == "not_run" and data["failed_gpus"] == [] and data["failed_tests"] == []
    assert not dcgmi_diag.facts(dcgmi_diag.parse("Error: unable to connect to host engine\n"))["mig_blocked"]


def _kv(text: str) -> float | None:
    return engine_log.parse(text).kv_cache.kv_cache_gib  # type: ignore[union-attr]


def test_kv_budget_is_the_smallest_worker_of_one_start() -> None:
    one_start = (
        "(Worker_TP1 pid=2) INFO [gpu_worker.py:298] Available KV cache memory: -3.86 GiB\n"
        "(Worker_TP0 pid=1) INFO [gpu_worker.py:298] Available KV cache memory: 9.90 GiB\n"
    )
    assert _kv(one_start) == -3.86
    # the same worker reporting again is the next start: its value replaces the old group's minimum
    restart = one_start + "(Worker_TP1 pid=7) INFO [gpu_worker.py:298] Available KV cache memory: 5.00 GiB\n"
    assert _kv(restart) == 5.0
    # unprefixed lines (single process): the last one wins, as before
    assert _kv("Available KV cache memory: -1.00 GiB\nAvailable KV cache memory: 2.00 GiB\n") == 2.0


def test_bonding_downdelay_wording_and_any_bond_name() -> None:
    assert nic_links.link_change("internet: link status down for interface eno4, disabling it in 200 ms") == (
        "eno4",
        "down",
        None,
        "bonding internet",
    )
    assert nic_links.link_change("bond0: link status up again after 0 ms for interface eno4") == (
        "eno4",
        "up",
        None,
        "bonding bond0",
    )
    assert nic_links.link_change("bond0: (slave ens1f0np0): link status definitely down, disabling slave") == (
        "ens1f0np0",
        "down",
        None,
        "bonding bond0",
    )
    assert nic_links.link_change("systemd: link status checked") is None


def test_nccl_per_hca_gdr_line() -> None:
    prefix = "host:1:2 [0] NCCL INFO "

    def gdr(*lines: str) -> bool | None:
        return nccl_log.parse("".join(prefix + line + "\n" for line in lines)).gdr

    assert gdr("NET/IB : GPU Direct RDMA Disabled for HCA 0 'mlx5_0'") is False
    disabled = "NET/IB : GPU Direct RDMA Disabled for HCA 0 'mlx5_0'"
    enabled = "NET/IB : GPU Direct RDMA Enabled for HCA 1 'mlx5_1'"
    assert gdr(disabled, enabled) is True
    assert gdr("GPU Direct RDMA Disabled for GPU 0 / HCA 0 (distance 8 > 5)") is False
    assert gdr("NET/IB : Using [0]mlx5_0:1/IB ; OOB ib0:10.0.0.1<0>") is None


def test_ibstatus_ports_and_their_rates() -> None:
    text = (ROOT / "fixtures/corpus/fabric/ibstatus-h20-bf3-200-hdr-beside-400-ndr-deepep17.txt").read_text()
    result = ib_ports.parse(text)
    assert [(p.label, p.state, p.phys_state, p.rate_gbps) for p in result.ports] == [
        ("mlx5_0/1", "ACTIVE", "LinkUp", 200.0),
        ("mlx5_1/1", "ACTIVE", "LinkUp", 400.0),
        ("mlx5_2/1", "ACTIVE", "LinkUp", 400.0),
    ]
    assert not ib_ports.shows_nothing(text)


def test_fabric_na_section_is_told_from_a_missing_one() -> None:
    printed = fabric.parse("GPU 00000000:01:00.0\n    Fabric\n        State : N/A\n        Status : N/A\n")
    missing = fabric.parse("GPU 00000000:01:00.0\n    Product Name : NVIDIA L40S\n")
    assert printed.warnings == ["Fabric section reads N/A on every GPU (no NVLink fabric registration on this system)"]
    assert missing.warnings == ["no Fabric section in any GPU block (driver too old, or output trimmed)"]


def test_typographic_apostrophe_in_the_driver_not_loaded_message() -> None:
    from nightowl.collectors import get_collector

    collector = get_collector("nvidia-smi")
    for quote in ("'", "\u2018", "\u2019"):
        text = f"NVIDIA-SMI has failed because it couldn{quote}t communicate with the NVIDIA driver.\n"
        assert collector.facts(collector.parse(text))["driver_not_loaded"], quote


def test_xid_runbook_names_the_mig_instance_of_an_application_fault(tmp_path) -> None:  # noqa: ANN001
    from tests.runbook_helpers import make_host, run_on

    line = "NVRM: Xid (PCI:0000:3b:00 GPU-I:01 GPU-CI:02): 13, pid=9, name=a, Graphics Exception\n"
    verdict, _ = run_on("xid", make_host(tmp_path, "mig-app-fault", {"kernel-log.out": line}))
    assert verdict["id"] == "application-fault" and verdict["action"] == "restart-app"
    assert "0000:3b:00 is attributed to MIG GPU instance 1 (compute instance 2)" in verdict["summary"]
    plain, _ = run_on(
        "xid", make_host(tmp_path, "plain-app-fault", {"kernel-log.out": line.replace(" GPU-I:01 GPU-CI:02", "")})
    )
    assert "MIG" not in plain["summary"]
