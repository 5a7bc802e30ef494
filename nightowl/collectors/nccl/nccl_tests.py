"""nccl-tests ``*_perf`` output (docs/reference.md#parse-output, ``nccl-tests``).

Reads the text table of every nccl-tests generation (old header without ``root``, the 2.x
``#wrong`` header, the 2.18+ ``# nccl-tests version`` / ``# Collective test starting`` framing,
``-I 1`` per-iteration columns, ``-c 0`` ``N/A`` wrong columns, timestamp columns), MPI
``--tag-output`` prefixes, and the ``-J`` JSON file (format version 2, NVIDIA/nccl-tests
src/util.cu). Invasive: running it loads every GPU and the network for minutes.

busbw expectations: NVIDIA/nccl-tests doc/PERFORMANCE.md @a0b82b2 and docs/sources.md#nccl-tests; the
per-interconnect profiles, each with its source, live in nightowl/knowledge/busbw_profiles.csv.
"""

from __future__ import annotations

import functools
import json
import math
import re
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from nightowl import knowledge
from nightowl.collectors.base import Collector, registered, to_jsonable
from nightowl.collectors.pci import normalize_pci

KIND = "nccl-tests"

# OpenMPI --tag-output "[1,0]<stdout>:", srun --label "0: " (launcher prefixes, not nccl-tests text).
PREFIX = re.compile(r"^(?:\[\d+,\d+\]<std(?:out|err)>:|\d+: (?=[#\s\d]))")
TESTS_VERSION = re.compile(
    r"^# nccl-tests version (?P<version>\S+)"
    r"(?: nccl-headers=(?P<headers>\d+))?(?: nccl-library=(?P<library>\d+))?"
)
# "# Collective test starting: all_reduce_perf" and, at the end, "# Collective test concluded: ..." (2.18+).
TEST_STARTING = re.compile(r"^#? ?Collective test (?:starting|concluded): (?P<name>\S+)")
PERF_BINARY = re.compile(r"\b(?P<name>[a-z_]+?)_perf(?:_mpi)?\b")
# A paste rendered as Markdown loses the leading "#" of the header lines ("# nThread" -> "nThread"): optional.
CONFIG = re.compile(r"^#?\s*nThread (?P<nthreads>\d+) nGpus (?P<ngpus>\d+) minBytes (?P<min>\d+) maxBytes (?P<max>\d+)")
# "#  Rank  0 Group  0 Pid 1623025 on    host device  0 [0x1b] NVIDIA H100 80GB HBM3"; since 2.18 the
# bracket holds "dddd:bb:dd" (util.cu writeDeviceReport).
DEVICE = re.compile(
    r"^#?\s+Rank\s+(?P<rank>\d+)\s+(?:Group\s+(?P<group>\d+)\s+)?Pid\s+(?P<pid>\d+)\s+on\s+(?P<host>\S+)\s+"
    r"device\s+(?P<device>\d+)\s+\[(?P<bus>[^\]]*)\]\s*(?P<name>.*)$"
)
HEADER = re.compile(r"^#\s+(?:size\s+count|bytes\s+N)\s+type\s+")  # "bytes N": NCCL 1.x tests
ROW_START = re.compile(r"^\s*\d+\s+\d+\s+[A-Za-z]\w*\s+\S+")  # size count type (redop|root|time)
TIMESTAMP_TAIL = re.compile(r"\s+\d{4}-\d{2}-\d{2}\s+\d{2}:\d{2}:\d{2}\s*$")
OUT_OF_BOUNDS = re.compile(r"^# Out of bounds values\s*:\s*(?P<count>\d+)\s*(?P<status>OK|FAILED)?")
AVG_BUSBW = re.compile(r"^# Avg bus bandwidth\s*:\s*(?P<value>\S+)\s*(?P<status>OK|FAILED)?")
# Failures the run reports: harness errors (common.cu) and NCCL warnings interleaved with the table.
TEST_FAILURE = re.compile(r"(?:Test (?:NCCL|CUDA) failure|# error:|NCCL WARN).*$")

PROFILES_FILE = "busbw_profiles.csv"


