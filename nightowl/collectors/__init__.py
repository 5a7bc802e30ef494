"""Registry of collectors by their contract kind; modules load lazily."""

from __future__ import annotations

import importlib

from nightowl.collectors.base import Collector
from nightowl.collectors.readonly import violations

# kind -> module that defines COLLECTOR (or "module:ATTRIBUTE") (kinds are the `nightowl parse` kinds,
# docs/reference.md#kinds)
MODULES: dict[str, str] = {
    "nvidia-smi": "nightowl.collectors.gpu.nvidia_smi.nvidia_smi",
    "kernel-log": "nightowl.collectors.gpu.kernel_log.kernel_log",
    "kernel-log-boots": "nightowl.collectors.gpu.kernel_log_boots",
    "gpu-history": "nightowl.collectors.gpu.gpu_history",
    "nccl-log": "nightowl.collectors.nccl.nccl_log",
    "nccl-ras": "nightowl.collectors.nccl.nccl_ras",
    "nccl-tests": "nightowl.collectors.nccl.nccl_tests",
    "nccl-tests-run": "nightowl.collectors.nccl.nccl_tests:RUN_COLLECTOR",
    "busbw-judgement": "nightowl.collectors.nccl.busbw_judgement",
    "metrics": "nightowl.collectors.serving.metrics",
    "engine-log": "nightowl.collectors.serving.engine_log",
    "container-state": "nightowl.collectors.serving.container_state",
    "dev-shm": "nightowl.collectors.host.dev_shm",
    "free-space": "nightowl.collectors.host.free_space",
    "cpu-governor": "nightowl.collectors.host.cpu_governor",
    "bench-serve": "nightowl.collectors.serving.bench_serve",
    "metrics-window": "nightowl.collectors.serving.metrics_window",
    "xid-judgement": "nightowl.collectors.gpu.xid_judgement",
    "pcie-attribution": "nightowl.collectors.host.pcie_attribution",
    "nvidia-smi-query": "nightowl.collectors.gpu.nvidia_smi.nvidia_smi_query",
    "nvlink": "nightowl.collectors.gpu.nvlink",
    "nvlink-errors": "nightowl.collectors.gpu.nvlink:ERRORS_COLLECTOR",
    "gpu-topology": "nightowl.collectors.gpu.gpu_topology",
    "dcgmi-diag": "nightowl.collectors.gpu.dcgmi_diag",
    "dcgmi-diag-drained": "nightowl.collectors.gpu.dcgmi_diag:DRAINED_COLLECTOR",
    "known-answer": "nightowl.collectors.serving.known_answer",
    "replica-health": "nightowl.collectors.serving.replica_health",
    "replica-models": "nightowl.collectors.serving.replica_models",
    "replica-metrics": "nightowl.collectors.serving.replica_metrics",
    "replica-compare": "nightowl.collectors.serving.replica_compare",
    "stream-probe": "nightowl.collectors.serving.stream_probe",
    "ib-ports": "nightowl.collectors.network.ib_ports",
    "ib-ports-window": "nightowl.collectors.network.ib_ports_window",
    "fabric": "nightowl.collectors.gpu.fabric",
    "fabric-manager": "nightowl.collectors.gpu.fabric_manager",
    "xid-nvlink5": "nightowl.collectors.gpu.xid_nvlink5",
    "nvlink-errors-window": "nightowl.collectors.gpu.nvlink_errors_window",
    "dcgm-metrics": "nightowl.collectors.gpu.dcgm_metrics",
}


class UnknownCollector(KeyError):
    pass


class UnsafeCollector(ValueError):
    """A collector declares a command that could change a node; it is never loaded."""


def get_collector(kind: str) -> Collector:
    module_name = MODULES.get(kind)
    if module_name is None:
        raise UnknownCollector(kind)
    module_name, _, attribute = module_name.partition(":")
    module = importlib.import_module(module_name)
    collector: Collector = getattr(module, attribute or "COLLECTOR")
    problems = violations(collector.commands)
    if problems:
        raise UnsafeCollector(f"collector {kind!r} is not read-only: " + "; ".join(problems))
    return collector


def available_kinds() -> list[str]:
    return sorted(MODULES)


__all__ = [
    "MODULES",
    "Collector",
    "UnknownCollector",
    "UnsafeCollector",
    "available_kinds",
    "get_collector",
]
