"""The generic side of ``nvidia-smi -q`` / ``-q -x`` reading: value vocabulary and one labelled tree.

Text ``-q`` becomes a tree by indentation, XML by element nesting (strictly as defusedxml reads it, else
leniently from the tag stream); values are read through ``clean``/``to_int``/``to_bool``. Nothing here
knows about GPUs beyond the block header: ``nvidia_smi`` reads its fields out of the tree.
"""

from __future__ import annotations

import contextlib
import functools
import html
import re
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any
from xml.etree import ElementTree

# ---------------------------------------------------------------------------------------------
# Value vocabulary
# ---------------------------------------------------------------------------------------------

# Values that mean "not shown / not applicable": null, nothing wrong. Source: corpus samples
# (N/A everywhere; "Not Found" for CUDA Version in nvsmi-q-d-...-580; "deprecated" in R590 XML,
# telegraf testdata pro-6000-maxq-blackwell-v13.xml; "[Not Supported]" in CSV/table output).
NULL_VALUES = frozenset(
    {
        "",
        "n/a",
        "na",
        "not found",
        "not supported",
        "not available",
        "requested functionality has been deprecated",
        "insufficient permissions",
        "none (disabled)",
    }
)
# Values that mean the tool failed to read the field: null plus an `errors` entry.
# Sources: "Unknown Error" (nvsmi-q-v100-... Host Max; NVML_ERROR_UNKNOWN text), "ERR!" (table
# samples nvsmi-table-*-ERR-*), "[Unknown Error]" (CSV sample mindminer627), "GPU is lost" and
# "GPU requires reset" (NVML_ERROR_GPU_IS_LOST / NVML_ERROR_RESET_REQUIRED strings, nvml.h).
ERROR_VALUES = frozenset({"unknown error", "err!", "gpu is lost", "gpu requires reset", "error"})

TRUE_WORDS = frozenset({"yes", "true", "active", "enabled", "on"})
FALSE_WORDS = frozenset({"no", "false", "not active", "disabled", "off"})

# Whole-tool failures printed instead of (or between) GPU blocks. Source per row.
TOOL_FAILURES: tuple[re.Pattern[str], ...] = (
    # nvsmi-unable-device-handle-unknown-error.txt and the akash209 paste ("GPU0000:A1:00.0", no space)
    re.compile(r"Unable to determine the device handle for (?:GPU|gpu)\s*\S+?:\s*\S.*"),
    # INDEX.md category 3 ("No devices were found"); nvidia-smi's "GPU is lost. Reboot ..." (docs/sources.md#nvidia-smi)
    re.compile(r"No devices were found.*"),
    re.compile(r"\bGPU is lost\b.*"),
    # Driver not loaded / NVML unusable: nvidia-smi's own message texts.
    re.compile(r"NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.*"),
    re.compile(r"Failed to initialize NVML:.*"),
    # kmod's modprobe when the module was never built for the running kernel (nvidia-smi loads it through
    # nvidia-modprobe and passes the message on)
    re.compile(r"modprobe: FATAL: Module nvidia\S* not found.*"),
)
# Literal text that every match of the pattern at the same place in TOOL_FAILURES contains. A line holding
# none of them cannot match, so the patterns run only on the rare line that holds one: same results, a few
# substring tests instead of five regex searches per line (tests/collectors/gpu/test_nvidia_smi_fast_paths.py).
TOOL_FAILURE_HINTS: tuple[str, ...] = (
    "Unable to determine the device handle for ",
    "No devices were found",
    "GPU is lost",
    "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver",
    "Failed to initialize NVML:",
    "modprobe: FATAL: Module nvidia",
)


# Labels and values nvidia-smi prints repeat on every GPU and every host of a sweep ("N/A", "Enabled", "Bus Id"):
# what is derived from them is cached. Longer strings (pasted junk, hostile output) are derived each time, so
# the caches never pin them.
_CACHE_SIZE = 4096
_CACHED_LENGTH = 80


def _bare(raw: str | None) -> str:
    return (raw or "").strip().strip("[]").strip().lower()


def _is_error_bare(bare: str) -> bool:
    return bare in ERROR_VALUES or bare.startswith("gpu is lost")


def _is_error_text(raw: str) -> bool:
    return _is_error_bare(_bare(raw))


_is_error_text_cached = functools.lru_cache(maxsize=_CACHE_SIZE)(_is_error_text)


