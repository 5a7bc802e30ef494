"""The nvidia-smi parser's shortcuts (prefilters, caches, the C XML parser) give exactly what the plain way gives.

Each shortcut is compared with a frozen copy of the code it replaced, on every line or document of every
fixture plus hand-made cases, so a shortcut that drops or narrows a rule fails here.
"""

from __future__ import annotations

import re
from functools import cache
from typing import Any

import pytest

from nightowl.collectors.gpu.nvidia_smi import tree
from nightowl.collectors.gpu.nvidia_smi.table import _TABLE_HEADER, _TABLE_ROW_NAME, looks_like_table
from nightowl.collectors.gpu.nvidia_smi.tree import (
    _BANNER,
    _GPU_HEADER,
    GPU_KEY,
    SHELL_PROMPT,
    TOOL_FAILURE_HINTS,
    TOOL_FAILURES,
    Node,
    build_text_tree,
    build_xml_tree,
    build_xml_tree_leniently,
    canon,
    clean,
    is_error_value,
    may_hold_tool_failure,
    tool_failure,
    walk,
)
from tests.collectors.gpu.test_nvidia_smi import TEXT_ACTIVE_SLOWDOWN, VOLTA_XML, XML_V12
from tests.collectors.gpu.test_smi_parse_equivalence import REFERENCE_KEY_VALUE
from tests.helpers import ROOT

# A deliberate copy of TOOL_FAILURES as it was before the prefilter: the reference the fast path must match.
REFERENCE_TOOL_FAILURES = (
    re.compile(r"Unable to determine the device handle for (?:GPU|gpu)\s*\S+?:\s*\S.*"),
    re.compile(r"No devices were found.*"),
    re.compile(r"\bGPU is lost\b.*"),
    re.compile(r"NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.*"),
    re.compile(r"Failed to initialize NVML:.*"),
    re.compile(r"modprobe: FATAL: Module nvidia\S* not found.*"),
)


def reference_tool_failure(line: str) -> str | None:
    for pattern in REFERENCE_TOOL_FAILURES:
        match = pattern.search(line)
        if match:
            return match.group(0).strip()
    return None


# Every pattern matched, plus near misses (hint present, pattern not matching) and tab layouts.
FAILURE_LINES = [
    "Unable to determine the device handle for GPU 0000:0B:00.0: Unknown Error",
    "Unable to determine the device handle for GPU0000:A1:00.0: GPU is lost.  Reboot the system to recover this GPU",
    "[  12.3] nvidia-smi: Unable to determine the device handle for gpu 0000:3b:00.0: Unknown Error",
    "Unable to determine the device handle for GPU 0000:0B:00.0:",
    "Unable to determine the device handle for device 0000:0B:00.0: Unknown Error",
    "Unable to determine the device handle for\tGPU 0000:0B:00.0: Unknown Error",
    "Unable\tto determine the device handle for GPU 0000:0B:00.0: Unknown Error",
    "modprobe: FATAL: Module nvidia not found in directory /lib/modules/6.8.0-49-generic",
    "modprobe: FATAL: Module nvidia_uvm not found.",
    "modprobe: FATAL: Module nvidiafoo",
    "No devices were found",
    "   No devices were found   ",
    "No devices were foundX",
    "No devices were\tfound",
    "GPU is lost. Reboot the system to recover this GPU",
    "xGPU is lost",
    "GPU is lostx",
    "    Bus Id : [GPU is lost]",
    "GPU is\tlost",
    "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. Make sure that the latest",
    "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver",
    "NVIDIA-SMI has failed because it could not communicate with the NVIDIA driver.",
    "Failed to initialize NVML: Driver/library version mismatch",
    "Failed to initialize NVML:",
    "Failed to initialize NVML Unknown Error",
    "failed to initialize nvml: unknown error",
]


@cache
def fixture_texts() -> tuple[str, ...]:
    """Every text file under fixtures/ (nvidia-smi samples and all the rest) and the inline samples of the tests."""
    texts = []
    for path in sorted((ROOT / "fixtures").rglob("*")):
        if path.is_file():
            texts.append(path.read_text(encoding="utf-8", errors="replace"))
    return (*texts, XML_V12, VOLTA_XML, TEXT_ACTIVE_SLOWDOWN, "\n".join(FAILURE_LINES))


def nvidia_smi_texts() -> list[str]:
    return [text for text in fixture_texts() if "nvidia" in text.lower() or "NVSMI" in text or "GPU" in text]


def test_fixtures_hold_every_failure_kind() -> None:
    lines = [line for text in fixture_texts() for line in text.splitlines()]
    for pattern in REFERENCE_TOOL_FAILURES:
        assert any(pattern.search(line) for line in lines), pattern.pattern


