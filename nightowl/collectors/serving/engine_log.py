"""`engine-log`: start-up and runtime log of vLLM, SGLang, TGI (or TensorRT-LLM) (docs/reference.md#parse-output).

The log comes from whichever source the runbook parameters name, tried in order: a file
(``{engine_log_file}``), a Docker container (``{container}``, stderr folded in: vLLM logs to
stderr), a Kubernetes pod (``{pod}`` in ``{namespace}``, the previous container first since that
is the one that died), then a systemd unit (``{engine_unit}``).

How the OOM phase is found (docs/sources.md#vllm-startup): start-up goes through the phases of
``ENGINE_PHASES`` in order and logs a marker (``MARKERS``) when one completes. A process that
died did so in the phase AFTER the last completed marker, unless the traceback itself names the
phase (``TRACEBACK_HINTS``; the earliest phase named wins, since an outer frame such as
``profile_run`` contains inner ones such as ``_dummy_sampler_run``) or the error message is
phase-specific (``FAILURES``: KV admission, TGI warm-up, SGLang pool). Multi-process engines
(V1 ``(EngineCore_DP0 pid=...)``, ``(Worker_TP0 ...)``, Ray workers) interleave their output and
the API process ends with a generic "Engine core initialization failed", so the whole log is
searched, never only its tail. The first failure in the log is reported (later ones are usually
other ranks hitting the same wall).

``last_phase`` takes the values of ``PHASE_ORDER``: ``ready`` means start-up finished (engine
init done, API up, or the log shows served requests), so an OOM after it is ``runtime``. When a
failure hits a phase whose end marker was already logged (V0 prints "# GPU blocks" and then
refuses the max length), that phase is not counted as completed. ``oom`` also covers the
non-CUDA refusals that end start-up for lack of memory; its extra ``kind`` says which:
``cuda-oom``, ``kv-admission``, ``engine-oom`` (TGI/SGLang messages), ``gpu-occupied``,
``host-oom-kill``. Exit code 137 alone sets ``exit_code``/``killed``, not ``oom``: only an
OOM-kill record makes it a host OOM (docs/sources.md#host-oom). The phase and pattern tables,
each row with its source, live in nightowl/knowledge/engine_log.yaml.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any, NamedTuple

from nightowl import knowledge
from nightowl.collectors.base import Collector, registered, to_jsonable
from nightowl.collectors.base import number as _number
from nightowl.collectors.normalise import compose_service, without_compose_prefix
from nightowl.collectors.serving import engine_args as _args
from nightowl.collectors.serving import engine_log_eras as _eras
from nightowl.collectors.serving.replica_compare import KV_FULL

KIND = "engine-log"
LOG_LINES = "5000"

# Global order of phases; ``runtime`` follows ``ready``, ``host`` is the container/kernel OOM killer.
PHASE_ORDER = ("device-init", "weights", "profiling", "kv-cache", "cuda-graph", "sampler-warmup", "ready")
OOM_PHASES = (*PHASE_ORDER[:-1], "runtime", "host")

EDGES = ("start", "end", "during")


class Marker(NamedTuple):
    engine: str | None  # None: generic (uvicorn), says nothing about the engine
    phase: str
    # "end": the phase completed; "start": it began (so the one before completed);
    # "during": a sub-step of that phase is running (implies nothing about earlier phases)
    edge: str
    pattern: re.Pattern[str]
    source: str


class Hint(NamedTuple):
    """A function name / message inside an OOM traceback that names the phase."""

    phase: str
    pattern: re.Pattern[str]
    source: str


class Failure(NamedTuple):
    kind: str  # cuda-oom | kv-admission | engine-oom | gpu-occupied | host-oom-kill
    phase: str | None  # None: found from hints and markers
    pattern: re.Pattern[str]
    source: str


class ErrorClass(NamedTuple):
    kind: str
    pattern: re.Pattern[str]
    source: str


# The tables of numbers (and a few texts) logged at start-up; in each, the last occurrence wins.
VALUE_TABLES = ("kv_cache", "settings", "kv_too_small", "startup_limits", "kv_extras")
CASTS = (None, "float", "text")
# How workers' reports of one field combine: None, the last occurrence wins; "min", the smallest any worker of
# one start reported (``_PerWorkerMin``).
ACROSS_WORKERS = (None, "min")


class Value(NamedTuple):
    """A value logged at start-up: the first group of ``pattern`` is ``field`` of ``table``."""

    table: str  # one of VALUE_TABLES
    field: str
    pattern: re.Pattern[str]
    source: str
    cast: str | None  # None: a number (else not read); "float": a number as float; "text": kept as text
    across_workers: str | None = None  # one of ACROSS_WORKERS


class _Tables(NamedTuple):
    engine_phases: dict[str, tuple[str, ...]]
    markers: tuple[Marker, ...]
    hints: tuple[Hint, ...]
    failures: tuple[Failure, ...]
    errors: tuple[ErrorClass, ...]
    values: tuple[Value, ...]
    signatures: tuple[tuple[str, re.Pattern[str]], ...]  # (engine, pattern): a matching line votes for it


def _choice(value: Any, allowed: tuple[str | None, ...], where: str) -> Any:
    if value not in allowed:
        raise knowledge.KnowledgeError(f"{where}: {value!r} is not one of {', '.join(map(str, allowed))}")
    return value


def _pattern(entry: dict[str, Any], where: str) -> re.Pattern[str]:
    regex = str(knowledge.field(entry, "regex", where))
    return knowledge.compile_pattern(regex, where, ignore_case=bool(entry.get("ignore_case")))


def _entries(document: dict[str, Any], key: str) -> list[tuple[str, dict[str, Any]]]:
    where = "engine_log.yaml"
    entries = document.get(key) or []
    # each row's source as readers show it: "[confidence] source" (knowledge.sourced checks the notation)
    return [
        (f"{where}: {key}[{index}]", {**entry, "source": knowledge.sourced(entry, f"{where}: {key}[{index}]")})
        for index, entry in enumerate(entries)
    ]


@functools.cache
def tables() -> _Tables:
    """nightowl/knowledge/engine_log.yaml, checked against PHASE_ORDER and the marker edges."""
    document = knowledge.read_yaml("engine_log.yaml") or {}
    phases = {
        engine: tuple(_choice(p, PHASE_ORDER, f"engine_log.yaml: engine_phases.{engine}") for p in spec["phases"])
        for engine, spec in (document.get("engine_phases") or {}).items()
    }
    markers = tuple(
        Marker(e.get("engine"), _choice(e.get("phase"), PHASE_ORDER, w), _choice(e.get("edge"), EDGES, w),
               _pattern(e, w), e["source"])
        for w, e in _entries(document, "markers")
    )  # fmt: skip
    hints = tuple(
        Hint(_choice(e.get("phase"), OOM_PHASES, w), _pattern(e, w), e["source"])
        for w, e in _entries(document, "traceback_hints")
    )
    failures = tuple(
        Failure(str(knowledge.field(e, "kind", w)), _choice(e.get("phase"), (*OOM_PHASES, None), w),
                _pattern(e, w), e["source"])
        for w, e in _entries(document, "failures")
    )  # fmt: skip
    errors = tuple(
        ErrorClass(str(knowledge.field(e, "kind", w)), _pattern(e, w), e["source"])
        for w, e in _entries(document, "error_classes")
    )
    values = tuple(
        Value(_choice(e.get("table"), VALUE_TABLES, w), str(knowledge.field(e, "field", w)), _pattern(e, w),
              e["source"], _choice(e.get("cast"), CASTS, w), _choice(e.get("across_workers"), ACROSS_WORKERS, w))
        for w, e in _entries(document, "values")
    )  # fmt: skip
    signatures = tuple(
        (str(knowledge.field(e, "engine", w)), _pattern(e, w)) for w, e in _entries(document, "engine_signatures")
    )
    return _Tables(phases, markers, hints, failures, errors, values, signatures)


@functools.cache
def engine_names() -> dict[str, str]:
    """engine -> the name verdicts print (engine_log.yaml engine_names), e.g. sglang -> SGLang."""
    return {
        str(knowledge.field(e, "engine", w)): str(knowledge.field(e, "name", w))
        for w, e in _entries(knowledge.read_yaml("engine_log.yaml") or {}, "engine_names")
    }


_LAZY: dict[str, Callable[[], Any]] = {
    "ENGINE_PHASES": lambda: tables().engine_phases,
    "MARKERS": lambda: tables().markers,
    "TRACEBACK_HINTS": lambda: tables().hints,
    "FAILURES": lambda: tables().failures,
    "ERROR_CLASSES": lambda: tables().errors,
    "VALUES": lambda: tables().values,
    "ENGINE_SIGNATURES": lambda: tables().signatures,
}


def __getattr__(name: str) -> Any:
    """The pattern tables, read from nightowl/knowledge/engine_log.yaml on first use."""
    if name in _LAZY:
        return _LAZY[name]()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


VERSION_PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("vllm", re.compile(r"vLLM API server version v?(\d[\w.+-]*)")),  # corpus 27466
    ("vllm", re.compile(r"Initializing an? (?:V1 )?LLM engine \(v(\d[\w.+-]*)\)")),  # engine banner [S]
    ("sglang", re.compile(r"sglang(?:==| version:? ?v?)(\d[\w.+-]*)", re.I)),  # [M]
    ("tensorrt-llm", re.compile(r"TensorRT-LLM version: ?v?(\d[\w.+-]*)")),  # [M]
)

_SIZE = _eras.SIZE
OOM_FIELDS: tuple[tuple[str, re.Pattern[str]], ...] = (  # PyTorch OOM message, torch >= 2.1 wording
    ("tried_gib", re.compile(r"Tried to allocate " + _SIZE)),
    ("total_gib", re.compile(r"total capac\w* of " + _SIZE)),  # TGI 1.3 era torch spells "capacty"
    ("free_gib", re.compile(r"of which " + _SIZE + r" is free")),
    ("process_in_use_gib", re.compile(r"(?:this process|Process \d+) has " + _SIZE + r" memory in use")),
    ("allocated_by_pytorch_gib", re.compile(r"Of the allocated memory " + _SIZE + r" is allocated by PyTorch")),
    ("private_pools_gib", re.compile(r"with " + _SIZE + r" allocated in private pools")),
    ("reserved_unallocated_gib", re.compile(_SIZE + r" is reserved by PyTorch but unallocated")),
)
# torch < 2.1: "(GPU 0; 79.15 GiB total capacity; 70.1 GiB already allocated; 2.19 MiB free;
# 75.3 GiB reserved in total by PyTorch)" [M]
OLD_OOM = re.compile(
    r"\(GPU (\d+); "
    + _SIZE
    + r" total capacity; "
    + _SIZE
    + r" already allocated; "
    + _SIZE
    + r" free; (?:"
    + _SIZE
    + r" allowed; )?"  # torch < 2.1 with a memory fraction set (TGI issue 866)
    + _SIZE
    + r" reserved in total by PyTorch"
)
OOM_GPU = re.compile(r"\bGPU (\d+)\b")


KILLED = re.compile(r"\bKilled\b(?! process)|status=9/KILL|\bSIGKILL\b")  # shell / systemd / k8s wording
STATS = (  # periodic load lines: vLLM loggers (V0 "Pending", V1 "Waiting"), SGLang batch lines
    ("running", re.compile(r"Running: (\d+) reqs|#running-req: (\d+)")),
    ("waiting", re.compile(r"(?:Waiting|Pending): (\d+) reqs|#queue-req: (\d+)")),
    ("kv_cache_usage", re.compile(r"GPU KV cache usage: ([\d.]+)%|token usage: ([\d.]+)")),
    ("prefix_cache_hit_rate", re.compile(r"[Pp]refix cache hit rate: ([\d.]+)%")),
)
# vLLM's periodic stats line (V0 every 5 s while steps run: vllm/engine/metrics.py LoggingStatLogger, V1 every
# 10 s): the tokens it moved in and out since the last one, and the requests it holds. SGLang's decode line is
# no such measure: it is printed every 40 decode steps, so a stalled SGLang prints nothing, and the first line
# after an idle spell averages over the spell (a healthy 1.06 token/s in fixtures/corpus/serving).
THROUGHPUT = (
    re.compile(r"Avg prompt throughput: ([\d.]+) tokens/s"),
    re.compile(r"Avg generation throughput: ([\d.]+) tokens/s"),
)
# Under 1 token/s in and out with requests admitted or queued: no batch is being stepped (a healthy decode of
# even one request on the slowest GPU moves several tokens a second); 3 lines in a row span 10 s or more.
STALL_TOKENS_PER_S = 1.0
# The API server shutting down (uvicorn's lifespan lines, vLLM's launcher): after the server was ready, the engine no
# longer serves, whatever stopped it (uvicorn/server.py, uvicorn/lifespan/on.py; vllm/entrypoints/launcher.py).
SHUTDOWN = re.compile(r"Shutting down FastAPI HTTP server|Application shutdown complete|Finished server process \[")


@dataclass(frozen=True)
class OOM:
    phase: str | None
    tried_gib: float | None
    free_gib: float | None
    total_gib: float | None
    kind: str
    gpu: int | None = None
    process_in_use_gib: float | None = None
    allocated_by_pytorch_gib: float | None = None
    private_pools_gib: float | None = None
    reserved_unallocated_gib: float | None = None
    # PyTorch allocator: reserved-but-unallocated >= the failed request -> fragmentation
    fragmentation: bool | None = None
    text: str = ""


@dataclass(frozen=True)
class KVCache:
    gpu_blocks: int | None
    tokens: int | None
    max_concurrency: float | None
    cpu_blocks: int | None = None
    block_size: int | None = None
    tokens_per_request: int | None = None
    kv_cache_gib: float | None = None


@dataclass(frozen=True)
class KVTooSmall:
    max_model_len: int | None
    kv_tokens: int | None
    estimated_max_len: int | None
    needed_gib: float | None = None
    available_gib: float | None = None


@dataclass(frozen=True)
class EngineError:
    kind: str
    text: str


@dataclass(frozen=True)
class EngineLog:
    kind: str = KIND
    engine: str | None = None
    version: str | None = None
    last_phase: str | None = None
    oom: OOM | None = None
    kv_cache: KVCache | None = None
    in_progress_phase: str | None = None
    kv_too_small: KVTooSmall | None = None
    errors: tuple[EngineError, ...] = ()
    exit_code: int | None = None
    killed: bool = False
    gpu_memory_utilization: float | None = None
    mem_fraction_static: float | None = None
    max_model_len: int | None = None
    weights_gib: float | None = None
    total_gpu_gib: float | None = None
    preemptions_total: int | None = None
    last_stats: dict[str, float | None] | None = None
    stalled_stats: int = 0  # the last stats lines in a row with requests but (almost) no tokens moved
    shut_down: bool = False  # the server shut down after it was last ready
    saturated_stats: int = 0  # the last stats lines in a row with requests waiting and the KV cache full
    warnings: tuple[str, ...] = ()
    # new keys (issue 13): start-up limits of every era (TGI warm-up span, SGLang summary, TRT-LLM table)
    startup_limits: dict[str, Any] = field(default_factory=dict)
    kv_too_small_derived: bool = False  # from "# GPU blocks" x block size < model length (vLLM <= 0.4)
    # issue 17: the start-up arguments (V1 "non-default args", V0 engine config), for drift across replicas
    engine_args: dict[str, str] = field(default_factory=dict)
    engine_args_source: str | None = None  # non-default | config


def parse(text: str) -> EngineLog:
    """Engine log text -> contract result; never raises, unreadable input yields nulls."""
    lines = _engine_services(_eras.normalize(text.splitlines()))
    engine = _engine(lines)
    completed, in_progress = _progress(lines)
    oom = _first_failure(lines, engine, completed, in_progress)
    if oom is not None and oom.phase is not None and _failed_within(oom.phase, completed):
        completed = _previous_phase(engine, oom.phase)  # e.g. "# GPU blocks" logged, admission failed
    if oom is not None and oom.kind == "cuda-oom" and _eras.oom_holders(oom.text)["oom_holder"] == "other":
        oom = replace(oom, kind="gpu-occupied")  # the message lists this process AND another one
    settings = values(lines, "settings")
    limits = values(lines, "startup_limits")
    kv = values(lines, "kv_cache")
    for name, value in _eras.kv_extras(values(lines, "kv_extras")).items():
        kv.setdefault(name, value)
    too_small = values(lines, "kv_too_small")
    derived = None if too_small else _eras.derived_kv_too_small(engine, kv, {**limits, **settings})
    if derived:  # vLLM refuses to start then ("max seq len ... larger than ... KV cache"): cut from the paste
        too_small = derived
        if completed is not None and _failed_within("kv-cache", completed):
            completed = _previous_phase(engine, "kv-cache")
        if oom is None:
            text = (
                f"derived: {kv['gpu_blocks']} GPU blocks hold {derived['kv_tokens']} tokens, "
                f"less than the model length {derived['max_model_len']}"
            )
            oom = OOM(phase="kv-cache", tried_gib=None, free_gib=None, total_gib=None, kind="kv-admission", text=text)
    engine_args, engine_args_source = _args.from_log(lines)
    warnings = []
    if text.strip() and engine is None and completed is None and oom is None and not settings:
        warnings.append("no engine, start-up phase or failure line recognised")
    return EngineLog(
        engine=engine,
        version=_version(lines),
        last_phase=completed,
        oom=oom,
        kv_cache=KVCache(**{f: kv.get(f) for f in KVCache.__dataclass_fields__}) if kv else None,
        in_progress_phase=in_progress if in_progress != completed else None,
        kv_too_small=KVTooSmall(**{f: too_small.get(f) for f in KVTooSmall.__dataclass_fields__})
        if too_small
        else None,
        errors=_errors(lines),
        exit_code=settings.get("exit_code"),
        killed=any(KILLED.search(line) for line in lines) or bool(oom and oom.kind == "host-oom-kill"),
        gpu_memory_utilization=settings.get("gpu_memory_utilization"),
        mem_fraction_static=settings.get("mem_fraction_static"),
        max_model_len=settings.get("max_model_len") or limits.get("max_model_len"),
        weights_gib=settings.get("weights_gib"),
        total_gpu_gib=settings.get("total_gpu_gib"),
        preemptions_total=settings.get("preemptions_total"),
        last_stats=_last_stats(lines),
        stalled_stats=_stalled_stats(lines),
        shut_down=_shut_down_after_ready(lines),
        saturated_stats=_saturated_stats(lines),
        warnings=tuple(warnings),
        startup_limits={k: v for k, v in limits.items() if k != "max_model_len"},
        kv_too_small_derived=derived is not None,
        engine_args=engine_args,
        engine_args_source=engine_args_source,
    )


def _engine_services(lines: list[str]) -> list[str]:
    """A docker compose log whose services include one engine: that engine's lines as it printed them (its
    ``vllm-1  | `` prefix off, so a traceback starts its line) and the lines with no service; another service's
    access line or error is not the engine's. A log with no engine service, or several, as it is."""
    named = [(compose_service(line), line) for line in lines]
    services: dict[str, list[str]] = {}
    for service, line in named:
        if service is not None:
            services.setdefault(service, []).append(line)
    engines = {name for name, own in services.items() if _engine(own) is not None}
    if len(engines) != 1:
        return lines
    return [line if service is None else without_compose_prefix(line) for service, line in named
            if service is None or service in engines]  # fmt: skip


