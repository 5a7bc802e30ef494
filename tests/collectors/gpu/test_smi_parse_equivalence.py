"""Issue 22's cheaper nvidia-smi / fabric / NVLink reading changes no result: each new path gives what the code
before it gave (copied here as the reference) on every nvidia-smi, fabric and NVLink output under fixtures/
(recorded real outputs) and on mutated variants of them: lines truncated, indentation changed, CRLF and other
line breaks, values removed, garbage lines and lines shuffled in."""

from __future__ import annotations

import random
import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pytest

from nightowl.collectors.gpu import fabric, nvlink
from nightowl.collectors.gpu.nvidia_smi import nvidia_smi, results, tree
from nightowl.collectors.pci import find_pci

ROOT = Path(__file__).resolve().parents[3]
FIXTURES = ROOT / "fixtures"
_NAMES = re.compile(r"nvsmi|nvidia-smi|nvlink|fabric", re.IGNORECASE)
OUTPUTS = sorted(
    p
    for p in FIXTURES.rglob("*")
    if p.is_file() and _NAMES.search(p.name) and p.suffix in (".out", ".txt", ".xml") and p.stat().st_size < 2_000_000
)


def read(path: Path) -> str:
    return path.read_text(errors="replace")


def _id(path: Path) -> str:
    return str(path.relative_to(FIXTURES))


# --- mutated variants --------------------------------------------------------------------------------

_GARBAGE = [
    "",
    "   ",
    "\t",
    "GPU 00000000:18:00.0",
    "  GPU 00000000:19:00.0",
    "\tGPU 00000000:1A:00.0",
    "Fabric",
    "    Fabric",
    "\tFabric",
    "        Health",
    "        State                             : In Progress",
    "        Status : Insufficient Resources",
    "            Bandwidth                     : Degraded",
    "    Product Name                          : NVIDIA GB200",
    "Link 3: <inactive>",
    "Link 4: 26.562 GB/s",
    "GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-1234)",
    "\x00\xff\u2028",
    "=====NVSMI LOG=====",
    ":",
    " : ",
    "$ nvidia-smi -q",
    "Unknown Error",
    "[...]",
]


def _mutate_line(rng: random.Random, line: str) -> list[str]:
    choice = rng.randrange(9)
    if choice == 0 and line:
        return [line[: rng.randrange(len(line))]]  # truncated
    if choice == 1:
        return [line.lstrip()]  # indentation lost
    if choice == 2:
        return [" " * rng.randrange(1, 9) + line]  # indented deeper
    if choice == 3:
        return [line.replace("    ", "\t", rng.randrange(1, 4))]  # tabs for spaces
    if choice == 4 and ":" in line:
        return [line[: line.index(":") + 1]]  # value missing
    if choice == 5:
        return [line, rng.choice(_GARBAGE)]  # garbage after it
    if choice == 6:
        return []  # line dropped
    if choice == 7:
        return [line.replace(" ", "", 1)]  # one blank less
    return [line, line]  # repeated


def variants(text: str, seed: int, count: int) -> list[str]:
    """``count`` mutations of ``text``, plus its CRLF and odd line-break forms."""
    rng = random.Random(seed)
    lines = text.splitlines()
    found = [text.replace("\n", "\r\n"), text.replace("\n", "\r"), text.replace("\n", "\u2028"), text + "\n\n"]
    for _ in range(count):
        mutated = list(lines)
        for _ in range(rng.randint(1, 12)):
            if not mutated:
                break
            at = rng.randrange(len(mutated))
            mutated[at : at + 1] = _mutate_line(rng, mutated[at])
        found.append(rng.choice(["\n", "\r\n", "\n"]).join(mutated))
    return found


def _pieces(rng: random.Random, words: list[str]) -> str:
    return "".join(rng.choice(words) for _ in range(rng.randint(0, 60)))


def _random_texts(seed: int, words: list[str], count: int) -> list[str]:
    """``count`` texts of up to 60 of ``words`` each, the same for the same seed."""
    rng = random.Random(seed)
    return [_pieces(rng, words) for _ in range(count)]


# --- fabric ------------------------------------------------------------------------------------------


# fabric's line patterns before their greedy forms (do not edit)
# nvidia-smi's "Key   : value" line as the text tree read it with a pattern (tree.split_key_value now).
REFERENCE_KEY_VALUE = re.compile(r"^(?P<key>[^:]*?\S)\s+:(?:\s+(?P<value>.*))?$")
REFERENCE_PAIR = re.compile(r"^(?P<indent>\s*)(?P<key>[A-Za-z][A-Za-z0-9 ()/_-]*?)\s*:\s*(?P<value>.*?)\s*$")
REFERENCE_SECTION = re.compile(r"^(?P<indent>\s*)(?P<key>[A-Za-z][A-Za-z0-9 ()/_-]*?)\s*$")