def test_each_hint_is_literal_text_of_its_pattern() -> None:
    assert len(TOOL_FAILURE_HINTS) == len(TOOL_FAILURES) == len(REFERENCE_TOOL_FAILURES)
    for hint, pattern, reference in zip(TOOL_FAILURE_HINTS, TOOL_FAILURES, REFERENCE_TOOL_FAILURES, strict=True):
        assert pattern.pattern == reference.pattern and pattern.flags == reference.flags
        assert hint in pattern.pattern


def test_tool_failure_matches_the_per_pattern_loop_on_every_line() -> None:
    checked = 0
    for text in fixture_texts():
        for line in text.splitlines():
            body = line.expandtabs(8).strip()  # what build_text_tree tests
            for candidate in (line, body):
                assert tool_failure(candidate) == reference_tool_failure(candidate), candidate
                checked += 1
    assert checked > 10_000


def test_whole_text_prefilter_never_hides_a_failure() -> None:
    texts = [*fixture_texts(), *FAILURE_LINES]
    for text in texts:
        if may_hold_tool_failure(text):
            continue
        for line in text.splitlines():
            assert reference_tool_failure(line) is None, line
            assert reference_tool_failure(line.expandtabs(8).strip()) is None, line
    assert not may_hold_tool_failure("Product Name : NVIDIA A100\nNo device was found\n")
    assert may_hold_tool_failure("No devices were\tfound")  # the tab expands to the one space the hint needs


def flat(reading: tuple[Node, list[str]]) -> tuple[list[tuple[int, str, str, str | None]], list[str]]:
    """A tree as a list in document order (Node equality recurses, and some trees here are 3,000 deep)."""
    root, warnings = reading
    rows = []
    pending = [(0, root)]
    while pending:
        depth, node = pending.pop()
        rows.append((depth, node.key, node.label, node.value))
        pending.extend((depth + 1, child) for child in reversed(node.children))
    return rows, warnings


def reference_text_tree(lines: list[str]) -> tuple[Node, list[str]]:
    """build_text_tree before its prefilters (a copy)."""
    root = Node("", "", None)
    stack: list[tuple[int, Node]] = [(-1, root)]
    for raw in lines:
        line = raw.expandtabs(8).rstrip()
        body = line.strip()
        if not body or _BANNER.match(body) or SHELL_PROMPT.match(body) or reference_tool_failure(body):
            continue
        indent = len(line) - len(line.lstrip())
        while stack[-1][0] >= indent:
            stack.pop()
        header = _GPU_HEADER.match(body)
        key_value = None if header else REFERENCE_KEY_VALUE.match(body)
        if header:
            node = Node(GPU_KEY, body, header.group("pci"))
        elif key_value:
            key = key_value.group("key")
            node = Node(reference_canon(key), key, key_value.group("value") or "")
        else:
            node = Node(reference_canon(body), body, None)
        stack[-1][1].children.append(node)
        stack.append((indent, node))
    unread = [n.label for n in walk(root) if n.value is None and not n.children and n.key != GPU_KEY]
    return root, unread


HOSTILE_TEXTS = [
    "".join(" " * depth + "Section\n" for depth in range(3000)),
    "$ nvidia-smi -q\n(venv) root@node1:~/dir# nvidia-smi\n[root@host ~]# x\n  GPU is lost\n> quote\n",
    "=====NVSMI LOG=====\n== not a banner\nGPU 00000000:01:00.0\nGPU 0000:01:00.0 extra\nGPUs : 2\n",
    "\tGPU 00000000:01:00.0\n\t\tProduct Name\t: X\n\t\tNo devices were\tfound\n  \t \n",
    "GPU\u00a000000000:01:00.0\n    Product Name : X\nGPU\u200300000000:02:00.0\n",  # any \s after GPU
]


def test_text_tree_matches_the_plain_builder_on_every_fixture() -> None:
    for text in [*nvidia_smi_texts(), *FAILURE_LINES, *HOSTILE_TEXTS]:
        lines = text.splitlines()
        expected = flat(reference_text_tree(lines))
        assert flat(build_text_tree(lines)) == expected, text[:200]
        if not may_hold_tool_failure(text):
            assert flat(build_text_tree(lines, check_failures=False)) == expected, text[:200]


def reference_canon(label: str) -> str:
    return re.sub(r"[^a-z0-9]+", "_", label.lower()).strip("_")


def reference_bare(raw: str | None) -> str:
    return (raw or "").strip().strip("[]").strip().lower()


def reference_is_error_value(raw: str | None) -> bool:
    bare = reference_bare(raw)
    return bare in tree.ERROR_VALUES or bare.startswith("gpu is lost")