def _failed_within(phase: str, completed: str | None) -> bool:
    """The failure hit a phase the markers call completed: that phase did not complete after all."""
    if phase not in PHASE_ORDER or completed is None:
        return False
    return PHASE_ORDER.index(phase) <= PHASE_ORDER.index(completed)


def _engine(lines: list[str]) -> str | None:
    """The engine whose signatures and markers appear on most lines; a tie means unknown."""
    votes: dict[str, int] = {}
    for line in lines:
        for engine, pattern in tables().signatures:
            if pattern.search(line):
                votes[engine] = votes.get(engine, 0) + 1
        for marker in tables().markers:
            if marker.engine and marker.pattern.search(line):
                votes[marker.engine] = votes.get(marker.engine, 0) + 1
        for engine, pattern in VERSION_PATTERNS:
            if pattern.search(line):
                votes[engine] = votes.get(engine, 0) + 1
    ranked = sorted(votes.items(), key=lambda item: -item[1])
    if not ranked or (len(ranked) > 1 and ranked[0][1] == ranked[1][1]):
        return None
    return ranked[0][0]


def _progress(lines: list[str]) -> tuple[str | None, str | None]:
    """(last completed phase, phase seen running after it) from the markers anywhere in the log."""
    completed = -1
    running = -1  # phase of the latest start/during marker
    for line in lines:
        for marker in tables().markers:
            if not marker.pattern.search(line):
                continue
            index = PHASE_ORDER.index(marker.phase)
            if marker.edge == "end":
                completed = max(completed, index)
                continue
            if marker.edge == "start":
                completed = max(completed, index - 1)
            running = index
    in_progress = PHASE_ORDER[running] if running > completed else None
    return (PHASE_ORDER[completed] if completed >= 0 else None), in_progress