def _positive(row: dict[str, str], column: str) -> float:
    where = f"{PROFILES_FILE}: profile {row['profile']}"
    try:
        value = float(row[column])
    except ValueError:
        raise knowledge.KnowledgeError(f"{where}: {column} {row[column]!r} is not a number") from None
    if not math.isfinite(value) or value <= 0:
        raise knowledge.KnowledgeError(f"{where}: {column} must be positive, got {row[column]!r}")
    return value


@functools.cache
def busbw_profiles() -> dict[str, dict[str, Any]]:
    """Expected all_reduce busbw per interconnect profile: ``{name: {"min_size": bytes, "busbw": GB/s}}``.

    Read once from nightowl/knowledge/busbw_profiles.csv (one row per profile, with its source,
    docs/sources.md#nccl-tests). Indicative only: replace with fleet baselines from known-good nodes.
    The dict is shared by every caller: read it, do not change it.
    """
    rows = knowledge.read_csv(PROFILES_FILE, required=("profile", "min_size", "busbw", "source"))
    profiles: dict[str, dict[str, Any]] = {}
    for row in rows:
        if row["profile"] in profiles:
            raise knowledge.KnowledgeError(f"{PROFILES_FILE}: profile {row['profile']} is listed twice")
        min_size = _positive(row, "min_size")
        if not min_size.is_integer():
            raise knowledge.KnowledgeError(f"{PROFILES_FILE}: profile {row['profile']}: min_size is not whole bytes")
        profiles[row["profile"]] = {"min_size": int(min_size), "busbw": _positive(row, "busbw")}
    return profiles


def __getattr__(name: str) -> Any:
    """``BUSBW_PROFILES``, read from nightowl/knowledge/busbw_profiles.csv on first use."""
    if name == "BUSBW_PROFILES":
        return busbw_profiles()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


DEFAULT_TOLERANCE = 0.2  # "treat >20% below the fleet baseline as degraded" (docs/sources.md#nccl-tests)


@dataclass
class Placement:
    time_us: float | None
    algbw: float | None
    busbw: float | None
    wrong: int | None
    per_iter: dict[str, float | None] | None = None
    # Before nccl-tests 2.10 the column was "error", the largest absolute error as a float (%6.0le),
    # not a count: it is kept here and ``wrong`` stays None (in-place alltoall/sendrecv printed a
    # non-zero error there that was not corruption). NCCL 1.x called it "res".
    max_error: float | None = None


@dataclass
class Row:
    size: int
    count: int
    type: str
    redop: str | None  # None: a layout without the column (old all_gather/sendrecv) or an empty cell
    root: int | None
    out_of_place: Placement | None
    in_place: Placement | None
    collective: str | None = None  # the test this row belongs to (several tests may be concatenated)


@dataclass
class Device:
    rank: int
    host: str
    device: int
    bus_id: str | None
    pci_bus: str | None
    name: str | None
    pid: int | None = None
    group: int | None = None


@dataclass
class Footer:
    out_of_bounds: int | None
    avg_busbw: float | None


@dataclass
class NcclTestsResult:
    kind: str = KIND
    collective: str | None = None
    collective_source: str | None = None  # "table": inferred from the columns, no header named it
    nranks: int | None = None
    rows: list[Row] = field(default_factory=list)
    avg_busbw: float | None = None
    out_of_bounds: int | None = None
    wrong_total: int | None = None
    devices: list[Device] = field(default_factory=list)
    footers: list[Footer] = field(default_factory=list)
    min_busbw_row: Row | None = None
    max_size_busbw: float | None = None
    tests_version: str | None = None
    nccl_version: str | None = None
    nthreads: int | None = None
    ngpus: int | None = None
    errors: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    # One entry per test found in the text (several *_perf outputs pasted one after the other).
    tests: list[dict[str, Any]] = field(default_factory=list)


# --------------------------------------------------------------------------------------------
# helpers
# --------------------------------------------------------------------------------------------


def _number(token: Any) -> float | None:
    """A finite float, else None (``nan``, ``N/A``, garbage, JSON strings)."""
    try:
        value = float(token)
    except (TypeError, ValueError):
        return None
    return value if math.isfinite(value) else None