def is_error_value(raw: str | None) -> bool:
    if raw is None:
        return False
    return _is_error_text_cached(raw) if len(raw) <= _CACHED_LENGTH else _is_error_text(raw)


def clean(raw: str | None) -> str | None:
    """The value as printed, or None for N/A-like and error values."""
    if raw is None:
        return None
    bare = _bare(raw)
    if bare in NULL_VALUES or _is_error_bare(bare):
        return None
    return raw.strip()


_LEADING_INT = re.compile(r"^(-?\d+)(?![\d.])")
_LEADING_FLOAT = re.compile(r"^(-?\d+(?:\.\d+)?)(?![\d.])")


def to_int(raw: str | None) -> int | None:
    """``"16x"`` -> 16, ``"81559 MiB"`` -> 81559, ``"0 %"`` -> 0, ``"100.89 W"`` -> None."""
    value = clean(raw)
    if value is None:
        return None
    match = _LEADING_INT.match(value)
    return int(match.group(1)) if match else None


def to_float(raw: str | None) -> float | None:
    value = clean(raw)
    if value is None:
        return None
    match = _LEADING_FLOAT.match(value)
    return float(match.group(1)) if match else None


def to_bool(raw: str | None) -> bool | None:
    value = clean(raw)
    if value is None:
        return None
    word = value.lower()
    if word in TRUE_WORDS:
        return True
    if word in FALSE_WORDS:
        return False
    return None


_NOT_KEY_CHARS = re.compile(r"[^a-z0-9]+")


def _canon(label: str) -> str:
    return _NOT_KEY_CHARS.sub("_", label.lower()).strip("_")


_canon_cached = functools.lru_cache(maxsize=_CACHE_SIZE)(_canon)


def canon(label: str) -> str:
    """Text label or XML tag -> snake_case key.

    ``"SRAM Uncorrectable SEC-DED"`` -> ``sram_uncorrectable_sec_ded``; ``"Bus Id"`` -> ``bus_id``.
    """
    return _canon_cached(label) if len(label) <= _CACHED_LENGTH else _canon(label)


# ---------------------------------------------------------------------------------------------
# One tree for both report formats
# ---------------------------------------------------------------------------------------------


@dataclass(slots=True)  # trees are built per parse, thousands of nodes a host: slots make them cheaper
class Node:
    key: str  # canonical key
    label: str  # as printed (text label or XML tag)
    value: str | None  # None for a section header
    children: list[Node] = field(default_factory=list)

    def child(self, aliases: Sequence[str]) -> Node | None:
        for node in self.children:
            if node.key in aliases:
                return node
        return None


Path = tuple[tuple[str, ...], ...]


def lookup(node: Node | None, path: Path) -> Node | None:
    for aliases in path:
        if node is None:
            return None
        node = node.child(aliases)
    return node


def raw_value(node: Node | None, *paths: Path) -> str | None:
    """The first path that exists wins (text label path, XML tag path, older layouts...)."""
    for path in paths:
        found = lookup(node, path)
        if found is not None and found.value is not None:
            return found.value
    return None


GPU_KEY = "__gpu__"  # key of a GPU block; canon() never yields it, so "Gpu : 0 %" cannot collide
_BANNER = re.compile(r"^=+\s*NVSMI LOG\s*=+$")
_GPU_HEADER = re.compile(r"^GPU\s+(?P<pci>[0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-7])$")
# Shell prompts pasted with the output ("$ nvidia-smi -q | grep ...", "[root@host ~]# nvidia-smi",
# "(venv) root@node1:~/dir# nvidia-smi"): not output, and must not become a section header.
SHELL_PROMPT = re.compile(r"^(?:\([^)]*\)\s*)?(?:\[[^\]]*\]\s*[#$]|[\w.@~:/-]*[#$>])(?:\s|$)")


BUSY_UTILIZATION_PERCENT = 50  # links down-train at idle (docs/sources.md#nvidia-smi): judge only under load


def pcie_degraded(
    utilization: float | None,
    gen_current: float | None,
    gen_max: float | None,
    width_current: float | None,
    width_max: float | None,
) -> bool:
    """PCIe generation or width below its maximum while the GPU is busy (unknown load: not judged)."""
    if utilization is None or utilization < BUSY_UTILIZATION_PERCENT:
        return False

    def below(now: float | None, top: float | None) -> bool:
        return now is not None and top is not None and now < top

    return below(gen_current, gen_max) or below(width_current, width_max)