def _next_phase(engine: str | None, completed: str | None) -> str | None:
    if completed is None:
        return None
    sequence = tables().engine_phases.get(engine or "vllm", PHASE_ORDER)
    later = [p for p in sequence if PHASE_ORDER.index(p) > PHASE_ORDER.index(completed)]
    return later[0] if later else "runtime"


def _previous_phase(engine: str | None, phase: str) -> str | None:
    sequence = tables().engine_phases.get(engine or "vllm", PHASE_ORDER)
    earlier = [p for p in sequence if PHASE_ORDER.index(p) < PHASE_ORDER.index(phase)]
    return earlier[-1] if earlier else None


def _hinted_phase(lines: list[str]) -> str | None:
    """Earliest phase named by a traceback frame or message anywhere in the log."""
    named = {hint.phase for hint in tables().hints for line in lines if hint.pattern.search(line)}
    return next((phase for phase in OOM_PHASES if phase in named), None)


def _first_failure(lines: list[str], engine: str | None, completed: str | None, in_progress: str | None) -> OOM | None:
    for line in lines:
        for failure in tables().failures:
            if failure.pattern.search(line):
                phase = failure.phase or _hinted_phase(lines) or in_progress or _next_phase(engine, completed)
                return _oom_from_line(line, failure.kind, phase)
    return None