def reference_fabric_text(text: str, warnings: list[str]) -> list[fabric.GpuFabric]:
    """fabric._parse_text before the nested-section skip (do not edit)."""
    gpus: list[fabric.GpuFabric] = []
    gpu: fabric.GpuFabric | None = None
    section: list[tuple[int, str]] = []
    for raw in text.splitlines():
        if not raw.strip():
            continue
        header = fabric._GPU.match(raw.strip())
        if header and not raw.startswith(" "):
            gpu = fabric.GpuFabric(pci=find_pci(header.group("pci")))
            gpus.append(gpu)
            section = []
            continue
        pair, bare = REFERENCE_PAIR.match(raw), (REFERENCE_SECTION.match(raw) if ":" not in raw else None)
        if gpu is None:
            if bare is None or bare.group("key").strip().lower() != "fabric":
                continue
            gpu = fabric.GpuFabric(pci=None)
            gpus.append(gpu)
            section = []
        match = pair or bare
        if match is None:
            continue
        indent = len(match.group("indent").expandtabs(4))
        section = [(level, name) for level, name in section if level < indent]
        key = match.group("key").strip()
        if pair is None:
            section.append((indent, key.lower()))
            continue
        names = [name for _, name in section]
        if not names and key.lower() == "product name":
            gpu.name = fabric._value(pair.group("value"))
        elif names == ["fabric"]:
            fabric._set(gpu, key, pair.group("value"))
        elif names == ["fabric", "health"]:
            health_key = fabric.HEALTH_KEYS.get(key.lower())
            if health_key:
                gpu.health[health_key] = pair.group("value").strip()
    return gpus


def test_there_are_outputs_to_compare_on() -> None:
    names = [p.name for p in OUTPUTS]
    assert len(OUTPUTS) > 100
    assert any("fabric" in n for n in names) and any("nvlink" in n for n in names)


@pytest.mark.parametrize("path", OUTPUTS, ids=_id)
def test_fabric_text_reads_every_output_and_its_variants_as_before(path: Path) -> None:
    text = read(path)
    for candidate in [text, *variants(text, seed=len(text), count=12)]:
        assert fabric._parse_text(candidate, []) == reference_fabric_text(candidate, []), candidate[:300]


@pytest.mark.parametrize("path", OUTPUTS, ids=_id)
def test_fabric_line_patterns_match_as_before_on_every_line(path: Path) -> None:
    for line in [line for candidate in variants(read(path), seed=3, count=6) for line in candidate.splitlines()]:
        for new, old in ((fabric._PAIR, REFERENCE_PAIR), (fabric._SECTION, REFERENCE_SECTION)):
            found, expected = new.match(line), old.match(line)
            assert (found and found.groupdict()) == (expected and expected.groupdict()), repr(line)


_FABRIC_WORDS = [
    "\n",
    "\n",
    "\r\n",
    "\x0c",
    " ",
    "    ",
    "        ",
    "\t",
    "GPU 00000000:18:00.0",
    "Product Name",
    "Fabric",
    "Health",
    "ECC Errors",
    "State",
    "Status",
    "CliqueId",
    "Bandwidth",
    " : ",
    ":",
    "Completed",
    "N/A",
    "x",
    "\xa0",
    "\x1f",
    "(1)",
    "-",
]


@pytest.mark.parametrize("seed", range(40))
def test_fabric_text_reads_random_blocks_as_before(seed: int) -> None:
    for text in _random_texts(seed, _FABRIC_WORDS, 100):
        for candidate in (text, "GPU 00000000:18:00.0\n" + text):
            assert fabric._parse_text(candidate, []) == reference_fabric_text(candidate, []), repr(candidate)


# --- nvlink ------------------------------------------------------------------------------------------


def reference_link(gpu: nvlink.Gpu, number: int) -> nvlink.Link:
    """nvlink.Gpu.link before its in-order shortcut (do not edit)."""
    for existing in gpu.links:
        if existing.link == number:
            return existing
    created = nvlink.Link(link=number)
    gpu.links.append(created)
    gpu.links.sort(key=lambda item: item.link)
    return created


