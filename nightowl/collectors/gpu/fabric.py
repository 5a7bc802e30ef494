"""``fabric``: the NVLink fabric as each GPU sees it, from ``nvidia-smi -q``'s Fabric section.

Per GPU: State (Not Supported, Not Started, In Progress, Completed), Status (Success or the NVML
error that ended the registration, e.g. "Insufficient Resources"), CliqueId, ClusterUUID and the
Health block (Bandwidth, Route Recovery in progress, Route Unhealthy, Access Timeout Recovery,
Summary where the driver prints them). Fields: NVML ``nvmlGpuFabricInfo_v2_t`` / nvidia-smi
documentation (https://docs.nvidia.com/deploy/nvidia-smi/index.html, "Fabric").

A GPU on a multi-node NVLink system (GB200/GB300 NVL) that finished registration with a Status other
than Success, or with CliqueId 0 and a zero ClusterUUID, is outside the NVLink domain its job expects
although State says Completed. An HGX board (H100/H200/B200 with NVSwitch in one node) shows
CliqueId 0 and a zero ClusterUUID when healthy, so those two are judged on NVL systems only.

The text and XML (``-q -x``: ``<fabric><state>...``) forms are both read.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass, field
from typing import Any

from nightowl.collectors.base import Collector, parsed_once, registered, to_jsonable
from nightowl.collectors.gpu.nvidia_smi.cheap import CheapFirst
from nightowl.collectors.gpu.nvidia_smi.cheap_fabric import FABRIC
from nightowl.collectors.lines import newline_joined
from nightowl.collectors.pci import find_pci

KIND = "fabric"
ZERO_UUID = "00000000-0000-0000-0000-000000000000"
# Product names of multi-node NVLink (NVL) systems, where the clique and cluster identify the NVLink
# domain (NVIDIA GB200 NVL72 / GB300 NVL72 product pages; nvidia-smi prints "NVIDIA GB200").
NVL_PRODUCTS = re.compile(r"\bGB[23]00\b", re.IGNORECASE)
UNSET = frozenset({"n/a", "not supported", "", "unknown"})

_GPU = re.compile(r"^GPU\s+(?P<pci>[0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-9A-Fa-f])\s*$")
# A value or section name ends at its last non-blank: matched greedily to it, not by trying the end of the line
# after every character (the tests hold both to the lazy "(.*?)\s*$" forms they replace).
_PAIR = re.compile(r"^(?P<indent>\s*)(?P<key>[A-Za-z][A-Za-z0-9 ()/_-]*?)\s*:\s*(?P<value>(?:.*\S)?)\s*$")
_SECTION = re.compile(r"^(?P<indent>\s*)(?P<key>[A-Za-z](?:[A-Za-z0-9 ()/_-]*[A-Za-z0-9()/_-])?)\s*$")
_XML_GPU = re.compile(r'<gpu id="(?P<pci>[^"]+)">(?P<body>.*?)</gpu>', re.DOTALL)
_XML_TAG = re.compile(r"<(?P<tag>[A-Za-z_]+)>(?P<value>[^<]*)</(?P=tag)>")
_XML_BLOCK = re.compile(r"<fabric>(?P<body>.*?)</fabric>", re.DOTALL)
_XML_HEALTH = re.compile(r"<health>(?P<body>.*?)</health>", re.DOTALL)
_XML_NAME = re.compile(r"<product_name>(?P<name>[^<]*)</product_name>")
_FABRIC_SEEN = re.compile(r"^\s*Fabric\s*$|<fabric>", re.MULTILINE)

HEALTH_KEYS = {
    "bandwidth": "bandwidth",
    "route recovery in progress": "route_recovery_in_progress",
    "route_recovery_in_progress": "route_recovery_in_progress",
    "route unhealthy": "route_unhealthy",
    "route_unhealthy": "route_unhealthy",
    "access timeout recovery": "access_timeout_recovery",
    "access_timeout_recovery": "access_timeout_recovery",
    "incorrect configuration": "incorrect_configuration",
    "incorrect_configuration": "incorrect_configuration",
    "summary": "summary",
}


@dataclass
class GpuFabric:
    pci: str | None
    name: str | None = None
    state: str | None = None
    status: str | None = None
    clique_id: int | None = None
    cluster_uuid: str | None = None
    health: dict[str, str] = field(default_factory=dict)


@dataclass
class FabricResult:
    kind: str
    warnings: list[str]
    gpus: list[GpuFabric]


def _value(text: str | None) -> str | None:
    if text is None:
        return None
    cleaned = text.strip()
    return None if cleaned.lower() in UNSET else cleaned


def _clique(text: str | None) -> int | None:
    value = _value(text)
    return int(value) if value is not None and value.isdigit() else None


def _set(gpu: GpuFabric, key: str, value: str) -> None:
    key = key.strip().lower()
    if key == "state":
        gpu.state = _value(value)
    elif key == "status":
        gpu.status = _value(value)
    elif key in ("cliqueid", "clique id", "clique_id"):
        gpu.clique_id = _clique(value)
    elif key in ("clusteruuid", "cluster uuid", "clusteruuid", "cluster_uuid"):
        gpu.cluster_uuid = _value(value)


@functools.lru_cache(maxsize=64)
def _end_of_lines_nested_under(level: int) -> re.Pattern[str]:
    """A line break followed by a line that does not start with ``level + 1`` spaces."""
    return re.compile(rf"\n(?! {{{level + 1}}})")


def _parse_text(text: str, warnings: list[str]) -> list[GpuFabric]:
    """Each GPU's Fabric fields (and Product Name), reading lines as they nest under their sections.

    Inside a GPU block, once a section other than Fabric is the outermost open one (ECC Errors, Clocks, ...),
    no line nested under it can set a field: the lines that start with more spaces than its indent are
    skipped in one regex search instead of being read one by one (same result, tests/collectors/
    test_smi_parse_equivalence.py).
    """
    text = newline_joined(text)  # the reader walks "\n"-ended lines: those splitlines() gives
    gpus: list[GpuFabric] = []
    gpu: GpuFabric | None = None
    section: list[tuple[int, str]] = []  # (indent, name) of the open sections, indents increasing
    start, size = 0, len(text)
    while start < size:
        end = text.find("\n", start)
        if end < 0:
            end = size
        raw = text[start:end]
        start = end + 1
        if not raw.strip():
            continue
        header = _GPU.match(raw.strip()) if not raw.startswith(" ") else None
        if header:
            gpu = GpuFabric(pci=find_pci(header.group("pci")))
            gpus.append(gpu)
            section = []
            continue
        if gpu is None:
            gpu = _headerless_fabric(raw)
            if gpu is None:
                continue
            gpus.append(gpu)
            section = []
        _read_line(gpu, raw, section)
        if section and section[0][1] != "fabric":
            nested_end = _end_of_lines_nested_under(section[0][0]).search(text, end)
            start = nested_end.start() + 1 if nested_end else size
    return gpus


def _headerless_fabric(raw: str) -> GpuFabric | None:
    """A Fabric block pasted without its GPU header starts a GPU of its own."""
    bare = _SECTION.match(raw) if ":" not in raw else None
    if bare is None or bare.group("key").strip().lower() != "fabric":
        return None
    return GpuFabric(pci=None)


def _read_line(gpu: GpuFabric, raw: str, section: list[tuple[int, str]]) -> None:
    """One line of a GPU block: opens or closes sections in ``section``, sets the field it names."""
    # A section line has no ":" (nor a key character or blank that could be one): the test spares _SECTION
    # on every "Key     : value" line.
    match = _PAIR.match(raw) or (_SECTION.match(raw) if ":" not in raw else None)
    if match is None:
        return
    indent = len(match.group("indent").expandtabs(4))
    while section and section[-1][0] >= indent:
        section.pop()
    key = match.group("key").strip()
    if match.re is _SECTION:
        section.append((indent, key.lower()))
        return
    value = match.group("value")
    if not section:
        if key.lower() == "product name":
            gpu.name = _value(value)
    elif section[0][1] == "fabric":
        if len(section) == 1:
            _set(gpu, key, value)
        elif len(section) == 2 and section[1][1] == "health":
            health_key = HEALTH_KEYS.get(key.lower())
            if health_key:
                gpu.health[health_key] = value.strip()


def _parse_xml(text: str) -> list[GpuFabric]:
    gpus = []
    for block in _XML_GPU.finditer(text):
        body = block.group("body")
        gpu = GpuFabric(pci=find_pci(block.group("pci")))
        name = _XML_NAME.search(body)
        gpu.name = _value(name.group("name")) if name else None
        fabric = _XML_BLOCK.search(body)
        if fabric:
            inner = fabric.group("body")
            health = _XML_HEALTH.search(inner)
            outer = _XML_HEALTH.sub("", inner)
            for tag in _XML_TAG.finditer(outer):
                _set(gpu, tag.group("tag"), tag.group("value"))
            for tag in _XML_TAG.finditer(health.group("body") if health else ""):
                health_key = HEALTH_KEYS.get(tag.group("tag").lower())
                if health_key:
                    gpu.health[health_key] = tag.group("value").strip()
        gpus.append(gpu)
    return gpus


@parsed_once  # shows_nothing parses, then the engine parses the same text
def parse(text: str) -> FabricResult:
    """nvidia-smi -q (text or XML) -> each GPU's fabric registration; never raises."""
    text = str(text)
    warnings: list[str] = []
    gpus = _parse_xml(text) if "<nvidia_smi_log" in text else _parse_text(text, warnings)
    if not gpus:
        warnings.append("no GPU block found")
    elif not any(g.state or g.status for g in gpus):
        if _FABRIC_SEEN.search(text):  # printed, every value N/A: the GPUs register with no NVLink fabric
            warnings.append("Fabric section reads N/A on every GPU (no NVLink fabric registration on this system)")
        else:
            warnings.append("no Fabric section in any GPU block (driver too old, or output trimmed)")
    return FabricResult(kind=KIND, warnings=warnings, gpus=gpus)