def _oom_from_line(line: str, kind: str, phase: str | None) -> OOM:
    sizes: dict[str, float | None] = {}
    for name, pattern in OOM_FIELDS:
        match = pattern.search(line)
        sizes[name] = _eras.gib(match.group(1), match.group(2)) if match else None
    old = OLD_OOM.search(line)
    if old and sizes["total_gib"] is None:
        total, allocated, free, reserved = (_eras.gib(old.group(i), old.group(i + 1)) for i in (2, 4, 6, 10))
        sizes.update(total_gib=total, free_gib=free, allocated_by_pytorch_gib=allocated)
        if reserved is not None and allocated is not None:
            sizes["reserved_unallocated_gib"] = reserved - allocated
    for name, value in _eras.oom_sizes(line).items():
        if sizes.get(name) is None:
            sizes[name] = value
    gpu = OOM_GPU.search(line) if kind == "cuda-oom" else None
    tried, spare = sizes["tried_gib"], sizes["reserved_unallocated_gib"]
    return OOM(
        phase=phase,
        kind=kind,
        gpu=int(gpu.group(1)) if gpu else None,
        fragmentation=(spare >= tried) if tried is not None and spare is not None else None,
        text=line.strip()[:400],
        **sizes,
    )


# A vLLM worker's line prefix, "(Worker_TP1 pid=104299)": its name tells the tensor/pipeline rank.
_WORKER_TAG = re.compile(r"^\((?P<tag>[A-Za-z_]+\d*(?: rank=\d+)?) pid=\d+\)")