def reference_nvlink_read_line(state: nvlink._State, raw: str) -> None:
    """nvlink._read_line before the Link-line shortcut (do not edit)."""
    line = raw.strip()
    if not line or nvlink._NOISE.match(line):
        return
    if nvlink._ELISION.match(line):
        state.elided = True
        if state.gpu is not None:
            state.gpu.partial = True
        return
    header = nvlink._GPU_HEADER.match(line)
    if header:
        nvlink._read_gpu_header(state, header)
        return
    dcgm_gpu, dcgm_switch = nvlink._DCGM_GPU.match(line), nvlink._DCGM_SWITCH.match(line)
    if dcgm_gpu:
        state.dcgm_target, state.gpu = state.gpu_at(int(dcgm_gpu.group("index"))), None
        return
    if dcgm_switch:
        switch = nvlink.NvSwitch(physical_id=int(dcgm_switch.group("index")))
        state.switches.append(switch)
        state.dcgm_target, state.gpu = switch, None
        return
    if state.dcgm_target is not None and nvlink._DCGM_STATE_ROW.match(line):
        nvlink._read_dcgm_row(state, line)
        return
    if line.startswith("|") and nvlink._read_tree_row(state, line):
        return
    link_match = nvlink._LINK.match(line)
    if link_match and state.gpu is not None:
        link = state.gpu.link(int(link_match.group("link")))
        if nvlink._read_link_value(link, link_match.group("rest")):
            return
    elif state.gpu is not None and nvlink._read_gpu_detail(state, state.gpu, line):
        return
    state.warnings.append(f"unrecognised line: {line[:200]}")


def reference_nvlink_parse(text: str, monkeypatch: pytest.MonkeyPatch) -> nvlink.NvlinkResult:
    """nvlink.parse as it was: the old line reader and the old Gpu.link."""
    with monkeypatch.context() as patched:
        patched.setattr(nvlink.Gpu, "link", reference_link)
        state = nvlink._State()
        for raw in str(text).splitlines():
            reference_nvlink_read_line(state, raw)
    return nvlink._result(state)  # the lines' reading is what changed, not what it makes of them


