"""The ``kernel-log`` result type and its event kinds (docs/reference.md#parse-output)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

KIND = "kernel-log"

EVENT_KINDS = ("xid", "sxid", "fallen_off_bus", "gpu_reset_required", "oom_kill", "pcie_aer", "other_nvrm")


@dataclass
class KernelLogResult:
    """``kernel-log`` (docs/reference.md#parse-output). Events are dicts: the contract keys plus per-kind extras."""

    kind: str = KIND
    events: list[dict[str, Any]] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    driver_version: str | None = None
    pcie_bandwidth_limited: list[dict[str, Any]] = field(default_factory=list)
    lines_read: int = 0
    # Beside the GPU events (new keys): host memory/APEI errors, hung tasks, devices nouveau holds.
    host_errors: list[dict[str, Any]] = field(default_factory=list)
    hung_tasks: list[dict[str, Any]] = field(default_factory=list)
    nouveau_devices: list[str] = field(default_factory=list)
    # Tasks in D state whose stack waits on a lock inside the NVIDIA driver (driver_locks.py).
    driver_lock_waits: list[dict[str, Any]] = field(default_factory=list)
    driver_module_missing: bool = False  # modprobe / systemd-modules-load found no nvidia module
    virtual_platform: str | None = None  # a hypervisor or cloud the boot lines name (platform.py)
    gpu_library_crashes: list[dict[str, Any]] = field(default_factory=list)  # segfaults in libnccl, libcuda ...
    # the driver could not load or use any GPU: [{id, line}] (knowledge/driver_load_failures.csv)
    driver_load_failures: list[dict[str, str]] = field(default_factory=list)
    # the kernel's own faults outside the driver (a BUG, an Oops, a general protection fault): [{id, line}]
    host_kernel_faults: list[dict[str, str]] = field(default_factory=list)
    nic_links: list[dict[str, Any]] = field(default_factory=list)  # link downs/ups per NIC port (nic_links.py)
    # the titles of GSP RPC debug dumps (the driver prints them with Xid 119/120), whatever event they follow
    gsp_rpc_dumps: list[str] = field(default_factory=list)