class _PerWorkerMin:
    """The KV budget of one start is the smallest any worker reported (the engine sizes every worker's cache
    alike, vllm/v1/core/kv_cache_utils.py get_kv_cache_configs): a worker that reports again starts a new group."""

    def __init__(self) -> None:
        self.tags: set[str] = set()
        self.value: float | None = None

    def add(self, line: str, number: float) -> float:
        tag_match = _WORKER_TAG.match(line.strip())
        tag = tag_match.group("tag") if tag_match else ""
        if not tag or tag in self.tags or self.value is None:
            self.tags, self.value = set(), number
        else:
            self.value = min(self.value, number)
        if tag:
            self.tags.add(tag)
        return self.value


def values(lines: list[str], table: str) -> dict[str, Any]:
    """The last value of each field of ``table`` (nightowl/knowledge/engine_log.yaml ``values``), or for a row
    marked ``across_workers: min`` the smallest any worker of one start reported (``_PerWorkerMin``)."""
    rows = [row for row in tables().values if row.table == table]
    found: dict[str, Any] = {}
    per_worker = {row.field: _PerWorkerMin() for row in rows if row.across_workers == "min"}
    for line in lines:
        for row in rows:
            match = row.pattern.search(line)
            if not match:
                continue
            number = _number(match.group(1))
            if number is not None and row.cast != "text":
                number = per_worker[row.field].add(line, number) if row.across_workers == "min" else number
                found[row.field] = float(number) if row.cast == "float" else number
            elif row.cast == "text":
                found[row.field] = match.group(1).strip()
    return found