@pytest.mark.parametrize("path", OUTPUTS, ids=_id)
def test_nvlink_reads_every_output_and_its_variants_as_before(path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    text = read(path)
    for candidate in [text, *variants(text, seed=len(text) + 1, count=12)]:
        assert nvlink.parse(candidate) == reference_nvlink_parse(candidate, monkeypatch), candidate[:300]


_NVLINK_WORDS = [
    "\n",
    "\n",
    "Link ",
    "Link 3: ",
    "Link 17",
    "LINK ",
    "GPU 0: NVIDIA H100 (UUID: GPU-1)",
    "GPU 1: ",
    "26.562 GB/s",
    "<inactive>",
    "Replay Errors: 7",
    "nvidia-smi nvlink -s",
    "NVIDIA-SMI NVLINK",
    "DCGMI nvlink",
    "dcgmi",
    "-",
    " ",
    "\t",
    ":",
    "[...]",
    "| Link 2 |",
    "| -> Replay Error | 4 |",
    "gpuId 0:",
    "U D X _",
    "N/A",
    "\u212a",
    "x",
]


@pytest.mark.parametrize("seed", range(40))
def test_nvlink_reads_random_texts_as_before(seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    for text in _random_texts(seed, _NVLINK_WORDS, 100):
        assert nvlink.parse(text) == reference_nvlink_parse(text, monkeypatch), repr(text)


@pytest.mark.parametrize("seed", range(20))
def test_gpu_link_keeps_links_as_before(seed: int) -> None:
    rng = random.Random(seed)
    numbers = [rng.choice([rng.randrange(20), len(range(seed))]) for _ in range(rng.randrange(40))]
    new, old = nvlink.Gpu(index=0), nvlink.Gpu(index=0)
    for number in numbers:
        assert nvlink.Gpu.link(new, number) == reference_link(old, number)
        assert [link.link for link in new.links] == [link.link for link in old.links]


# --- nvidia-smi -q text ------------------------------------------------------------------------------


def reference_text_node(body: str) -> tree.Node:
    """tree._text_node before split_key_value (do not edit)."""
    header = tree._GPU_HEADER.match(body) if body.startswith("GPU") else None
    if header:
        return tree.Node(tree.GPU_KEY, body, header.group("pci"))
    key_value = REFERENCE_KEY_VALUE.match(body)
    if key_value:
        key, value = key_value.group("key", "value")
        return tree.Node(tree.canon(key), key, value or "")
    return tree.Node(tree.canon(body), body, None)


def reference_build_text_tree(lines: Iterable[str], check_failures: bool = True) -> tuple[tree.Node, list[str]]:
    """tree.build_text_tree before its tab test (do not edit)."""
    root = tree.Node("", "", None)
    stack: list[tuple[int, tree.Node]] = [(-1, root)]
    headers: list[tree.Node] = []
    for raw in lines:
        line = raw.expandtabs(8).rstrip()
        body = line.lstrip()
        if not body or tree._skipped(body, check_failures):
            continue
        indent = len(line) - len(body)
        while stack[-1][0] >= indent:
            stack.pop()
        node = reference_text_node(body)
        if node.value is None:
            headers.append(node)
        stack[-1][1].children.append(node)
        stack.append((indent, node))
    return root, [node.label for node in headers if not node.children]


def reference_field_errors(gpu: tree.Node, pci: str | None) -> list[results.GpuError]:
    """nvidia_smi._field_errors before it read the repair flags too (do not edit)."""
    errors = []
    Entry = tuple[tree.Node, Any]
    pending: list[Entry] = [(child, None) for child in reversed(gpu.children)]
    while pending:
        entry = pending.pop()
        node = entry[0]
        if node.value is not None and tree.is_error_value(node.value):
            name = nvidia_smi._label_path(entry)
            errors.append(results.GpuError(pci=pci, message=f"{name}: {node.value.strip()}", field=name))
        if node.children:
            pending.extend((child, entry) for child in reversed(node.children))
    return errors


def reference_repair_status(gpu: tree.Node) -> dict[str, bool | None]:
    """nvidia_smi._repair_status (do not edit)."""
    found: dict[str, bool | None] = dict.fromkeys(nvidia_smi.REPAIR_KEYS.values())
    for node in tree.walk(gpu):
        name = nvidia_smi.REPAIR_KEYS.get(node.key)
        if name is not None and node.value is not None:
            found[name] = tree.to_bool(node.value)
    return found


def _outcome(text: str) -> object:
    try:
        return nvidia_smi._parse(text)
    except Exception as exc:  # noqa: BLE001 - parse turns it into a warning: the same one either way
        return (type(exc), str(exc))


def reference_smi_parse(text: str, monkeypatch: pytest.MonkeyPatch) -> object:
    """nvidia_smi._parse with the old tree reader and the old per-GPU value passes."""
    with monkeypatch.context() as patched:
        patched.setattr(nvidia_smi, "build_text_tree", reference_build_text_tree)
        patched.setattr(
            nvidia_smi,
            "_scan_values",
            lambda gpu, pci: (reference_field_errors(gpu, pci), reference_repair_status(gpu)),
        )
        return _outcome(text)


def _smi_variants(text: str, seed: int) -> list[str]:
    found = [text, *variants(text, seed=seed, count=10)]
    return found + [candidate.replace("\t", "") for candidate in found[-3:]]  # some without tabs: the fast path


@pytest.mark.parametrize("path", OUTPUTS, ids=_id)
def test_nvidia_smi_reads_every_output_and_its_variants_as_before(path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for candidate in _smi_variants(read(path), seed=len(path.name)):
        assert _outcome(candidate) == reference_smi_parse(candidate, monkeypatch), candidate[:300]


@pytest.mark.parametrize("path", OUTPUTS, ids=_id)
def test_split_key_value_is_the_pattern_on_every_line(path: Path) -> None:
    lines = [line for candidate in _smi_variants(read(path), seed=7) for line in candidate.splitlines()]
    for line in lines:
        body = line.expandtabs(8).strip()
        if body:
            expected = REFERENCE_KEY_VALUE.match(body)
            found = tree.split_key_value(body)
            assert found == (expected and (expected["key"], expected["value"] or "")), repr(body)


_KEY_WORDS = ["a", "Bus Id", " ", "  ", "\t", "\xa0", "\x1f", "\u3000", ":", " : ", ": :", "::", "x:y", "[N/A]", "é"]


@pytest.mark.parametrize("seed", range(30))
def test_split_key_value_is_the_pattern_on_random_bodies(seed: int) -> None:
    rng = random.Random(seed)
    for _ in range(400):
        body = "".join(rng.choice(_KEY_WORDS) for _ in range(rng.randint(1, 10))).strip()
        if body:
            expected = REFERENCE_KEY_VALUE.match(body)
            found = tree.split_key_value(body)
            assert found == (expected and (expected["key"], expected["value"] or "")), repr(body)


_SMI_WORDS = [
    "\n",
    "\n",
    "\n",
    "    ",
    "        ",
    "\t",
    "GPU 00000000:18:00.0",
    "Product Name",
    "Channel Repair Pending",
    "TPC Repair Pending",
    "ECC Errors",
    "Volatile",
    "DRAM Uncorrectable",
    " : ",
    ":",
    "Yes",
    "No",
    "N/A",
    "Unknown Error",
    "Attached GPUs",
    "Driver Version",
    "5",
    "$ ",
    "=== NVSMI LOG ===",
    "x",
]


@pytest.mark.parametrize("seed", range(30))
def test_nvidia_smi_reads_random_texts_as_before(seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    for text in _random_texts(seed, _SMI_WORDS, 60):
        assert _outcome(text) == reference_smi_parse(text, monkeypatch), repr(text)