def may_hold_tool_failure(text: str) -> bool:
    """False only when no line of ``text`` can match a TOOL_FAILURES pattern, tabs expanded or not.

    A tab can expand to the one space a hint needs, so text with a tab is always checked line by line.
    """
    return "\t" in text or any(hint in text for hint in TOOL_FAILURE_HINTS)


def tool_failure(line: str) -> str | None:
    if not any(hint in line for hint in TOOL_FAILURE_HINTS):
        return None
    for pattern in TOOL_FAILURES:
        match = pattern.search(line)
        if match:
            return match.group(0).strip()
    return None


def _skipped(body: str, check_failures: bool) -> bool:
    """The banner, a pasted shell prompt or a tool failure: not part of the tree."""
    # Each test is cheap and exact before its regex: the banner starts with "=", a prompt holds "#", "$" or ">".
    if body[0] == "=" and _BANNER.match(body):
        return True
    if ("#" in body or "$" in body or ">" in body) and SHELL_PROMPT.match(body):
        return True
    return check_failures and tool_failure(body) is not None


def build_text_tree(lines: Iterable[str], check_failures: bool = True) -> tuple[Node, list[str]]:
    """Indentation tree of ``-q`` text; also returns the leaf lines that were not ``key : value``.

    ``check_failures=False`` when ``may_hold_tool_failure`` already ruled out every line.
    """
    root = Node("", "", None)
    stack: list[tuple[int, Node]] = [(-1, root)]
    headers: list[Node] = []  # in document order, which is walk order: the childless ones were not read
    for raw in lines:
        line = (raw.expandtabs(8) if "\t" in raw else raw).rstrip()
        body = line.lstrip()
        if not body or _skipped(body, check_failures):
            continue
        indent = len(line) - len(body)
        while stack[-1][0] >= indent:
            stack.pop()
        key_value = split_key_value(body)  # most lines; never a GPU header, which has no blank before a colon
        if key_value is not None:
            node = Node(canon(key_value[0]), key_value[0], key_value[1], [])
        else:
            node = _header_node(body)
            if node.value is None:
                headers.append(node)
        stack[-1][1].children.append(node)
        stack.append((indent, node))
    return root, [node.label for node in headers if not node.children]


def _header_node(body: str) -> Node:
    """A line that is not ``key : value``: a GPU block's header or a section's."""
    header = _GPU_HEADER.match(body) if body.startswith("GPU") else None
    if header:
        return Node(GPU_KEY, body, header.group("pci"))
    return Node(canon(body), body, None)


def split_key_value(body: str) -> tuple[str, str] | None:
    """(key, value) of a ``Key   : value`` line body (value "" for none), or None; ``body`` stripped, one line.

    The key holds no colon and is followed by blanks then a colon, so "Bus Id : 00000000:18:00.0" splits
    once and "GPU 0000:0B:00.0: Unknown Error" does not. Read as the pattern the tree used before
    (tests/collectors/gpu/test_smi_parse_equivalence.py holds it to it): its key ends at the first colon with
    blanks before it or, failing that, takes that colon along ("a: : b"); a blank or the end must follow
    the colon that ends the key. The pattern's lazy key was tried at every character of the line; string
    methods find the colon at C speed.
    """
    head, colon, rest = body.partition(":")
    if not colon:
        return None
    key = head.rstrip()
    if 0 < len(key) < len(head) and (not rest or rest[0].isspace()):
        return key, rest.lstrip()
    blanks, colon, value = rest.partition(":")  # the key's last character may be the first colon
    if colon and blanks and not blanks.strip() and (not value or value[0].isspace()):
        return head + ":", value.lstrip()
    return None


def walk(node: Node) -> Iterable[Node]:
    """Every node below ``node`` in document order (iterative: pasted text can nest arbitrarily deep)."""
    pending = list(reversed(node.children))
    while pending:
        current = pending.pop()
        yield current
        pending.extend(reversed(current.children))


# The key of each XML tag met (an 8-GPU `-q -x` has ~3,600 elements and ~450 distinct tags): one dict
# look-up an element. Bounded: cleared when full, as a hostile document may hold any number of tags.
# cache: keyed by the tag name, whose key the tag alone decides.
_TAG_KEYS: dict[str, str] = {}
_TAG_KEYS_MAX = 4096