def _version(lines: list[str]) -> str | None:
    version = None
    for line in lines:
        for _, pattern in VERSION_PATTERNS:
            match = pattern.search(line)
            if match:
                version = match.group(1).rstrip(".,")
    return version


# The error class of a line no other class names (knowledge/engine_log.yaml, last of error_classes).
UNCLASSIFIED = "unclassified-exception"


def _errors(lines: list[str]) -> tuple[EngineError, ...]:
    seen: dict[str, EngineError] = {}
    for line in lines:
        for error in tables().errors:
            if error.kind not in seen and error.pattern.search(line):
                seen[error.kind] = EngineError(error.kind, line.strip()[:400])
    if len(seen) > 1:  # a class names the cause: an exception line besides it is that cause's own
        seen.pop(UNCLASSIFIED, None)
    return tuple(seen.values())


def _saturated_stats(lines: list[str]) -> int:
    """How many of the last stats lines, in a row up to the log's end, show requests waiting while the KV cache is
    full (first-look's KV_FULL): the engine cannot admit them for want of cache, not for want of work."""
    return _trailing_stats(lines, lambda _, v: (v["waiting"] or 0) >= 1 and (v["kv_cache_usage"] or 0) >= KV_FULL)


def _last_stats(lines: list[str]) -> dict[str, float | None] | None:
    """Load figures of the last periodic stats line (usage and hit rate as 0-1 fractions)."""
    for line in reversed(lines):
        values = _stats_of(line)
        if values is not None:
            return values
    return None


