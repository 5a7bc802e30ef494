"""DCGM active diagnostics (``dcgmi diag``) and, when present, the passive ``dcgmi health -c`` report.

The collector runs ``dcgmi diag -r 1``: level 1 is the deployment/software checks (denylist, NVML
and CUDA libraries, permissions, persistence mode, page retirement / row remap, graphics processes,
InfoROM), seconds long and safe on a busy GPU. Levels 2 and above run memory, PCIe bandwidth, GEMM,
stress and power tests that load the GPU for minutes and need it idle (drained): invasive, never
run by default (NVIDIA dcgmi-diag docs and
NVIDIA/DCGM nvvs/src/NvidiaValidationSuite.cpp; docs/sources.md#dcgm).

Reads the 3.x and 4.x boxed tables (``Pass - GPUs: 1, 2`` / ``GPU0: Pass`` result lines,
``Warning``/``Error``/``Info`` detail rows wrapped at 45 characters), ``--json`` output of both
major versions, and ``dcgmi health -c`` (``-j`` JSON or the boxed tree).

``overall`` is ``pass`` only when at least one test ran, none failed or warned, and the table is
complete: a skipped test is not a pass, and a truncated table is ``incomplete``, never ``pass``.
"""

from __future__ import annotations

import bisect
import json
import re
from dataclasses import dataclass, field
from typing import Any

from nightowl.collectors.base import Collector, registered, to_jsonable

KIND = "dcgmi-diag"

# Result words as dcgmi prints them (dcgmi/Diag.cpp HelperDisplayDiagResult, JSON "status") -> ours.
RESULT_WORDS: dict[str, str] = {
    "pass": "pass",
    "passed": "pass",
    "fail": "fail",
    "failed": "fail",
    "failure": "fail",
    "warn": "warn",
    "warning": "warn",
    "skip": "skip",
    "skipped": "skip",
    "not run": "not_run",
    "notrun": "not_run",
    "n/a": "not_run",
}
# Worst first: how one test's per-GPU results combine.
RESULT_ORDER = ("fail", "warn", "pass", "skip", "not_run")
# Detail rows under a test (dcgmi/Diag.cpp DisplayVerboseInfo names).
DETAIL_NAMES: dict[str, str] = {"warning": "warning", "error": "error", "info": "info"}
# dcgmi diag -r aliases (quick/short, medium, long, xlong: NVIDIA dcgmi-diag docs, docs/sources.md#dcgm).
LEVEL_ALIASES: dict[str, int] = {"quick": 1, "short": 1, "medium": 2, "long": 3, "xlong": 4}
# dcgmi health result words (dcgmi/Health.cpp HelperHealthToString).
HEALTH_WORDS: dict[str, str] = {"healthy": "healthy", "warning": "warning", "failure": "failure"}
# Chunk width of the Result column (dcgmi/Diag.cpp DATA_INFO_TAG_LEN) when no closing "|" shows it.
DEFAULT_CHUNK_WIDTH = 45

_SECTION = re.compile(r"^[|+]-+\s+(?P<name>[A-Za-z][A-Za-z ]*?)\s+-+\+")
_BORDER = re.compile(r"^\+[-=+]+$")
_GROUP_RESULT = re.compile(
    r"^(?P<word>Pass|Fail|Warn|Skip)\s*-\s*(?P<who>All|GPUs?:\s*(?P<ids>[\d,\s]+))\s*$", re.IGNORECASE
)
_ENTITY_RESULT = re.compile(r"^(?P<group>GPU|CPU)\s?(?P<id>\d+)\s*:\s*(?P<word>[A-Za-z][A-Za-z ]*?)\s*$")
_PREFIXED_DETAIL = re.compile(r"^(?P<name>Warning|Error|Info)\s*:\s*(?P<text>.*)$", re.I)
_GPU_IN_TEXT = re.compile(r"\bGPU\s?(\d+)\b")
_LEVEL = re.compile(r"\bdcgmi\s+diag\b.*?(?:-r|--run)\s+(?P<level>\S+)")
_RUNTIME_ERROR = re.compile(r"^Error:\s*(?P<text>.+)$")
# DCGM refuses to run on a GPU whose MIG layout hides part of it (the diagnostic needs the whole GPU; only one GPU
# instance over the whole GPU with one compute instance is supported): that is no result, not a failed test.
# Wording as printed by DCGM 2.x/3.x (NVIDIA/DCGM issues 31, 70, 94).
_MIG_BLOCKED = re.compile(r"^GPU (?P<gpu>\d+)'s MIG configuration is incompatible with the diagnostic\b")
_NOISE = re.compile(
    r"^(?:.*\bdcgmi\s.*|[$#]\s.*|Successfully ran diagnostic for group\.|Executing in Pod .*"
    r"|Health monitor systems set successfully\.|Health monitor systems report)$",
    re.IGNORECASE,
)
_MAX_LINE_WARNINGS = 20