def reference_clean(raw: str | None) -> str | None:
    if raw is None:
        return None
    if reference_bare(raw) in tree.NULL_VALUES or reference_is_error_value(raw):
        return None
    return raw.strip()


ODD_STRINGS = [
    "",
    " ",
    "[Unknown Error]",
    " [ [ERR!] ] ",
    "GPU is lost",
    "[GPU is lost.  Reboot]",
    "\u212aNOWN ERROR",  # Kelvin sign: lowercases to "k"
    "Unknown Error" + " " * 100,
    "ERROR",
    "N/A",
    "[N/A]",
    "None (Disabled)",
    "SRAM Uncorrectable SEC-DED",
    "__Weird--Label__",
    "\u0130stanbul",
    "\u00c4\u00d6 \u00dc",
    "x" * 81,
    "Bus Id " * 30,
]


def test_cached_canon_and_value_checks_match_the_plain_functions() -> None:
    strings = set(ODD_STRINGS)
    for text in nvidia_smi_texts():
        for line in text.splitlines():
            key, _, value = line.partition(":")
            strings.update((key, key.strip(), value, value.strip(), line))
    for _ in range(2):  # the second round reads from the caches
        for string in strings:
            assert canon(string) == reference_canon(string), string
            assert is_error_value(string) == reference_is_error_value(string), string
            assert clean(string) == reference_clean(string), string
    assert is_error_value(None) is False and clean(None) is None


def test_long_strings_are_not_cached() -> None:
    def counters() -> tuple[object, ...]:
        return (tree._canon_cached.cache_info(), tree._is_error_text_cached.cache_info())

    long_label = "Label " + "y" * tree._CACHED_LENGTH
    before = counters()
    assert canon(long_label) == reference_canon(long_label)
    assert is_error_value(long_label) is False
    assert counters() == before  # neither a hit nor a miss: the caches were not asked
    canon("Bus Id")
    is_error_value("N/A")
    assert counters() != before


def test_table_prefilter_matches_the_plain_check() -> None:
    def reference(text: str) -> bool:
        return bool(_TABLE_HEADER.search(text)) or any(_TABLE_ROW_NAME.match(line) for line in text.splitlines())

    rows = ["|   0  Tesla V100  On | 00000000:18:00.0 Off | 0 |", "|0 Tesla V100 On |00000000:18:00.0 Off |0 |"]
    texts = [*fixture_texts(), "| NVIDIA-SMI 550.54", *(f"x\n{row}\n" for row in rows)]
    for text in texts:
        assert looks_like_table(text) == reference(text)


# --- XML: the C parser stands in for defusedxml only where both read the same


def reference_element_to_node(element: Any) -> Node:
    tag = str(element.tag)
    children = [reference_element_to_node(child) for child in element]
    text = (element.text or "").strip()
    if tag == "gpu":
        return Node(GPU_KEY, tag, element.get("id") or "", children)
    return Node(reference_canon(tag), tag, None if children else text, children)


def reference_xml_tree(text: str) -> tuple[Node, list[str]]:
    """build_xml_tree before the C parser shortcut: the strict reading is always defusedxml's."""
    start = text.find("<?xml")
    if start < 0:
        start = text.find("<nvidia_smi_log")
    end = text.rfind("</nvidia_smi_log>")
    document = text[start : end + len("</nvidia_smi_log>")] if end > start else text[start:]
    try:
        from defusedxml import ElementTree

        return reference_element_to_node(ElementTree.fromstring(document)), []
    except Exception as exc:  # noqa: BLE001 - same fall back as the code under test
        warning = f"XML not read strictly ({type(exc).__name__}: {exc}); read leniently"
        return build_xml_tree_leniently(document), [warning]


BOMB = """<?xml version="1.0"?>
<!DOCTYPE nvidia_smi_log [<!ENTITY a "aaaaaaaaaa"><!ENTITY b "&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;">]>
<nvidia_smi_log><driver_version>&b;</driver_version></nvidia_smi_log>"""
EXTERNAL = """<?xml version="1.0"?>
<!DOCTYPE nvidia_smi_log [<!ENTITY x SYSTEM "file:///etc/hostname">]>
<nvidia_smi_log><driver_version>&x;</driver_version></nvidia_smi_log>"""
PARAMETER = """<?xml version="1.0"?><!DOCTYPE nvidia_smi_log [<!ENTITY % p SYSTEM "file:///etc/hostname"> %p;]>
<nvidia_smi_log><driver_version>1</driver_version></nvidia_smi_log>"""
XML_VARIANTS = [
    BOMB,
    EXTERNAL,
    PARAMETER,
    XML_V12.replace("<driver_version>", "<!-- c --><?pi x?><driver_version><![CDATA[5<3]]>"),
    XML_V12.replace("<nvidia_smi_log>", '<nvidia_smi_log xmlns="urn:x" xmlns:n="urn:n"><n:extra a="1"/>'),
    XML_V12.replace('<?xml version="1.0" ?>', '<?xml version="1.0" encoding="ISO-8859-1"?>'),
    XML_V12.replace("535.104.05", "&undefined;"),
    XML_V12.replace("535.104.05", "&amp;&#65;&lt;"),
    XML_V12.replace("<nvidia_smi_log>", '<!DOCTYPE x [<!ATTLIST gpu id CDATA "0000:01:00.0">]><nvidia_smi_log>'),
    XML_V12 + "<junk/>",
    XML_V12.replace("</nvidia_smi_log>", "</nvidia_smi_log><extra>"),
    "<nvidia_smi_log>" + "<a>" * 3000 + "</a>" * 3000 + "</nvidia_smi_log>",
    "<nvidia_smi_log></nvidia_smi_log>",
    "<nvidia_smi_log>",
]