def _stats_of(line: str) -> dict[str, float | None] | None:
    """A periodic stats line's load figures (usage and hit rate as 0-1 fractions), None for any other line."""
    values: dict[str, float | None] = {}
    for name, pattern in STATS:
        match = pattern.search(line)
        number = next((g for g in match.groups() if g is not None), None) if match else None
        values[name] = float(number) if number is not None else None
    if values["running"] is None or values["kv_cache_usage"] is None:
        return None
    if "GPU KV cache usage" in line:
        values["kv_cache_usage"] = values["kv_cache_usage"] / 100.0
    if values["prefix_cache_hit_rate"] is not None:
        values["prefix_cache_hit_rate"] = values["prefix_cache_hit_rate"] / 100.0
    return values


def _shut_down_after_ready(lines: list[str]) -> bool:
    """Whether the server shut down after it last said it was ready (a later start-up may follow)."""
    ready = tables().markers
    last_ready = last_shutdown = -1
    for index, line in enumerate(lines):
        if SHUTDOWN.search(line):
            last_shutdown = index
        elif any(m.phase == "ready" and m.pattern.search(line) for m in ready):
            last_ready = index
    return last_ready >= 0 and last_shutdown > last_ready


def _stalled_stats(lines: list[str]) -> int:
    """How many of the last stats lines, in a row up to the log's end, show requests running or waiting but
    under STALL_TOKENS_PER_S moved in (prompt) and out (generation): a stuck or pathologically slow engine."""
    return _trailing_stats(lines, _stalled)