@dataclass
class GpuResult:
    gpu: int
    result: str


@dataclass
class Detail:
    severity: str  # warning | error | info
    gpu: int | None
    text: str


@dataclass
class DiagTest:
    name: str
    category: str | None
    result: str  # pass | fail | warn | skip | not_run
    gpus: list[GpuResult] = field(default_factory=list)
    details: list[Detail] = field(default_factory=list)


@dataclass
class HealthIncident:
    entity_group: str
    entity_id: int | None
    system: str | None
    health: str | None
    messages: list[str] = field(default_factory=list)


@dataclass
class HealthReport:
    overall: str | None  # healthy | warning | failure
    incidents: list[HealthIncident] = field(default_factory=list)


@dataclass
class DcgmiResult:
    kind: str
    warnings: list[str]
    dcgm_version: str | None
    level: int | None
    tests: list[DiagTest]
    overall: str  # pass | fail | warn | incomplete | not_run
    driver_version: str | None = None
    gpu_device_ids: list[str] = field(default_factory=list)
    complete: bool = False
    runtime_error: str | None = None
    health: HealthReport | None = None
    mig_blocked_gpus: list[int] = field(default_factory=list)


def _result_word(text: Any) -> str | None:
    word = " ".join(str(text).strip().lower().split())
    word = word.split(" - ")[0].strip()
    return RESULT_WORDS.get(word)


def _worst(results: list[str]) -> str:
    for candidate in RESULT_ORDER:
        if candidate in results:
            return candidate
    return "not_run"


def _detail(severity: str, text: str) -> Detail:
    gpu = _GPU_IN_TEXT.search(text)
    return Detail(severity=severity, gpu=int(gpu.group(1)) if gpu else None, text=text)


# ---------------------------------------------------------------- boxed text table


