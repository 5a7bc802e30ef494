"""The kernel's own faults outside the NVIDIA driver (issue "Never cry wolf", the fourteenth field set's fault judged
healthy: a general protection fault in __kmalloc, NVIDIA/k8s-device-plugin#941): a BUG, an Oops, a bad access or a
general protection fault whose task and frames are not the driver's is `host_kernel_faults`, and the xid runbook's
`host-kernel-fault` (escalate); a WARNING is not, and a fault in the driver stays a driver-load failure."""

from __future__ import annotations

import pytest

from tests.helpers import facts_of

GPF = (
    "Sep 06 23:00:02 kernel: general protection fault, probably for non-canonical address 0x40b5ff3c61e2aed3: 0000 "
    "[#1] PREEMPT SMP NOPTI\n"
    "Sep 06 23:00:02 kernel: CPU: 4 PID: 1089479 Comm: ray::ImplicitFu Tainted: P           OE      6.8.0-40\n"
    "Sep 06 23:00:02 kernel: RIP: 0010:__kmalloc+0x15b/0x480\n"
)
OOPS = (
    "[  12.000000] BUG: kernel NULL pointer dereference, address: 0000000000000008\n"
    "[  12.000001] CPU: 2 PID: 812 Comm: kworker/2:1 Not tainted 6.5.0\n"
    "[  12.000002] RIP: 0010:ext4_readdir+0x20/0x5e0\n"
)
WARNING = (
    "[   5.000000] ------------[ cut here ]------------\n"
    "[   5.000001] WARNING: CPU: 0 PID: 1 at drivers/base/devres.c:1064 devm_kfree+0x4c/0x60\n"
    "[   5.000002] CPU: 0 PID: 1 Comm: swapper/0 Not tainted 6.5.0\n"
)
IN_DRIVER = (
    "[  20.000000] BUG: unable to handle page fault for address: ffffb8a4c1e3f000\n"
    "[  20.000001] CPU: 7 PID: 4242 Comm: python3 Tainted: P           OE     6.5.0\n"
    "[  20.000002] RIP: 0010:_nv012345rm+0x1b/0x40 [nvidia]\n"
    "[  20.000003]  os_alloc_mem+0x24/0x40 [nvidia]\n"
)


@pytest.mark.parametrize(("text", "kind"), [(GPF, "kernel_general_protection"), (OOPS, "kernel_bad_access")])
def test_a_kernel_fault_outside_the_driver_is_a_host_kernel_fault(text: str, kind: str) -> None:
    facts = facts_of("kernel-log", text)
    assert [f["id"] for f in facts["host_kernel_faults"]] == [kind]
    assert facts["driver_load_failures"] == []


def test_a_warning_is_not_a_fault() -> None:
    assert facts_of("kernel-log", WARNING)["host_kernel_faults"] == []


def test_a_fault_in_the_driver_is_the_drivers_not_the_hosts() -> None:
    facts = facts_of("kernel-log", IN_DRIVER)
    assert facts["host_kernel_faults"] == []
    assert facts["driver_load_failures"]