def _stalled(line: str, values: dict[str, float | None]) -> bool:
    generation, prompt = THROUGHPUT[1].search(line), THROUGHPUT[0].search(line)
    if generation is None:  # not vLLM's periodic line (SGLang's decode line is no such measure)
        return False
    moved = max(float(generation.group(1)), float(prompt.group(1)) if prompt is not None else 0.0)
    return (values["running"] or 0) + (values["waiting"] or 0) >= 1 and moved < STALL_TOKENS_PER_S


def _trailing_stats(lines: list[str], holds: Callable[[str, dict[str, float | None]], bool]) -> int:
    """How many of the last periodic stats lines, in a row up to the log's end, ``holds`` is true of."""
    count = 0
    for line in reversed(lines):
        values = _stats_of(line)
        if values is None:
            continue
        if not holds(line, values):
            break
        count += 1
    return count


def facts(result: EngineLog) -> dict[str, Any]:
    """Contract JSON plus `oom_phase`, `oom_kind`, `has_oom`, `fragmentation`, `kv_admission_failed`,
    `error_kinds`, `kv_tokens`, `kv_max_concurrency`, `engine_name`."""
    out: dict[str, Any] = to_jsonable(result)
    oom = result.oom
    out["has_oom"] = oom is not None
    out["oom_phase"] = oom.phase if oom else None
    out["oom_kind"] = oom.kind if oom else None
    out["fragmentation"] = oom.fragmentation if oom else None
    out["kv_admission_failed"] = bool(oom and oom.kind == "kv-admission") or result.kv_too_small is not None
    out["error_kinds"] = [error.kind for error in result.errors]
    out["kv_tokens"] = result.kv_cache.tokens if result.kv_cache else None
    out["kv_max_concurrency"] = result.kv_cache.max_concurrency if result.kv_cache else None
    out["engine_name"] = engine_names().get(result.engine or "")
    # issue 13: who holds the GPU at an OOM, memory outside this process's PyTorch, start-up limits
    out.update(_eras.oom_holders(oom.text if oom else ""))
    out["oom_outside_pytorch_gib"] = _eras.outside_pytorch_gib(out["oom"])
    out.update({f"limit_{name}": value for name, value in result.startup_limits.items()})
    return out


COLLECTOR = Collector(
    **registered(KIND),
    commands=(
        ("tail", "-n", LOG_LINES, "--", "{engine_log_file}"),
        # positional arguments, never pasted into the script: the shell only folds stderr in
        ("sh", "-c", 'exec docker logs --tail "$1" -- "$2" 2>&1', "docker-logs", LOG_LINES, "{container}"),
        ("kubectl", "logs", "--previous", "--tail", LOG_LINES, "-n", "{namespace}", "{pod}"),
        ("kubectl", "logs", "--tail", LOG_LINES, "-n", "{namespace}", "{pod}"),
        # last: journalctl exits 0 with "-- No entries --" for a unit that does not exist
        ("journalctl", "-u", "{engine_unit}", "--no-pager", "-n", LOG_LINES),
    ),
    parse=parse,
    facts=facts,
    invasive=False,
)