@dataclass
class _TableReader:
    """State of the line-by-line reader of the boxed ``dcgmi diag`` table."""

    tests: list[DiagTest] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    metadata: dict[str, str] = field(default_factory=dict)
    section: str | None = None
    test: DiagTest | None = None
    detail: Detail | None = None
    pending_spaces: int = 0
    rows_seen: bool = False
    complete: bool = False

    def border(self, line: str) -> None:
        section = _SECTION.match(line)
        if section:
            self.section, self.detail = section.group("name").strip(), None
        elif _BORDER.match(line) and self.rows_seen:
            self.complete, self.detail = True, None

    def row(self, line: str) -> None:
        name, chunk, width = _split_row(line)
        if name == "Diagnostic" and chunk.strip() == "Result":
            return
        self.rows_seen, self.complete = True, False
        if name:
            self._named_row(name, chunk, width)
        else:
            self._continuation(chunk, width)

    def _named_row(self, name: str, chunk: str, width: int | None) -> None:
        text = chunk.strip()
        if (self.section or "").lower() == "metadata":
            self.metadata[name] = text
            return
        severity = DETAIL_NAMES.get(name.lower())
        if severity:
            self._start_detail(severity, chunk, width)
            return
        self.test = DiagTest(name=name, category=self.section, result="not_run")
        self.tests.append(self.test)
        self.detail = None
        self._result_line(text)

    def _start_detail(self, severity: str, chunk: str, width: int | None) -> None:
        if self.test is None:
            # A detail with no test line above it (e.g. a Deployment "Error" fragment): the detail is the
            # only evidence of that section's result, so it becomes a test named after the section.
            self.test = DiagTest(name=self.section or "unnamed", category=self.section, result="not_run")
            self.tests.append(self.test)
            self.warnings.append(f"{severity} row without a test line; attributed to '{self.test.name}'")
            if severity in ("error", "warning"):
                self.test.result = "fail" if severity == "error" else "warn"
        self.detail = _detail(severity, "")
        self.test.details.append(self.detail)
        self.pending_spaces = 0
        self._append_chunk(chunk, width)

    def _append_chunk(self, chunk: str, width: int | None) -> None:
        assert self.detail is not None
        stripped = chunk.rstrip()
        self.detail.text += " " * self.pending_spaces + stripped
        # dcgmi cuts messages every 45 characters; trailing spaces of a cut chunk are real spaces.
        self.pending_spaces = max(0, (width or DEFAULT_CHUNK_WIDTH) - len(stripped))
        gpu = _GPU_IN_TEXT.search(self.detail.text)
        self.detail.gpu = int(gpu.group(1)) if gpu else None

    def _continuation(self, chunk: str, width: int | None) -> None:
        text = chunk.strip()
        if not text:
            return
        prefixed = _PREFIXED_DETAIL.match(text)
        if self.detail is not None and not (prefixed or self._is_result_line(text)):
            self._append_chunk(chunk, width)
            return
        if prefixed and self.test is not None:
            severity = DETAIL_NAMES[prefixed.group("name").lower()]
            self.detail = _detail(severity, prefixed.group("text").strip())
            self.test.details.append(self.detail)
            self.pending_spaces = 0
            return
        if self.test is None:
            self.warnings.append(f"result line without a test: {text[:200]}")
            return
        if not self._result_line(text):
            self.detail = _detail("info", text)
            self.test.details.append(self.detail)

    @staticmethod
    def _is_result_line(text: str) -> bool:
        return bool(_GROUP_RESULT.match(text) or _ENTITY_RESULT.match(text))

    def _result_line(self, text: str) -> bool:
        """Apply ``Pass``, ``Pass - All``, ``Fail - GPU: 0`` or ``GPU0: Pass`` to the current test."""
        assert self.test is not None
        test = self.test
        group, entity = _GROUP_RESULT.match(text), _ENTITY_RESULT.match(text)
        word = _result_word(group.group("word") if group else entity.group("word") if entity else text)
        if word is None:
            return False
        if group and group.group("ids"):
            test.gpus.extend(GpuResult(int(gpu), word) for gpu in re.findall(r"\d+", group.group("ids")))
        elif entity and entity.group("group") == "GPU":
            test.gpus.append(GpuResult(int(entity.group("id")), word))
        results = [test.result] if test.result != "not_run" else []
        test.result = _worst(results + [word])
        return True


def _split_row(line: str) -> tuple[str, str, int | None]:
    """(name cell, raw result chunk, chunk width or None) of a ``| name | result |`` row."""
    body = line[1:]
    separator = body.find("|")
    if separator < 0:
        return body.strip(), "", None
    name, rest = body[:separator].strip(), body[separator + 1 :]
    width = None
    if rest.rstrip().endswith("|"):
        rest = rest.rstrip()[:-1]
        width = len(rest) - 3
    chunk = rest[1:] if rest.startswith(" ") else rest
    return name, chunk, width


# ---------------------------------------------------------------- health tree (text)