def _wrong(token: Any) -> int | None:
    """``#wrong`` is printed with %g, so large counts look like ``1.04858e+06``; N/A -> None."""
    value = _number(token)
    return None if value is None else int(round(value))


def nccl_version_string(code: int) -> str | None:
    """NCCL_VERSION_CODE -> ``2.29.7``: major*10000+minor*100+patch since 2.9, *1000 before."""
    if code <= 0:
        return None
    if code >= 20900:
        return f"{code // 10000}.{code % 10000 // 100}.{code % 100}"
    return f"{code // 1000}.{code % 1000 // 100}.{code % 100}"


def _collective(name: str) -> str:
    return re.sub(r"_perf(?:_mpi)?$", "", name.rsplit("/", 1)[-1])


def _device_bus(raw: str) -> tuple[str | None, str | None]:
    """(normalised bus id, bus number as 2 hex digits). ``0x1b`` is the bus alone: no bus_id."""
    raw = raw.strip()
    if re.fullmatch(r"0[xX][0-9a-fA-F]{1,4}", raw):
        return None, f"{int(raw, 16):02x}"
    bus_id = normalize_pci(raw) if raw.count(":") >= 2 or "." in raw else None
    return bus_id, (bus_id.split(":")[1] if bus_id else None)


@dataclass
class _Layout:
    """Columns of the data rows, learned from the header (else inferred from the cells)."""

    has_root: bool | None = None
    per_iter: bool = False
    error_column: bool | None = None  # True: "error"/"res" (a float), False: "#wrong" (a count)
    # The tests met so far: [collective, rows read, closed by a footer]
    sections: list[list[Any]] = field(default_factory=lambda: [[None, 0, False]])

    def name(self, collective: str) -> None:
        """A test's name (its binary on a command line, "# Collective test starting")."""
        current = self.sections[-1]
        if current[1]:
            self.sections.append([collective, 0, False])
        else:
            current[0] = collective

    def row_collective(self) -> str | None:
        if self.sections[-1][2]:  # a table after a footer: another test
            self.sections.append([None, 0, False])
        self.sections[-1][1] += 1
        return self.sections[-1][0]  # type: ignore[no-any-return]


OLD_ERROR = re.compile(r"-?\d(?:\.\d+)?[eE][+-]\d\d")  # "2e-06", "0e+00": the pre-2.10 error cell


def _placement(tokens: list[str], per_iter: bool, error_column: bool | None = None) -> Placement:
    last = tokens[3]
    is_error = error_column if error_column is not None else OLD_ERROR.fullmatch(last) is not None
    placement = Placement(
        time_us=_number(tokens[0]),
        algbw=_number(tokens[1]),
        busbw=_number(tokens[2]),
        wrong=None if is_error else _wrong(last),
        max_error=_number(last) if is_error else None,
    )
    if per_iter and len(tokens) >= 8:
        keys = ("min_us", "max_us", "p99_us", "cv_pct")
        placement.per_iter = {key: _number(tok) for key, tok in zip(keys, tokens[4:8], strict=True)}
    return placement


def parse_row(line: str, layout: _Layout) -> Row | None:
    """One data row, or None when its columns do not fit any known layout."""
    line = TIMESTAMP_TAIL.sub("", line)
    tokens = line.split()
    try:
        size, count = int(tokens[0]), int(tokens[1])
    except (ValueError, IndexError):
        return None
    type_name, rest = tokens[2], tokens[3:]
    width = 8 if layout.per_iter else 4
    # Leading cells before the two placements: redop and root (2.10+), redop only (older all_reduce),
    # root only (older broadcast/reduce), neither (older all_gather/sendrecv), or an empty redop cell
    # (old alltoall). A redop is a word, a root a number.
    halves = 2 if len(rest) - 2 * width in (0, 1, 2) else 1  # 1: in-place only (util.cu NullBody)
    leading, cells = rest[: len(rest) - halves * width], rest[len(rest) - halves * width :]
    if len(leading) > 2 or len(cells) != halves * width:
        return None
    redop: str | None = None
    root: int | None = None
    for cell in leading:
        number = _number(cell)
        if number is None and redop is None and root is None:
            redop = cell
        elif number is not None and root is None and float(number).is_integer():
            root = int(number)
        else:
            return None
    error = layout.error_column
    in_place = _placement(cells[-width:], layout.per_iter, error)
    out_place = _placement(cells[:width], layout.per_iter, error) if halves == 2 else None
    return Row(size, count, type_name, redop, root, out_place, in_place, layout.row_collective())


