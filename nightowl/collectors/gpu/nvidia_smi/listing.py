"""``nvidia-smi -L``: one line per GPU, ``GPU 0: NVIDIA A100-SXM4-80GB (UUID: GPU-...)``, and under a GPU in MIG
mode one line per MIG device, ``  MIG 1g.10gb     Device  0: (UUID: MIG-...)`` (nvidia-smi(1), ``-L``/
``--list-gpus``; drivers before R470 print ``MIG 1g.10gb Device 0: (UUID: MIG-GPU-.../7/0)``). A MIG device
is no GPU: the count is of the ``GPU N:`` lines.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from nightowl.collectors.gpu.nvidia_smi.results import Gpu, MigDevice

# "GPU 0: Tesla T4 (UUID: GPU-...)"; a paste may lose the closing parenthesis or put "S/N" first.
_GPU = re.compile(
    r"^\s*GPU (?P<index>\d+): (?P<name>.+?)\s*\((?:S/N: \S+, )?UUID: "  # "S/N" first on some boards
    r"(?P<uuid>GPU-[0-9A-Fa-f-]+)\)?\s*$"
)
_MIG = re.compile(
    r"^\s*MIG (?P<profile>\d+g\.\d+gb|\d+c\.\d+g\.\d+gb)\s+Device\s+(?P<index>\d+): "
    r"\(UUID: (?P<uuid>MIG-[^)\s]+)\)?\s*$"
)


def looks_like_listing(lines: Sequence[str]) -> bool:
    """Whether the output is ``nvidia-smi -L`` (a ``GPU N: ... (UUID: GPU-...)`` line)."""
    return any(_GPU.match(line) for line in lines)


def parse_listing(lines: Sequence[str]) -> list[Gpu]:
    """The GPUs of a ``-L`` listing, each with its MIG devices (their profiles) in listing order."""
    gpus: list[Gpu] = []
    migs: list[list[MigDevice]] = []
    for line in lines:
        gpu = _GPU.match(line)
        if gpu is not None:
            gpus.append(
                Gpu(pci=None, name=gpu.group("name").strip(), uuid=gpu.group("uuid"), index=int(gpu.group("index")))
            )
            migs.append([])
            continue
        mig = _MIG.match(line)
        if mig is not None and gpus:
            migs[-1].append(
                MigDevice(
                    index=int(mig.group("index")),
                    profile=mig.group("profile"),
                    gpu_instance_id=None,
                    compute_instance_id=None,
                )
            )
    return [
        Gpu(pci=g.pci, name=g.name, uuid=g.uuid, index=g.index, mig_mode="Enabled" if m else None, mig_devices=tuple(m))
        for g, m in zip(gpus, migs, strict=True)
    ]