def _health_text_row(report: HealthReport, line: str, context: dict[str, Any]) -> None:
    name, chunk, _ = _split_row(line)
    value = chunk.strip()
    if name == "Overall Health":
        report.overall = HEALTH_WORDS.get(value.lower(), value.lower() or None)
        return
    entity = re.fullmatch(r"->\s*(\d+)", name)
    arrow = re.fullmatch(r"->\s*(.+)", name)
    if name and not name.startswith("->"):
        context["group"] = name
    elif entity:
        context["entity"] = int(entity.group(1))
    elif arrow and arrow.group(1) != "Errors":
        incident = HealthIncident(
            entity_group=context.get("group", "GPU"),
            entity_id=context.get("entity"),
            system=arrow.group(1),
            health=HEALTH_WORDS.get(value.lower(), value.lower() or None),
        )
        report.incidents.append(incident)
        context["incident"] = incident
    elif not name and value and context.get("incident") is not None:
        context["incident"].messages.append(value)


# ---------------------------------------------------------------- JSON (diag and health)


# An object starts with a key or is empty: `{` then `"` or `}`. Lines that cannot start one are not decoded.
_BLOCK_START = re.compile(r"[ \t]*\{\s*[\"}]")


def _json_blocks(text: str) -> tuple[list[Any], set[int]]:
    """JSON objects that start at the beginning of a line, and the line numbers they cover.

    Linear: a line's start is tested in place (no copy of the rest of the text), and failed decodes are
    budgeted (a failure costs its absolute position: JSONDecodeError counts the lines before it), so a
    million lines that each open an object never closed cannot make the search quadratic.
    """
    decoder = json.JSONDecoder()
    blocks: list[Any] = []
    covered: set[int] = set()
    offsets, position = [], 0
    for line in text.splitlines(keepends=True):
        offsets.append(position)
        position += len(line)
    budget = 2 * len(text) + (1 << 20)
    line_number = 0
    while line_number < len(offsets):
        opening = _BLOCK_START.match(text, offsets[line_number])
        if opening is None or budget <= 0:
            line_number += 1
            continue
        begin = text.index("{", opening.start())
        try:
            value, end = decoder.raw_decode(text, begin)
        except ValueError as exc:
            budget -= max(1, getattr(exc, "pos", len(text)))
            line_number += 1
            continue
        except RecursionError:  # nested deeper than Python's stack: not a dcgmi document
            budget -= len(text) - begin
            line_number += 1
            continue
        blocks.append(value)
        last = bisect.bisect_left(offsets, end, lo=line_number + 1) - 1
        covered.update(range(line_number, last + 1))
        line_number = last + 1
    return blocks, covered


def _strings(node: Any) -> list[str]:
    if isinstance(node, str):
        return [node] if node.strip() else []
    if isinstance(node, dict):
        return [text for value in node.values() for text in _strings(value)]
    if isinstance(node, list):
        return [text for value in node for text in _strings(value)]
    return []


def _health_from_json(body: dict[str, Any]) -> HealthReport:
    overall = body.get("Overall Health", {})
    overall_value = overall.get("value") if isinstance(overall, dict) else overall
    report = HealthReport(overall=HEALTH_WORDS.get(str(overall_value).lower()) if overall_value else None)
    for group, group_node in body.items():
        if group == "Overall Health" or not isinstance(group_node, dict):
            continue
        for entity_id, entity_node in (group_node.get("children") or {}).items():
            errors = ((entity_node or {}).get("children") or {}).get("Errors") or {}
            for system, system_node in (errors.get("children") or {}).items():
                node = system_node if isinstance(system_node, dict) else {"value": system_node}
                messages = _strings({key: value for key, value in node.items() if key != "value"})
                report.incidents.append(
                    HealthIncident(
                        entity_group=group,
                        entity_id=int(entity_id) if str(entity_id).isdigit() else None,
                        system=system,
                        health=HEALTH_WORDS.get(str(node.get("value", "")).lower()),
                        messages=messages,
                    )
                )
    return report