def _is_nvl(gpu: GpuFabric) -> bool:
    return bool(gpu.name and NVL_PRODUCTS.search(gpu.name)) or (
        gpu.cluster_uuid is not None and gpu.cluster_uuid != ZERO_UUID
    )


def _health_problems(gpu: GpuFabric) -> list[str]:
    """Health fields that report trouble (anything but Full/False/Healthy/N/A)."""
    fine = {"full", "false", "healthy", "no", "n/a", "not supported", ""}
    return [f"{key} {value}" for key, value in gpu.health.items() if value.strip().lower() not in fine]


def facts(result: FabricResult) -> dict[str, Any]:
    """Contract JSON plus the GPUs whose fabric registration is degraded, and why."""
    data: dict[str, Any] = to_jsonable(result)
    with_fabric = [g for g in result.gpus if g.state is not None or g.status is not None]
    degraded = []
    for index, gpu in enumerate(result.gpus):
        if gpu not in with_fabric:
            continue
        reasons = []
        if gpu.status is not None and gpu.status.lower() != "success":
            reasons.append(f"Status {gpu.status}")
        if gpu.state is not None and gpu.state.lower() != "completed":
            reasons.append(f"State {gpu.state}")
        if _is_nvl(gpu) and gpu.state and gpu.state.lower() == "completed" and gpu.clique_id == 0:
            reasons.append("CliqueId 0 on an NVL system")
        reasons += [f"Health {problem}" for problem in _health_problems(gpu)]
        if reasons:
            # a block pasted without its "GPU 0000:..." header is named by its position
            degraded.append({"gpu": gpu.pci or f"GPU block {index + 1}", "name": gpu.name, "reasons": reasons})
    data["gpus_with_fabric"] = [g.pci for g in with_fabric]
    data["nvl_system"] = any(_is_nvl(g) for g in result.gpus)
    data["degraded_gpus"] = [entry["gpu"] for entry in degraded]
    data["degraded"] = degraded
    data["in_progress_gpus"] = [g.pci for g in with_fabric if (g.state or "").lower() in ("in progress", "not started")]
    data["cliques"] = sorted({g.clique_id for g in with_fabric if g.clique_id is not None})
    data["cluster_uuids"] = sorted({g.cluster_uuid for g in with_fabric if g.cluster_uuid})
    data["gpu_count"] = len(result.gpus)
    return data


def shows_nothing(text: str) -> bool:
    """No GPU block, or no GPU with a Fabric section: nothing to judge the fabric by."""
    return not facts(parse(text))["gpus_with_fabric"]


COLLECTOR = Collector(
    **registered(KIND),
    commands=(("nvidia-smi", "-q"),),
    parse=parse,
    facts=facts,
    shows_nothing=shows_nothing,
    cursor=CheapFirst(parse, facts, FABRIC),  # the Fabric fields' --query-gpu CSV first (nvidia_smi/cheap_fabric.py)
)