# --------------------------------------------------------------------------------------------
# text
# --------------------------------------------------------------------------------------------


# The header lines' own words: "nThread 1 nGpus ...", "Rank  0 ... Pid", "Collective test starting:", the table header.
_HASHLESS = re.compile(
    r"^\s*(?:nThread \d+ nGpus|Rank\s+\d+\s+(?:Group\s+\d+\s+)?Pid|Collective test |size\s+count\s+type)"
)


def _parse_text(text: str, result: NcclTestsResult) -> None:
    layout = _Layout()
    for raw in text.replace("\x00", "").splitlines():
        line = PREFIX.sub("", raw, count=1).rstrip()
        if not line.strip():
            continue
        if line.startswith("#"):
            _comment(line, result, layout)
        elif _HASHLESS.match(line):  # a header line whose "#" a Markdown rendering dropped
            _comment("# " + line.strip(), result, layout)
        elif ROW_START.match(line):
            row = parse_row(line, layout)
            if row is None:
                result.warnings.append(f"unreadable row: {line.strip()[:200]}")
            else:
                result.rows.append(row)
        else:
            failure = TEST_FAILURE.search(line)
            if failure:
                result.errors.append(failure.group(0).strip()[:300])
            binary = PERF_BINARY.search(line)
            if binary:
                layout.name(binary.group("name"))
    _sections(result, layout)


# The reductions nccl-tests prints in its redop column (src/common.cu test_opNames).
REDUCTIONS = frozenset({"sum", "prod", "max", "min", "avg"})