def _element_to_node(element: Any) -> Node:
    tag = element.tag if element.tag.__class__ is str else str(element.tag)
    children = [_element_to_node(child) for child in element] if len(element) else []
    if tag == "gpu":
        return Node(GPU_KEY, tag, element.get("id") or "", children)
    key = _TAG_KEYS.get(tag)
    if key is None:
        if len(_TAG_KEYS) >= _TAG_KEYS_MAX:
            _TAG_KEYS.clear()
        key = _TAG_KEYS[tag] = canon(tag)
    if children:
        return Node(key, tag, None, children)
    text = element.text
    return Node(key, tag, text.strip() if text else "", children)


# An unclosed comment or declaration runs to the end of the text: matched once, not retried at every "<".
_XML_TOKEN = re.compile(r"<!--.*?(?:-->|\Z)|<[?!][^>]*>?|<(/?)([A-Za-z_][\w.:-]*)([^<>]*?)(/?)>|([^<]+)", re.DOTALL)
_ID_ATTRIBUTE = re.compile(r"""\bid\s*=\s*["']([^"']*)["']""")


def build_xml_tree_leniently(text: str) -> Node:
    """Tag-stream reader for truncated or malformed ``-q -x`` output: unclosed tags close at the end."""
    root = Node("", "", None)
    stack: list[Node] = [root]
    open_tags: Counter[str] = Counter()  # labels on the stack: a stray closing tag costs O(1), not O(depth)
    texts: dict[int, list[str]] = {}
    for match in _XML_TOKEN.finditer(text):
        closing, tag, attributes, self_closing, chars = match.groups()
        if chars is not None:
            texts.setdefault(id(stack[-1]), []).append(html.unescape(chars))
        elif tag is None:
            continue
        elif closing:
            _close(tag, stack, open_tags)
        else:
            if tag == "gpu":  # GPUs never nest: an unclosed <gpu> ends where the next one starts
                _close(tag, stack, open_tags)
            id_match = _ID_ATTRIBUTE.search(attributes or "")
            node = Node(
                GPU_KEY if tag == "gpu" else canon(tag),
                tag,
                (id_match.group(1) if id_match else "") if tag == "gpu" else None,
            )
            stack[-1].children.append(node)
            if not self_closing:
                stack.append(node)
                open_tags[tag] += 1
    for node in walk(root):
        if node.key != GPU_KEY and not node.children:
            node.value = "".join(texts.get(id(node), [])).strip()
    # The document element (nvidia_smi_log) becomes the root, as with ElementTree.
    document = root.child(("nvidia_smi_log",))
    return document if document is not None else root


def _close(tag: str, stack: list[Node], open_tags: Counter[str]) -> None:
    """Close ``tag`` and everything opened inside it; a tag that is not open is ignored."""
    if open_tags[tag] <= 0:
        return
    while stack[-1].label != tag:
        open_tags[stack.pop().label] -= 1
    open_tags[stack.pop().label] -= 1


def build_xml_tree(text: str) -> tuple[Node, list[str]]:
    start = text.find("<?xml")
    if start < 0:
        start = text.find("<nvidia_smi_log")
    end = text.rfind("</nvidia_smi_log>")
    document = text[start : end + len("</nvidia_smi_log>")] if end > start else text[start:]
    try:
        return _element_to_node(_read_strictly(document)), []
    except Exception as exc:  # noqa: BLE001 - ParseError, DefusedXmlException, RecursionError: fall back
        warning = f"XML not read strictly ({type(exc).__name__}: {exc}); read leniently"
        return build_xml_tree_leniently(document), [warning]


def _read_strictly(document: str) -> Any:
    """The root element as defusedxml reads it, or its exception; at the cost of the C parser when that is the same.

    defusedxml's parser is pure Python, twice the cost of the standard C one (and importing it costs more than
    a parse). What it adds acts only on entity declarations (expansion bombs, external entities; neither parser
    ever loads an external DTD), so a document that declares none reads the same with both. Anything the C parser
    rejects is read again by defusedxml, whose verdict and error message are the ones reported.
    """
    if "<!ENTITY" not in document and _defusedxml_installed():  # without defusedxml nothing is read strictly
        with contextlib.suppress(Exception):
            return ElementTree.fromstring(document)
    from defusedxml import ElementTree as DefusedElementTree

    return DefusedElementTree.fromstring(document)


@functools.cache
def _defusedxml_installed() -> bool:
    """Whether defusedxml can be imported, without importing it: its ElementTree module loads a second, pure-Python
    copy of the standard one (18 ms a process), which a document the C parser reads never needs."""
    import importlib.util

    return importlib.util.find_spec("defusedxml") is not None
