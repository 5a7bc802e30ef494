"""The platform a kernel log's boot lines name, and the VM steps it gives a reboot when nvidia-smi cannot answer
(issue 43 item 5: tenancy from the host's own evidence; knowledge/virtual_platforms.csv)."""

from __future__ import annotations

from pathlib import Path

import pytest

from nightowl.collectors import get_collector
from nightowl.collectors.gpu.kernel_log.platform import virtual_platform
from nightowl.paths import data_dir

HOSTS = data_dir("fixtures") / "hosts"
FIELD = data_dir("fixtures") / "field"


@pytest.mark.parametrize(
    ("log", "platform"),
    [
        ("[    0.000000] DMI: Amazon EC2 p5.48xlarge/, BIOS 1.0 10/16/2017\n", "Amazon EC2"),
        ("Jan  1 00:00:00 gpu-17 kernel: Hypervisor detected: KVM\n", "KVM"),
        ("2025-01-01T00:00:00+0000 gpu-17 kernel: Hypervisor detected: Microsoft Hyper-V\n", "Hyper-V"),
        ("[ 0.0] DMI: Google Google Compute Engine/Google Compute Engine, BIOS Google\n", "Google Compute Engine"),
        ("[    0.000000] DMI: Microsoft Corporation Virtual Machine/Virtual Machine, BIOS Hyper-V UEFI\n", "Hyper-V"),
        ("[    0.000000] DMI: Dell Inc. PowerEdge XE9680/0X, BIOS 1.2.3 01/01/2024\n", None),
        ("[    0.000000] DMI: Supermicro SYS-821GE-TNHR/X13DEG-OAD, BIOS 2.1 04/30/2024\n", None),
        # another message carrying the words (a file name a user chose) is never the kernel's own line
        ("[  5.1] python3[4321]: segfault at 0 ip 0 sp 0 error 4 in DMI: Amazon EC2.so[7f+1000]\n", None),
        ("[  5.1] audit: name=\"Hypervisor detected: KVM\"\n", None),
        ("", None),
    ],
)
def test_the_boot_lines_name_the_platform(log: str, platform: str | None) -> None:
    assert virtual_platform(log) == platform


def test_a_real_kvm_guest_boot_names_kvm_through_the_collector() -> None:
    text = (FIELD / "kernel-log-2" / "dmesg-ctime-full-boot-kvm-vm-1gpu-535-healthy-gpud-testdata.txt").read_text()
    collector = get_collector("kernel-log")
    assert collector.facts(collector.parse(text))["virtual_platform"] in ("QEMU", "KVM")
    bare = (HOSTS / "xid79-fallen-off-bus" / "kernel-log.out").read_text()
    assert collector.facts(collector.parse(bare))["virtual_platform"] is None


def test_a_reboot_on_a_kvm_guest_whose_nvidia_smi_fails_gets_the_instance_steps(tmp_path: Path) -> None:
    from nightowl.engine.runner import RunOptions
    from nightowl.engine.session import run_runbook
    from nightowl.library import runbooks
    from nightowl.transports.replay import ReplayTransport

    loaded = runbooks.load("xid")
    defaults = {k: p.default for k, p in loaded.runbook.parameters.items()}
    runs: dict[str, object] = {}
    for host in ("vm-kvm-xid79-composed", "xid79-fallen-off-bus"):
        folder = HOSTS / host
        (run,), _bundle = run_runbook(
            loaded,
            {host: lambda d=folder: ReplayTransport(d, d.name)},
            get_collector,
            RunOptions(params=defaults),
            tmp_path / host,
        )
        runs[host] = run
    vm = runs["vm-kvm-xid79-composed"].verdict  # type: ignore[attr-defined]
    bare = runs["xid79-fallen-off-bus"].verdict  # type: ignore[attr-defined]
    assert vm["action"] == bare["action"] == "reboot-node"
    assert vm["first_step"]["tenancy"] == "vm"
    assert vm["first_step"]["determined_by"] in (f'kernel_log.virtual_platform = "{p}"' for p in ("KVM", "QEMU"))
    assert "stop and start the instance" in vm["first_step"]["steps"]
    assert bare["first_step"]["tenancy"] is None and "stop and start" not in bare["first_step"]["steps"]