def collective_from_table(rows: list[Row]) -> str | None:
    """The test a table with no header line must be, where its columns leave one answer (nccl-tests
    doc/PERFORMANCE.md): a reduction with no root (root -1, or no root column) is all_reduce, whose busbw is
    algbw * 2(n-1)/n (1x to 2x), or reduce_scatter, whose busbw is algbw * (n-1)/n (below 1x). Anything else
    (all_gather and alltoall share every column; one rank moves no bus bytes) names nothing: None."""
    if {r.redop for r in rows} - REDUCTIONS or not {r.root for r in rows} <= {-1, None}:
        return None  # (nccl-tests before 2.0 printed no root column)
    ratios = sorted(
        p.busbw / p.algbw
        for r in rows
        for p in (r.out_of_place, r.in_place)
        if p is not None and p.busbw and p.algbw and p.algbw >= 1.0  # two printed decimals: small values round
    )
    if not ratios:
        return None
    ratio = ratios[len(ratios) // 2]
    return "all_reduce" if 0.99 <= ratio <= 2.01 else "reduce_scatter" if 0.49 <= ratio < 0.99 else None


def _sections(result: NcclTestsResult, layout: _Layout) -> None:
    """Each test as itself; ``collective`` is the first test with rows (or the only name seen)."""
    with_rows = [s for s in layout.sections if s[1]]
    for collective, rows, _closed in with_rows:
        result.tests.append({"collective": collective, "rows": rows})
    named = [s[0] for s in layout.sections if s[0]]
    if result.collective is None:
        result.collective = with_rows[0][0] if with_rows else (named[0] if named else None)
    if result.collective is None and result.rows:  # a table pasted without its header names no test
        result.collective = collective_from_table(result.rows)
        result.collective_source = "table" if result.collective else None
        for test in result.tests:  # one unnamed table: the test is the one its columns name
            test["collective"] = test["collective"] or result.collective
    if len({s[0] for s in with_rows}) > 1:
        result.warnings.append(
            f"{len(with_rows)} tests in one output ({', '.join(str(s[0]) for s in with_rows)}); each row names its test"
        )


def _comment(line: str, result: NcclTestsResult, layout: _Layout) -> None:
    if HEADER.match(line):
        columns = line.lstrip("#").split()
        layout.has_root = "root" in columns
        layout.per_iter = "i_min" in columns
        layout.error_column = "#wrong" not in columns and ("error" in columns or "res" in columns)
        return
    starting = TEST_STARTING.match(line)
    if starting and "concluded" in line:  # names the test that just ran, when nothing named it before
        if layout.sections[-1][0] is None:
            layout.sections[-1][0] = _collective(starting.group("name"))
        return
    if starting:
        layout.name(_collective(starting.group("name")))
        return
    if AVG_BUSBW.match(line):
        layout.sections[-1][2] = True
    matchers = (
        (TESTS_VERSION, _on_version),
        (CONFIG, _on_config),
        (DEVICE, _on_device),
        (OUT_OF_BOUNDS, _on_out_of_bounds),
        (AVG_BUSBW, _on_avg_busbw),
    )
    for pattern, handler in matchers:
        match = pattern.match(line)
        if match:
            handler(match, result)
            return
    failure = TEST_FAILURE.search(line)
    if failure:
        result.errors.append(failure.group(0).strip()[:300])


def _on_version(match: re.Match[str], result: NcclTestsResult) -> None:
    result.tests_version = match.group("version")
    if match.group("library"):
        result.nccl_version = nccl_version_string(int(match.group("library")))


def _on_config(match: re.Match[str], result: NcclTestsResult) -> None:
    result.nthreads, result.ngpus = int(match.group("nthreads")), int(match.group("ngpus"))


def _on_device(match: re.Match[str], result: NcclTestsResult) -> None:
    bus_id, pci_bus = _device_bus(match.group("bus"))
    result.devices.append(
        Device(
            rank=int(match.group("rank")),
            host=match.group("host"),
            device=int(match.group("device")),
            bus_id=bus_id,
            pci_bus=pci_bus,
            name=match.group("name").strip() or None,
            pid=int(match.group("pid")),
            group=int(match.group("group")) if match.group("group") else None,  # no Group before 2.x
        )
    )


def _on_out_of_bounds(match: re.Match[str], result: NcclTestsResult) -> None:
    result.footers.append(Footer(int(match.group("count")), None))


def _on_avg_busbw(match: re.Match[str], result: NcclTestsResult) -> None:
    value = _number(match.group("value"))
    if result.footers and result.footers[-1].avg_busbw is None:
        result.footers[-1].avg_busbw = value
    else:
        result.footers.append(Footer(None, value))


# --------------------------------------------------------------------------------------------
# -J JSON (util.cu, JSON_FILE_VERSION 2)
# --------------------------------------------------------------------------------------------


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _int_or_none(value: Any) -> int | None:
    number = _number(value) if not isinstance(value, bool) else None
    return None if number is None else int(number)


def _json_placement(data: Any) -> Placement | None:
    if not isinstance(data, dict):
        return None
    time_us = data.get("time", data.get("cpu_time"))
    return Placement(
        _number(time_us), _number(data.get("alg_bw")), _number(data.get("bus_bw")), _wrong(data.get("nwrong"))
    )


def _json_device(dev: Any) -> Device | None:
    dev = _dict(dev)
    rank, device = _int_or_none(dev.get("rank")), _int_or_none(dev.get("device"))
    if rank is None or device is None:
        return None
    bus_id, pci_bus = _device_bus(str(dev.get("device_hex", "")))
    info = dev.get("device_info")
    return Device(
        rank,
        str(dev.get("hostname")),
        device,
        bus_id,
        pci_bus,
        info if isinstance(info, str) else None,
        _int_or_none(dev.get("pid")),
        _int_or_none(dev.get("group")),
    )


def _json_row(item: Any) -> Row | None:
    item = _dict(item)
    size, count = _int_or_none(item.get("size")), _int_or_none(item.get("count"))
    if size is None or count is None:
        return None
    root = _int_or_none(str(item.get("root", "")).strip())
    return Row(
        size,
        count,
        str(item.get("type")),
        str(item.get("redop")),
        root,
        _json_placement(item.get("out_of_place")),
        _json_placement(item.get("in_place")),
    )


def _parse_json(document: dict[str, Any], result: NcclTestsResult) -> None:
    args = _list(document.get("args"))
    if args and isinstance(args[0], str):
        result.collective = _collective(args[0])
    result.nccl_version = (
        nccl_version_string(document["nccl_version"]) if _int_or_none(document.get("nccl_version")) else None
    )
    config = _dict(document.get("config"))
    result.nthreads, result.ngpus = _int_or_none(config.get("nthreads")), _int_or_none(config.get("ngpus"))
    for dev in _list(config.get("devices")):
        device = _json_device(dev)
        if device is not None:
            result.devices.append(device)
    for item in _list(document.get("results")):
        row = _json_row(item)
        if row is None:
            result.warnings.append(f"unreadable JSON result: {str(item)[:200]}")
        else:
            result.rows.append(row)
    oob, avg = document.get("out_of_bounds"), document.get("average_bus_bandwidth")
    if isinstance(oob, dict) or isinstance(avg, dict):
        result.footers.append(Footer(_int_or_none(_dict(oob).get("count")), _number(_dict(avg).get("bandwidth"))))
    result.errors.extend(str(e) for e in _list(document.get("errors")) if e)


def _json_document(text: str) -> dict[str, Any] | None:
    stripped = text.strip()
    if not stripped.startswith("{"):
        return None
    try:
        document = json.loads(stripped)
    except ValueError:
        return None
    return document if isinstance(document, dict) else None


# --------------------------------------------------------------------------------------------
# parse / derive
# --------------------------------------------------------------------------------------------


def _row_busbw(row: Row) -> float | None:
    """busbw of a row: out-of-place (what people quote), else in-place."""
    for placement in (row.out_of_place, row.in_place):
        if placement is not None and placement.busbw is not None:
            return placement.busbw
    return None


def _row_min_busbw(row: Row) -> float | None:
    values = [p.busbw for p in (row.out_of_place, row.in_place) if p is not None and p.busbw is not None]
    return min(values) if values else None


def _derive(result: NcclTestsResult) -> None:
    if result.devices:
        result.nranks = len({d.rank for d in result.devices})
    if result.footers:
        averages = [f.avg_busbw for f in result.footers if f.avg_busbw is not None]
        counts = [f.out_of_bounds for f in result.footers if f.out_of_bounds is not None]
        # Several footers = several independent runs in one output: keep the worst, say so.
        result.avg_busbw = min(averages) if averages else None
        result.out_of_bounds = sum(counts) if counts else None
        if len(result.footers) > 1:
            result.warnings.append(
                f"{len(result.footers)} result footers (several independent runs, e.g. nccl-tests built "
                "without MPI=1 under mpirun); avg_busbw is the lowest, out_of_bounds the sum"
            )
    seen = Counter((r.size, r.type, r.redop, r.root) for r in result.rows)
    duplicated = sorted({key[0] for key, times in seen.items() if times > 1})
    if duplicated:
        result.warnings.append(f"duplicate rows for sizes {duplicated} (several runs interleaved); all kept")
    wrongs = [
        p.wrong for r in result.rows for p in (r.out_of_place, r.in_place) if p is not None and p.wrong is not None
    ]
    result.wrong_total = sum(wrongs) if wrongs else None
    measured = [r for r in result.rows if _row_min_busbw(r) is not None]
    if measured:
        result.min_busbw_row = min(measured, key=lambda r: _row_min_busbw(r) or 0.0)
        largest = max(r.size for r in result.rows)
        result.max_size_busbw = next(
            (_row_busbw(r) for r in reversed(result.rows) if r.size == largest and _row_busbw(r) is not None),
            None,
        )


def parse(text: str) -> NcclTestsResult:
    result = NcclTestsResult()
    document = _json_document(text)
    if document is not None:
        _parse_json(document, result)
    else:
        _parse_text(text, result)
    _derive(result)
    if text.strip() and not result.rows and not result.footers and not result.errors:
        result.warnings.append("no nccl-tests result table found")
    return result


def _baseline_table(baseline: Any) -> tuple[dict[int, float] | None, dict[str, Any] | None]:
    if isinstance(baseline, str):
        return None, busbw_profiles().get(baseline)
    if isinstance(baseline, dict) and "busbw" in baseline:
        return None, baseline
    if isinstance(baseline, dict):
        table: dict[int, float] = {}
        for size, busbw in baseline.items():
            value = _number(busbw)
            if value is not None and _number(size) is not None:
                table[int(float(size))] = value
        return table, None
    return None, None


def judge_busbw(result: Any, baseline: Any, tolerance: float = DEFAULT_TOLERANCE) -> dict[str, Any]:
    """Compare the whole size curve with a baseline.

    ``baseline`` is ``{size: busbw}`` (from a known-good node), a ``busbw_profiles()`` name, or a
    profile ``{"min_size": bytes, "busbw": GB/s}``. Per size the better of out-of-place and
    in-place busbw is used: a slow link slows both, a one-off dip in one column is noise.
    ``status`` is ``slow`` when any compared size is below ``(1 - tolerance)`` of its baseline,
    ``unknown`` when nothing could be compared.
    """
    data = result if isinstance(result, dict) else to_jsonable(result)
    rows = data.get("rows") if isinstance(data, dict) else None
    table, profile = _baseline_table(baseline)
    threshold = 1.0 - tolerance
    compared, below = 0, []
    worst: float | None = None
    for row in rows or []:
        expected = _expected(row.get("size"), table, profile)
        measured = [_number((row.get(k) or {}).get("busbw")) for k in ("out_of_place", "in_place")]
        values = [v for v in measured if v is not None]
        if expected is None or expected <= 0 or not values:
            continue
        compared += 1
        ratio = max(values) / expected
        worst = ratio if worst is None else min(worst, ratio)
        if ratio < threshold:
            below.append(
                {
                    "size": row.get("size"),
                    "busbw": max(values),
                    "expected": expected,
                    "ratio": round(ratio, 4),
                }
            )
    status = "unknown" if compared == 0 else ("slow" if below else "ok")
    return {
        "status": status,
        "worst_ratio": None if worst is None else round(worst, 4),
        "rows_below": below,
        "compared": compared,
        "threshold": threshold,
    }


def _expected(size: Any, table: dict[int, float] | None, profile: dict[str, Any] | None) -> float | None:
    if not isinstance(size, int):
        return None
    if table is not None:
        return table.get(size)
    if profile is not None and size >= int(profile.get("min_size", 0)):
        return _number(profile.get("busbw"))
    return None


def facts(result: NcclTestsResult) -> dict[str, Any]:
    data: dict[str, Any] = to_jsonable(result)
    data["large_msg_busbw"] = result.max_size_busbw
    data["failed"] = bool((result.wrong_total or 0) > 0 or (result.out_of_bounds or 0) > 0)
    data["completed"] = bool(result.footers)  # a crashed or killed run prints no footer
    errors = [p.max_error for r in result.rows for p in (r.out_of_place,) if p is not None and p.max_error is not None]
    # pre-2.10 "error" column: the largest out-of-place error (in-place alltoall/sendrecv printed noise)
    data["max_error"] = max(errors) if errors else None
    data["collectives"] = [t["collective"] for t in result.tests]
    busy = [e for e in result.errors if GPU_BUSY in e]
    data["gpu_busy_failures"] = len(busy)
    # every rank stopped on a GPU that is held or in reset (CUDA "busy or unavailable"): not the fabric
    data["gpu_busy"] = bool(busy) and not result.rows
    return data


# CUDA's text of cudaErrorDevicesUnavailable, which nccl-tests prints as "Test CUDA failure ... '<text>'".
GPU_BUSY = "busy or unavailable"


def shows_nothing(text: str) -> bool:
    """An output without one result row measured nothing: no_data, never "within the baseline"; a run whose
    ranks failed on busy GPUs says why it measured nothing, so it is read."""
    result = parse(text)
    return not result.rows and not any(GPU_BUSY in e for e in result.errors)


COLLECTOR = Collector(
    **registered(KIND),
    # Reading a saved result is not invasive; the path is the runbook parameter `nccl_tests_file`.
    commands=(("cat", "--", "{nccl_tests_file}"),),
    parse=parse,
    facts=facts,
    shows_nothing=shows_nothing,
)

RUN_COLLECTOR = Collector(
    **registered("nccl-tests-run"),
    commands=(("all_reduce_perf", "-b", "8", "-e", "8G", "-f", "2", "-g", "{gpus_per_node}"),),
    parse=parse,
    facts=facts,
    invasive=True,
)