def _json_result_gpu(result: dict[str, Any]) -> list[int]:
    if "entity_id" in result and str(result.get("entity_group", "GPU")).upper() == "GPU":
        return [int(result["entity_id"])] if str(result["entity_id"]).isdigit() else []
    return [int(gpu) for gpu in re.findall(r"\d+", str(result.get("gpu_ids", result.get("gpu_id", ""))))]


def _json_details(result: dict[str, Any]) -> list[Detail]:
    details = []
    for warning in result.get("warnings") or []:
        text = warning.get("warning") or warning.get("warnings") if isinstance(warning, dict) else warning
        if text:
            details.append(_detail("warning", str(text)))
    info = result.get("info")
    for text in info if isinstance(info, list) else [info] if info else []:
        details.append(_detail("info", str(text)))
    return details


def _json_test(category: str | None, node: dict[str, Any]) -> DiagTest:
    test = DiagTest(name=str(node.get("name", "unnamed")), category=category, result="not_run")
    words = []
    for result in node.get("results") or []:
        if not isinstance(result, dict):
            continue
        word = _result_word(result.get("status", "")) or "not_run"
        words.append(word)
        test.gpus.extend(GpuResult(gpu, word) for gpu in _json_result_gpu(result))
        test.details.extend(_json_details(result))
    summary = node.get("test_summary")
    summary_word = _result_word(summary.get("status", "")) if isinstance(summary, dict) else None
    test.result = summary_word or _worst(words)
    return test


def _diag_from_json(root: dict[str, Any]) -> tuple[list[DiagTest], dict[str, str], str | None]:
    diag = root.get("DCGM Diagnostic") or root.get("DCGM GPU Diagnostic") or {}
    tests = [
        _json_test(category.get("category"), test)
        for category in diag.get("test_categories") or []
        if isinstance(category, dict)
        for test in category.get("tests") or []
        if isinstance(test, dict)
    ]
    metadata: dict[str, str] = {}
    for source in (diag, root.get("metadata") or {}):
        for key in ("version", "DCGM Version", "Driver Version Detected"):
            if isinstance(source.get(key), str):
                metadata.setdefault("DCGM Version" if key == "version" else key, source[key])
    error = diag.get("runtime_error")
    return tests, metadata, str(error) if error else None


# ---------------------------------------------------------------- assembly


def _overall(tests: list[DiagTest], complete: bool) -> str:
    results = {test.result for test in tests}
    if "fail" in results:
        return "fail"
    if "warn" in results:
        return "warn"
    if "pass" not in results:
        return "not_run"
    return "pass" if complete else "incomplete"


def _read_json_blocks(
    blocks: list[Any],
) -> tuple[list[DiagTest], dict[str, str], str | None, bool, HealthReport | None]:
    """The diag tests, metadata, runtime error, completeness and health report of ``dcgmi -j`` blocks."""
    tests: list[DiagTest] = []
    metadata: dict[str, str] = {}
    runtime_error: str | None = None
    complete = False
    health: HealthReport | None = None
    for block in blocks:
        if not isinstance(block, dict):
            continue
        body = block.get("body")
        if isinstance(body, dict) and "Overall Health" in body:
            health = _health_from_json(body)
        elif "DCGM Diagnostic" in block or "DCGM GPU Diagnostic" in block:
            json_tests, json_metadata, json_error = _diag_from_json(block)
            tests.extend(json_tests)
            metadata.update(json_metadata)
            runtime_error = runtime_error or json_error
            complete = True
    return tests, metadata, runtime_error, complete, health