def xml_documents() -> list[str]:
    samples = [text for text in fixture_texts() if "<nvidia_smi_log" in text]
    assert len(samples) >= 4
    truncated = [sample[: len(sample) * cut // 25] for sample in samples for cut in range(1, 25)]
    return [*samples, *truncated, *XML_VARIANTS]


def test_xml_tree_matches_the_defusedxml_reading() -> None:
    for text in xml_documents():
        assert flat(build_xml_tree(text)) == flat(reference_xml_tree(text)), text[:200]


@pytest.mark.parametrize("text", [BOMB, EXTERNAL, PARAMETER], ids=["bomb", "external", "parameter"])
def test_entity_declarations_never_reach_the_c_parser(text: str, monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[str] = []
    real = tree.ElementTree.fromstring
    monkeypatch.setattr(tree.ElementTree, "fromstring", lambda document: seen.append(document) or real(document))
    root, warnings = build_xml_tree(text)
    assert seen == []
    assert warnings and "Forbidden" in warnings[0]
    assert "aaaaaaaaaa" not in repr(root)


def test_plain_nvidia_smi_xml_is_read_by_the_c_parser(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[str] = []
    real = tree.ElementTree.fromstring
    monkeypatch.setattr(tree.ElementTree, "fromstring", lambda document: seen.append(document) or real(document))
    assert build_xml_tree(XML_V12)[1] == []
    assert len(seen) == 1


def test_a_document_the_c_parser_reads_never_imports_defusedxml() -> None:
    """defusedxml's ElementTree loads a pure-Python copy of the standard one: 18 ms a process, for nothing
    when the document declares no entity."""
    import subprocess
    import sys

    code = (
        "import sys\n"
        "from nightowl.collectors.gpu.nvidia_smi.tree import build_xml_tree\n"
        f"print(build_xml_tree({XML_V12!r})[1], 'defusedxml' in sys.modules)\n"
        f"print(build_xml_tree({BOMB!r})[1] != [], 'defusedxml' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT).stdout
    assert out.splitlines() == ["[] False", "True True"]


def test_without_defusedxml_nothing_is_read_strictly(monkeypatch: pytest.MonkeyPatch) -> None:
    import builtins

    real_import = builtins.__import__

    def no_defusedxml(name: str, *args: Any, **kwargs: Any) -> Any:
        if name.startswith("defusedxml"):
            raise ImportError(f"No module named {name!r}")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(tree, "_defusedxml_installed", lambda: False)
    monkeypatch.setattr(builtins, "__import__", no_defusedxml)
    root, warnings = build_xml_tree(XML_V12)
    assert warnings and "read leniently" in warnings[0] and "ImportError" in warnings[0]
    assert flat((root, [])) == flat((build_xml_tree_leniently(XML_V12[XML_V12.find("<?xml") :]), []))


def test_tag_keys_stay_bounded_and_right(monkeypatch: pytest.MonkeyPatch) -> None:
    """A document of more distinct tags than the key table holds reads as the reference reads it, and the
    table never grows past its bound (it is cleared when full)."""
    from nightowl.collectors.gpu.nvidia_smi import tree

    monkeypatch.setattr(tree, "_TAG_KEYS_MAX", 50)
    tree._TAG_KEYS.clear()
    tags = "".join(f"<Tag-{n}.X>v{n}</Tag-{n}.X>" for n in range(120))
    text = f"<nvidia_smi_log><gpu id='0000:01:00.0'>{tags}<Tag-7.X>again</Tag-7.X></gpu></nvidia_smi_log>"
    assert flat(build_xml_tree(text)) == flat(reference_xml_tree(text))
    assert 0 < len(tree._TAG_KEYS) <= 50
