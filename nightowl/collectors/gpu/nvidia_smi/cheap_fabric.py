"""The fabric collector's cheap form (issue 46 item 3): ``--query-gpu`` of each GPU's Fabric fields in front of
``nvidia-smi -q``.

The fabric collector (collectors/gpu/fabric.py) reads the Fabric section of a full ``nvidia-smi -q`` (~80 KB for
8 GPUs). nvidia-smi names the same fields for ``--query-gpu`` (``fabric.state``, ``fabric.status``,
``fabric.clique``, ``fabric.cluster`` and the ``fabric.health.*`` block: nvidia-smi --help-query-gpu, R570+;
an older driver refuses one, so its cheap read fails and the full form is read). They are asked first in one
query with nvidia-smi's own cheap fields (cheap.SHARED_ARGV), then alone. What the fabric verdicts judge
of a GPU (its state, status, clique, cluster and whether any health field reports trouble) is compared per GPU
with the carried full read's; any difference, or a full read that found a degraded or registering GPU, means
the full form (cheap.CheapFirst). ``FORMS`` names the form that provides each judged fact.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from nightowl.collectors.gpu.nvidia_smi import nvidia_smi_query as query
from nightowl.collectors.gpu.nvidia_smi.cheap import CHEAP, FABRIC_FIELDS, FULL, SHARED_ARGV, Forms, errors_in, parsed
from nightowl.collectors.gpu.nvidia_smi.cheap import FABRIC_HEALTH_FIELDS as HEALTH_FIELDS
from nightowl.collectors.pci import normalize_pci

CHEAP_ARGV: tuple[str, ...] = ("nvidia-smi", "--query-gpu=" + ",".join(FABRIC_FIELDS), "--format=csv,nounits")
FULL_ARGVS: tuple[tuple[str, ...], ...] = (("nvidia-smi", "-q"),)

# The facts node-health reads of the fabric namespace and the form that provides each on a cheap read.
FORMS: dict[str, str] = {
    "gpus_with_fabric": CHEAP,  # a GPU whose state or status is printed
    "degraded_gpus": CHEAP,  # status, state, clique on NVL, health
    "degraded": CHEAP,
    "in_progress_gpus": CHEAP,
    "cliques": CHEAP,
    "cluster_uuids": CHEAP,
    "nvl_system": CHEAP,  # the product name and the cluster
    "gpu_count": CHEAP,
    "gpus": FULL,  # each GPU's section as printed: carried while every judged value above is the same
    "read_form": CHEAP,
}
_FINE = {"full", "false", "healthy", "no", "n/a", "not supported", ""}  # fabric._health_problems' own set
_UNSET = {"n/a", "not supported", "", "unknown", "[n/a]"}


def _text(value: Any) -> str | None:
    if value is None:
        return None
    text = str(value).strip()
    return None if text.lower() in _UNSET else text


def _clique(value: Any) -> int | None:
    try:
        return int(str(value).strip())
    except ValueError:
        return None


def _gpu(name: Any, state: Any, status: Any, clique: Any, cluster: Any, trouble: bool) -> list[Any]:
    return [_text(name), _text(state), _text(status), _clique(clique) if clique is not None else None,
            _text(cluster), trouble]  # fmt: skip


def judged_full(facts: Mapping[str, Any]) -> dict[str, Any]:
    """Per GPU (normalised bus id): name, state, status, clique, cluster, health trouble; and the findings."""
    gpus: dict[str, Any] = {}
    for gpu in facts.get("gpus") or []:
        if not isinstance(gpu, Mapping):
            continue
        health = gpu.get("health") or {}
        trouble = any(str(v).strip().lower() not in _FINE for v in health.values())
        pci = normalize_pci(gpu.get("pci")) or str(gpu.get("pci"))
        gpus[pci] = _gpu(gpu.get("name"), gpu.get("state"), gpu.get("status"), gpu.get("clique_id"),
                         gpu.get("cluster_uuid"), trouble)  # fmt: skip
    return {
        "gpus": dict(sorted(gpus.items())),
        "degraded_gpus": sorted(str(g) for g in facts.get("degraded_gpus") or []),
        "in_progress_gpus": sorted(str(g) for g in facts.get("in_progress_gpus") or []),
    }


def judged_cheap(text: str) -> dict[str, Any] | str:
    """The cheap form's judged values, or why it cannot be compared with a full read. Its findings are left
    empty: a full read that had any is read in full again (``findings``), so only a clean one is compared."""
    result = parsed(text)
    if result.warnings or errors_in(result, FABRIC_FIELDS) or not result.gpus:
        return "the cheap fabric read has unread lines, errors or no GPU"
    missing = [name for name in FABRIC_FIELDS if name not in result.fields]
    if missing:
        return "the cheap fabric read lacks " + ", ".join(missing)
    gpus: dict[str, Any] = {}
    for row in result.gpus:
        trouble = any(
            str(row.get(f) if row.get(f) is not None else "").strip().lower() not in _FINE for f in HEALTH_FIELDS
        )
        gpus[str(query.gpu_id(row))] = _gpu(row.get("name"), row.get("fabric.state"), row.get("fabric.status"),
                                            row.get("fabric.clique"), row.get("fabric.cluster"), trouble)  # fmt: skip
    return {"gpus": dict(sorted(gpus.items())), "degraded_gpus": [], "in_progress_gpus": []}


def findings(judged: Mapping[str, Any]) -> list[str]:
    return [name for name in ("degraded_gpus", "in_progress_gpus") if judged.get(name)]


FABRIC = Forms((SHARED_ARGV, CHEAP_ARGV), FULL_ARGVS, judged_full, judged_cheap, findings)