def parse(text: str) -> DcgmiResult:
    """Parse ``dcgmi diag`` (table or JSON) and ``dcgmi health -c`` output; never raises."""
    text = str(text)
    reader = _TableReader()
    health_context: dict[str, Any] = {}
    in_health = False
    level: int | None = None
    mig_blocked: set[int] = set()
    blocks, json_lines = _json_blocks(text)
    tests, metadata, runtime_error, json_complete, health = _read_json_blocks(blocks)
    unread = 0
    for number, raw in enumerate(text.splitlines()):
        if number in json_lines:
            continue
        line = raw.strip()
        level_match = _LEVEL.search(line)
        if level_match:
            word = level_match.group("level").lower()
            level = int(word) if word.isdigit() else LEVEL_ALIASES.get(word)
        if not line:
            continue
        if "Health Monitor Report" in line:
            in_health, health = True, health or HealthReport(overall=None)
            continue
        if line.startswith("+") or line.startswith("|-"):
            if not in_health:
                reader.border(line)
            continue
        if line.startswith("|"):
            if in_health and health is not None:
                _health_text_row(health, line, health_context)
            else:
                reader.row(line)
            continue
        if _NOISE.match(line):
            continue
        blocked = _MIG_BLOCKED.match(line)
        if blocked:
            mig_blocked.add(int(blocked.group("gpu")))
            continue
        error = _RUNTIME_ERROR.match(line)
        if error:
            runtime_error = runtime_error or error.group("text")
            continue
        unread += 1
        if unread <= _MAX_LINE_WARNINGS:
            reader.warnings.append(f"unrecognised line: {line[:200]}")
    if unread > _MAX_LINE_WARNINGS:
        reader.warnings.append(f"... and {unread - _MAX_LINE_WARNINGS} more unrecognised lines")
    tests = reader.tests + tests
    metadata = {**reader.metadata, **metadata}
    complete = reader.complete or (json_complete and not reader.rows_seen)
    if reader.rows_seen and not reader.complete:
        reader.warnings.append("diag table ends without its closing border: output truncated")
    if not tests and health is None and runtime_error is None and not mig_blocked:
        reader.warnings.append("no dcgmi diag table, JSON or health report found")
    id_cell = metadata.get("GPU Device IDs Detected", "")
    device_ids = [item.strip() for item in id_cell.split(",") if item.strip()]
    return DcgmiResult(
        kind=KIND,
        warnings=reader.warnings,
        dcgm_version=metadata.get("DCGM Version") or None,
        level=level,
        tests=tests,
        overall=_overall(tests, complete),
        driver_version=metadata.get("Driver Version Detected") or None,
        gpu_device_ids=device_ids,
        complete=complete,
        runtime_error=runtime_error,
        health=health,
        mig_blocked_gpus=sorted(mig_blocked),
    )


def facts(result: DcgmiResult) -> dict[str, Any]:
    """Contract JSON plus failed_tests, warned_tests, skipped_tests, overall, failed_gpus, health_overall and
    mig_blocked."""
    data = to_jsonable(result)
    data["failed_tests"] = [test.name for test in result.tests if test.result == "fail"]
    data["warned_tests"] = [test.name for test in result.tests if test.result == "warn"]
    data["skipped_tests"] = [test.name for test in result.tests if test.result == "skip"]
    failed_gpus = {gpu.gpu for test in result.tests for gpu in test.gpus if gpu.result == "fail"}
    failed_gpus |= {
        detail.gpu
        for test in result.tests
        if test.result == "fail" and not test.gpus
        for detail in test.details
        if detail.gpu is not None and detail.severity == "error"
    }
    data["failed_gpus"] = sorted(failed_gpus)
    data["health_overall"] = result.health.overall if result.health else None
    data["mig_blocked"] = bool(result.mig_blocked_gpus)
    return data


COLLECTOR = Collector(**registered(KIND), commands=(("dcgmi", "diag", "-r", "1"),), parse=parse, facts=facts)

# DCGM diagnostics on a drained GPU (NVIDIA dcgm-diagnostics docs, docs/sources.md#dcgm): level 3 adds the
# GEMM "diagnostic", targeted stress/power and memory bandwidth; level 4 adds memtest. Minutes of full
# load: invasive, and only for GPUs already drained (the silent-corruption runbook checks that).
DRAINED_COLLECTOR = Collector(
    **registered("dcgmi-diag-drained"),
    commands=(("dcgmi", "diag", "-r", "{dcgm_level}", "--json"),),
    parse=parse,
    facts=facts,
    invasive=True,
)
