"""NVLink state and error counters, per GPU and per link.

Reads, auto-detected line by line (so concatenated outputs of several commands parse in one go):

- ``nvidia-smi nvlink -s`` / ``--status``: ``Link N: 26.562 GB/s`` or ``Link N: <inactive>``;
- ``nvidia-smi nvlink -e``: ``Link N: Replay Errors: 0`` (space or tab + space indents, GB300);
- ``nvidia-smi nvlink -info`` (GB200): ``NVLE: disabled`` and a ``Firmware Version:`` block;
- ``dcgmi nvlink --link-status``: one ``U D X _`` row per ``gpuId N:`` (and per NVSwitch);
- ``dcgmi nvlink -e -g N``: the ``| Link N |`` / ``| -> Replay Error | 0 |`` tree.

The collector runs ``nvlink -s`` (the engine keeps the first alternative that exits 0), which is
what decides links up/down; ``nvidia-smi nvlink -e`` is the ``nvlink-errors`` companion collector.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass, field
from typing import Any

from nightowl import knowledge
from nightowl.collectors.base import Collector, registered, to_jsonable
from nightowl.collectors.pci import find_pci

KIND = "nvlink"
ERRORS_KIND = "nvlink-errors"

# nvidia-smi ``nvlink -e`` / dcgmi ``nvlink -e`` counter names -> result keys, each with its source:
# nightowl/knowledge/nvlink_counter_names.csv. nvidia-smi prints a single "CRC Errors" count without saying
# flit or data: it stays ``crc``.
COUNTER_NAMES_FILE = "nvlink_counter_names.csv"


@functools.cache
def counter_names() -> dict[str, str]:
    """Lower-case counter name -> result key (read once)."""
    rows = knowledge.read_csv(COUNTER_NAMES_FILE, required=("name", "counter", "confidence", "source"))
    return {row["name"].lower(): row["counter"] for row in rows}


# Always present in ``errors`` (null when the input does not show them).
BASE_COUNTERS = ("replay", "recovery", "crc_flit", "crc_data")
# Counters whose non-zero value is an error event (BER ratios and packet counts are not).
ERROR_COUNTERS = frozenset({"replay", "recovery", "crc", "crc_flit", "crc_data", "ecc_data"})

# dcgmi nvlink --link-status key line: "Up=U, Down=D, Disabled=X, Not Supported=_" (dcgmi/Nvlink.cpp).
# A disabled link carries no traffic, so it counts as down; "_" slots are not links at all.
DCGM_LINK_STATES: dict[str, tuple[str, str]] = {
    "U": ("up", "Up"),
    "D": ("down", "Down"),
    "X": ("down", "Disabled"),
}

_GPU_HEADER = re.compile(r"^GPU (?P<index>\d+):\s*(?P<rest>.*)$")
_UUID = re.compile(r"\(UUID:\s*(?P<uuid>[^)]*)\)")
_LINK = re.compile(r"^Link (?P<link>\d+):\s*(?P<rest>.*)$")
_SPEED = re.compile(r"^(?P<speed>\d+(?:\.\d+)?)\s*GB/s\b", re.IGNORECASE)
_COUNTER = re.compile(r"^(?P<name>[A-Za-z][A-Za-z0-9 _/()-]*?)\s*:\s*(?P<value>.*)$")
_DOWN_WORDS = re.compile(r"^<?\s*(inactive|down|disabled)\s*>?$", re.IGNORECASE)
_UNKNOWN_WORDS = re.compile(r"^(n/a|not supported|unknown|\[?unknown error\]?)$", re.IGNORECASE)
_DCGM_GPU = re.compile(r"^gpuId (?P<index>\d+):$")
_DCGM_SWITCH = re.compile(r"^physicalId (?P<index>\d+):$")
_DCGM_STATE_ROW = re.compile(r"^[UDX_](?: [UDX_])*$")
_ALL_INACTIVE = re.compile(r"all links are inactive", re.IGNORECASE)
_KEY_VALUE = re.compile(r"^(?P<key>[A-Za-z][A-Za-z0-9 _-]*):\s*(?P<value>.*)$")
# Lines that carry no data: command echoes, box borders, dcgmi headings, elisions by the poster.
_NOISE = re.compile(
    r"^(?:[$#>]\s.*|.*\b(?:nvidia-smi|dcgmi)\s+nvlink\b.*|\+[-=+]*\+?|GPUs:|NvSwitches:"
    r"|No (?:NvSwitches|GPUs) found\.|Key: Up=U.*"
    r"|\|\s*NvLink Link Status\s*\||\|\s*NVLINK Error Counts\s*\|)$",
    re.IGNORECASE,
)
_ELISION = re.compile(r"^(?:\[\.\.\.\]|\.\.\.|…)$")


@dataclass
class Link:
    link: int
    state: str = "unknown"  # up | down | unknown
    speed_gbps: float | None = None
    errors: dict[str, Any] = field(default_factory=lambda: dict.fromkeys(BASE_COUNTERS))
    raw_state: str | None = None


@dataclass
class Gpu:
    index: int
    name: str | None = None
    pci: str | None = None
    uuid: str | None = None
    links: list[Link] = field(default_factory=list)
    nvle: str | None = None
    firmware: dict[str, str] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    partial: bool = False  # the poster elided lines inside this GPU's block: link counts are a floor

    def link(self, number: int) -> Link:
        # Outputs list a GPU's links in order: a link past the last one is new, and its place is the end.
        if not self.links or self.links[-1].link < number:
            created = Link(link=number)
            self.links.append(created)
            return created
        for existing in self.links:
            if existing.link == number:
                return existing
        created = Link(link=number)
        self.links.append(created)
        self.links.sort(key=lambda item: item.link)
        return created


@dataclass
class NvSwitch:
    physical_id: int
    links: list[Link] = field(default_factory=list)


@dataclass
class NvlinkResult:
    kind: str
    warnings: list[str]
    gpus: list[Gpu]
    nvswitches: list[NvSwitch] = field(default_factory=list)


@dataclass
class _State:
    """Where the line-by-line reader is: which GPU / switch / link a following line belongs to."""

    gpus: dict[int, Gpu] = field(default_factory=dict)
    switches: list[NvSwitch] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    gpu: Gpu | None = None
    link: Link | None = None
    dcgm_target: Gpu | NvSwitch | None = None
    in_firmware: bool = False
    elided: bool = False

    def gpu_at(self, index: int) -> Gpu:
        if index not in self.gpus:
            self.gpus[index] = Gpu(index=index)
        return self.gpus[index]


def _number(text: str) -> int | float | str | None:
    value = text.strip()
    if re.fullmatch(r"\d+", value):
        return int(value)
    if re.fullmatch(r"\d+\.\d*(?:[eE][-+]?\d+)?|\d+[eE][-+]?\d+", value):
        return float(value)
    if not value or _UNKNOWN_WORDS.match(value):
        return None
    return value


def _counter_key(name: str) -> str:
    lowered = " ".join(name.lower().split())
    return counter_names().get(lowered, re.sub(r"[^a-z0-9]+", "_", lowered).strip("_"))


def _read_link_value(link: Link, rest: str) -> bool:
    """Fill a link from the text after ``Link N:``; False when the text is not understood."""
    rest = rest.strip()
    speed = _SPEED.match(rest)
    if speed:
        link.state, link.speed_gbps, link.raw_state = "up", float(speed.group("speed")), rest
        return True
    if _DOWN_WORDS.match(rest):
        link.state, link.raw_state = "down", rest
        return True
    if _UNKNOWN_WORDS.match(rest):
        link.raw_state = rest
        return True
    counter = _COUNTER.match(rest)
    if counter:
        link.errors[_counter_key(counter.group("name"))] = _number(counter.group("value"))
        return True
    return False


def _read_gpu_header(state: _State, match: re.Match[str]) -> None:
    gpu = state.gpu_at(int(match.group("index")))
    rest = match.group("rest")
    uuid = _UUID.search(rest)
    if uuid:
        gpu.uuid = uuid.group("uuid").strip() or gpu.uuid
        rest = rest[: uuid.start()]
    gpu.pci = gpu.pci or find_pci(rest)
    name = rest.strip()
    if name:
        gpu.name = name
    state.gpu, state.link, state.dcgm_target, state.in_firmware = gpu, None, None, False


def _read_dcgm_row(state: _State, line: str) -> None:
    target = state.dcgm_target
    for position, token in enumerate(line.split()):
        if token not in DCGM_LINK_STATES:
            continue
        status, raw = DCGM_LINK_STATES[token]
        link = target.link(position) if isinstance(target, Gpu) else Link(link=position)
        link.state, link.raw_state = status, raw
        if isinstance(target, NvSwitch):
            target.links.append(link)
    state.dcgm_target = None


def _read_tree_row(state: _State, line: str) -> bool:
    """dcgmi ``nvlink -e`` tree rows: ``| GPU 0 |``, ``| Link 3 |``, ``| -> Replay Error | 0 |``."""
    cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
    first = cells[0]
    gpu_cell = re.fullmatch(r"GPU (\d+)", first)
    if gpu_cell:
        state.gpu, state.link = state.gpu_at(int(gpu_cell.group(1))), None
        return True
    link_cell = re.fullmatch(r"Link (\d+)", first)
    if link_cell and state.gpu is not None:
        state.link = state.gpu.link(int(link_cell.group(1)))
        return True
    counter_cell = re.fullmatch(r"->\s*(.+)", first)
    if counter_cell and state.link is not None and len(cells) > 1:
        state.link.errors[_counter_key(counter_cell.group(1))] = _number(cells[1])
        return True
    return False


def _read_gpu_detail(state: _State, gpu: Gpu, line: str) -> bool:
    """Lines under a GPU header that are not links: -info fields, NVML messages."""
    if _ALL_INACTIVE.search(line):
        gpu.notes.append(line)
        return True
    pair = _KEY_VALUE.match(line)
    if not pair:
        return False
    key, value = pair.group("key").strip(), pair.group("value").strip()
    if key.lower() == "firmware version" and not value:
        state.in_firmware = True
    elif state.in_firmware:
        gpu.firmware[key] = value
    elif key.upper() == "NVLE":
        gpu.nvle = value
    else:
        gpu.notes.append(line)
    return True


def _may_echo_command(line: str) -> bool:
    """False when ``line`` cannot be _NOISE's command echo: that names nvidia-smi (a "-") or dcgmi (a "dcg", in
    any case: IGNORECASE folds no other character to d, c or g)."""
    return "-" in line or "dcg" in line.lower()


def _read_line(state: _State, raw: str) -> None:
    line = raw.strip()
    if not line:
        return
    if line.startswith("Link "):  # most lines: none of the patterns up to the link reader's can match them ...
        if not _may_echo_command(line) or not _NOISE.match(line):  # ... but the command echo of _NOISE
            _read_link_or_detail(state, line)
        return
    if _NOISE.match(line):
        return
    if _ELISION.match(line):
        state.elided = True
        if state.gpu is not None:
            state.gpu.partial = True
        return
    header = _GPU_HEADER.match(line)
    if header:
        _read_gpu_header(state, header)
        return
    dcgm_gpu, dcgm_switch = _DCGM_GPU.match(line), _DCGM_SWITCH.match(line)
    if dcgm_gpu:
        state.dcgm_target, state.gpu = state.gpu_at(int(dcgm_gpu.group("index"))), None
        return
    if dcgm_switch:
        switch = NvSwitch(physical_id=int(dcgm_switch.group("index")))
        state.switches.append(switch)
        state.dcgm_target, state.gpu = switch, None
        return
    if state.dcgm_target is not None and _DCGM_STATE_ROW.match(line):
        _read_dcgm_row(state, line)
        return
    if line.startswith("|") and _read_tree_row(state, line):
        return
    _read_link_or_detail(state, line)


def _read_link_or_detail(state: _State, line: str) -> None:
    """A ``Link N: ...`` line or a detail line of the current GPU; anything else is a warning."""
    link_match = _LINK.match(line)
    if link_match and state.gpu is not None:
        link = state.gpu.link(int(link_match.group("link")))
        if _read_link_value(link, link_match.group("rest")):
            return
    elif state.gpu is not None and _read_gpu_detail(state, state.gpu, line):
        return
    state.warnings.append(f"unrecognised line: {line[:200]}")


def parse(text: str) -> NvlinkResult:
    """Parse NVLink status / error / info output (nvidia-smi or dcgmi); never raises."""
    state = _State()
    for raw in str(text).splitlines():
        _read_line(state, raw)
    return _result(state)


def _result(state: _State) -> NvlinkResult:
    """What the lines read into ``state`` make: the GPUs in index order, and warnings for what is missing."""
    if state.elided:
        state.warnings.append("input has elided lines ([...] or ...): links or GPUs may be missing")
    gpus = [state.gpus[index] for index in sorted(state.gpus)]
    if not gpus and not state.switches:
        state.warnings.append("no NVLink GPU blocks found")
    return NvlinkResult(kind=KIND, warnings=state.warnings, gpus=gpus, nvswitches=state.switches)


def _is_error_counter(key: str) -> bool:
    return key in ERROR_COUNTERS or key.endswith("_errors") or key.endswith("_error")


def _gpu_has_link_errors(gpu: Gpu) -> bool:
    return any(
        _is_error_counter(key) and isinstance(value, (int, float)) and value > 0
        for link in gpu.links
        for key, value in link.errors.items()
    )


def _links_up(gpu: Gpu) -> int | None:
    """Links up on a GPU, or None when its output says nothing (or not everything) about link state."""
    if gpu.partial:
        return None
    if any(link.state != "unknown" for link in gpu.links):
        return sum(1 for link in gpu.links if link.state == "up")
    if any(_ALL_INACTIVE.search(note) for note in gpu.notes):
        return 0
    return None


def facts(result: NvlinkResult) -> dict[str, Any]:
    """Contract JSON plus: links_down, links_up_per_gpu, gpus_with_link_errors, min_speed_gbps."""
    data = to_jsonable(result)
    up_per_gpu = {str(gpu.index): _links_up(gpu) for gpu in result.gpus}
    speeds = [link.speed_gbps for gpu in result.gpus for link in gpu.links if link.speed_gbps is not None]
    data["links_down"] = [
        {"gpu": gpu.index, "link": link.link} for gpu in result.gpus for link in gpu.links if link.state == "down"
    ]
    data["links_up_per_gpu"] = {index: up for index, up in up_per_gpu.items() if up is not None}
    data["gpus_with_link_errors"] = [gpu.index for gpu in result.gpus if _gpu_has_link_errors(gpu)]
    data["min_speed_gbps"] = min(speeds) if speeds else None
    data["gpu_count"] = len(result.gpus)
    data["partial_gpus"] = [gpu.index for gpu in result.gpus if gpu.partial]
    data["sku_judgement"] = _sku_judgement(result, data["links_up_per_gpu"])
    return data


def _sku_judgement(result: NvlinkResult, links_up_per_gpu: dict[str, int]) -> dict[str, Any]:
    """Links up per GPU against the SKU's expectation (an H100 PCIe is not judged as an SXM)."""
    from nightowl.collectors.gpu.sku_profiles import judge

    names = [gpu.name for gpu in result.gpus if gpu.name]
    if not names or not links_up_per_gpu:
        return {"status": "cannot-judge", "sku": None, "reasons": ["no GPU name or no complete link list"]}
    return judge(names[0], links_up_per_gpu=links_up_per_gpu)


COLLECTOR = Collector(**registered(KIND), commands=(("nvidia-smi", "nvlink", "-s"),), parse=parse, facts=facts)


def parse_errors(text: str) -> NvlinkResult:
    """The same parser for the ``nvlink-errors`` companion collector (its own kind and file name)."""
    result = parse(text)
    result.kind = ERRORS_KIND
    return result


# Error counters come from a second command (the engine runs only the first alternative that exits 0).
# Not registered in collectors/__init__.py yet: it needs an "nvlink-errors" entry there.
ERRORS_COLLECTOR = Collector(
    **registered(ERRORS_KIND),
    commands=(("nvidia-smi", "nvlink", "-e"),),
    parse=parse_errors,
    facts=facts,
)
