"""Cheap first, deep when it matters (issue 46 item 3): nvidia-smi's ``--query-gpu`` CSV in front of ``-q -x``.

A full ``nvidia-smi -q -x`` of 8 GPUs is ~0.2 MB; a ``--query-gpu`` CSV of the fields node-health judges is
~2 KB. Where a run keeps read positions (engine/incremental.py: a sweep, ``check`` or ``watch`` with a history
store), this reader is the nvidia-smi collector's ``cursor``: the first read of a host is full, and its state
holds what node-health judges of it (``judged``), the time and the SHA-256 of the full text. A later read asks
the cheap form only; when every judged value the cheap form shows equals the full read's, the verdict is
drawn from the carried full text (its bundle named in ``carried.json``); otherwise the full form is read.

Never a false OK: a cheap read that fails, cannot be compared (unread lines, a field that reads as an error,
another GPU set) or shows any judged value changed is a full read, and so is a host whose last full read
found anything (``why_full``), one whose full read is older than ``--full-every`` (the engine's rule), and
``--full``. ``FORMS`` names, for each fact node-health judges, the form that provides it
(tests/engine/test_cheap_forms.py holds it against the runbook). Parsing never runs anything.
"""

from __future__ import annotations

import functools
import hashlib
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from nightowl.collectors.gpu.nvidia_smi import nvidia_smi_query as query

# The fields of the cheap form (nvidia-smi --help-query-gpu; R470+ names all of these, and an older driver
# that refuses one fails the cheap read, which is then a full read). fan/power/temperature are there for their
# error tokens (ERR!, [Unknown Error]): the sensors whose field errors node-health judges.
CHEAP_FIELDS: tuple[str, ...] = (
    "index",
    "pci.bus_id",
    "name",
    "uuid",
    "serial",  # not judged: the history's GPU rows (history/extract.py) name the board as a full read's do
    "driver_version",
    "utilization.gpu",
    "ecc.errors.uncorrected.volatile.total",
    "clocks_event_reasons.active",
    "pcie.link.gen.current",
    "pcie.link.gen.max",
    "pcie.link.width.current",
    "pcie.link.width.max",
    "retired_pages.pending",
    "remapped_rows.pending",
    "remapped_rows.failure",
    "temperature.gpu",
    "power.draw",
    "fan.speed",
)
# What judged_cheap requires of a cheap read: every field but serial (which names the board for the history).
_JUDGED_FIELDS = tuple(f for f in CHEAP_FIELDS if f != "serial")
# With its header: the CSV names its own columns, so query.parse reads it whatever the driver prints.
CHEAP_ARGV: tuple[str, ...] = ("nvidia-smi", "--query-gpu=" + ",".join(CHEAP_FIELDS), "--format=csv,nounits")
# The fabric collector's cheap fields (cheap_fabric.py: nvidia-smi --help-query-gpu, R570+).
FABRIC_HEALTH_FIELDS: tuple[str, ...] = (
    "fabric.health.bandwidth",
    "fabric.health.route_recovery_in_progress",
    "fabric.health.route_unhealthy",
    "fabric.health.access_timeout_recovery",
    "fabric.health.incorrect_configuration",
    "fabric.health.summary",
)
FABRIC_FIELDS: tuple[str, ...] = (
    "pci.bus_id",
    "name",
    "fabric.state",
    "fabric.status",
    "fabric.clique",
    "fabric.cluster",
    *FABRIC_HEALTH_FIELDS,
)
# One query of both collectors' cheap fields, tried first by each: every nvidia-smi call starts NVML on every GPU
# (up to a second without persistence mode), so a steady round asks it once, not twice, and a kept connection's
# batch sends it once for both (transports/kept.py: each kind takes the answer once). A driver that refuses a
# field fails the whole query (`Field "..." is not a valid field to query.`, exit 2): each collector's own
# cheap query is tried next, as ``Forms.cheap_argvs`` orders them.
SHARED_FIELDS: tuple[str, ...] = CHEAP_FIELDS + tuple(f for f in FABRIC_FIELDS if f not in CHEAP_FIELDS)
SHARED_ARGV: tuple[str, ...] = ("nvidia-smi", "--query-gpu=" + ",".join(SHARED_FIELDS), "--format=csv,nounits")
# The limit the shared query runs under for both readers: the longer of the two collectors' own (the fabric's
# 30 s; nvidia-smi's is 20 s: collectors/gpu/facts.yaml, tests/engine/test_cheap_forms.py holds them equal), so
# neither reader gets less time than it had alone, and whichever asks first, its answer is the other's too.
SHARED_SECONDS = 30.0
# The cheap query as earlier releases asked it (before ``serial``): a bundle they wrote replays as a cheap read.
EARLIER_CHEAP_ARGVS: tuple[tuple[str, ...], ...] = (
    ("nvidia-smi", "--query-gpu=" + ",".join(_JUDGED_FIELDS), "--format=csv,nounits"),
)
FULL_ARGVS: tuple[tuple[str, ...], ...] = (("nvidia-smi", "-q", "-x"), ("nvidia-smi", "-q"))

CHEAP, FULL = "cheap", "full"
# Each fact node-health (and its fragments) reads of the nvidia_smi namespace, and the form that provides it on
# a read that rests on the cheap form: "cheap" (the query shows it; a change forces the full read) or "full"
# (only the full form shows it: carried from the last full read, which any change of the GPU set, a GPU's
# identity or the driver forces, and which every finding and --full-every renew).
FORMS: dict[str, str] = {
    "gpu_count": CHEAP,
    "gpus_missing_or_unreadable": CHEAP,  # a GPU in error makes the cheap read uncomparable
    "errors": CHEAP,  # tool errors fail the query; field errors on the sensors queried
    "driver_not_loaded": CHEAP,  # the query fails: a full read
    "driver_not_loaded_messages": CHEAP,
    "dram_uncorrectable_volatile_gpus": CHEAP,
    "remap_pending_gpus": CHEAP,
    "remap_failure_gpus": CHEAP,
    "retired_pages_pending_gpus": CHEAP,
    "hw_slowdown_gpus": CHEAP,
    "pcie_degraded_gpus": CHEAP,
    "sku_judgement": CHEAP,  # the first GPU's name and the count
    "listing_complete": FULL,  # the GPU set: the cheap form's rows must be the full read's GPUs
    "virtualized": FULL,  # the GPUs' virtualization mode: fixed while the GPU set, UUIDs and driver are
    "gpus": FULL,  # node-health reads its fabric_state: fixed while the GPUs are (the fabric collector reads it)
    "read_form": CHEAP,  # which form this read rests on (the engine's)
}
# The judged lists: any GPU in one of them in the last full read makes every read full until it clears.
_FINDINGS = (
    "dram_uncorrectable_volatile_gpus",
    "remap_pending_gpus",
    "remap_failure_gpus",
    "retired_pages_pending_gpus",
    "hw_slowdown_gpus",
    "pcie_degraded_gpus",
    "gpus_missing_or_unreadable",
)


def _ids(values: Any) -> list[str]:
    return sorted(str(v) for v in values or ())


def _text(value: Any) -> str | None:
    return value.strip() if isinstance(value, str) and value.strip() else None


def judged_full(facts: Mapping[str, Any]) -> dict[str, Any]:
    """What node-health judges of a full read, in the shape ``judged_cheap`` gives the cheap form."""
    gpus = {str(g.get("pci")): g for g in facts.get("gpus") or [] if isinstance(g, Mapping)}
    return {
        "gpus": {pci: [_text(g.get("name")), _text(g.get("uuid"))] for pci, g in sorted(gpus.items())},
        "driver_version": _text(facts.get("driver_version")),
        "field_error_gpus": _ids({e.get("pci") for e in facts.get("errors") or [] if isinstance(e, Mapping)}),
        **{name: _ids(facts.get(name)) for name in _FINDINGS},
    }


def _yes(value: Any) -> bool:
    return isinstance(value, str) and value.strip().lower() in ("yes", "true", "enabled")


def errors_in(result: query.QueryResult, fields: tuple[str, ...]) -> list[query.QueryError]:
    """The errors of a query that concern ``fields`` (a shared query's other collector's fields aside), and
    every error that names no field (the tool's own)."""
    return [e for e in result.errors if e.field is None or e.field in fields]


@functools.lru_cache(maxsize=128)
def parsed(text: str) -> query.QueryResult:
    """``query.parse`` of a cheap read's CSV, kept for its other readers: both cheap readers judge the one answer
    of the query they share at once, and the history reads it again from the bundle at the round's end (kept
    for the last 128 texts: a fleet of more hosts parses it again there). 0.3 ms a parse of 8 GPUs. Pure; none
    of its readers changes what it returns (its rows are shared)."""
    return query.parse(text)


def judged_cheap(result: query.QueryResult) -> dict[str, Any] | str:
    """The cheap form's judged values, or why it cannot be compared with a full read."""
    if result.warnings or not result.gpus:
        return "the cheap read has unread lines" if result.warnings else "the cheap read lists no GPU"
    errors = errors_in(result, CHEAP_FIELDS)
    if errors:
        return "the cheap read shows an error: " + "; ".join(e.message for e in errors)[:200]
    missing = [name for name in _JUDGED_FIELDS if name not in result.fields]
    if missing:
        return "the cheap read lacks " + ", ".join(missing)
    facts = query.facts(result)
    rows = {str(query.gpu_id(g)): g for g in result.gpus}
    drivers = {_text(g.get("driver_version")) for g in result.gpus}
    return {
        "gpus": {pci: [_text(g.get("name")), _text(g.get("uuid"))] for pci, g in sorted(rows.items())},
        "driver_version": drivers.pop() if len(drivers) == 1 else None,
        "field_error_gpus": [],
        "gpus_missing_or_unreadable": [],  # a GPU in error: result.errors above, never comparable
        "dram_uncorrectable_volatile_gpus": _ids(facts["dram_uncorrectable_volatile_gpus"]),
        "remap_pending_gpus": _ids(p for p, g in rows.items() if _yes(g.get("remapped_rows.pending"))),
        "remap_failure_gpus": _ids(p for p, g in rows.items() if _yes(g.get("remapped_rows.failure"))),
        "retired_pages_pending_gpus": _ids(p for p, g in rows.items() if _yes(g.get("retired_pages.pending"))),
        "hw_slowdown_gpus": _ids(facts["hw_slowdown_gpus"]),
        "pcie_degraded_gpus": _ids(facts["pcie_degraded_gpus"]),
    }


# What a cheap read shows of the counters the history keeps per GPU (a full read's ECC, remapped rows and
# retired pages): under their query names, so a row never passes for a full read's.
_HISTORY_COUNTERS = (
    "ecc.errors.uncorrected.volatile.total",
    "remapped_rows.pending",
    "remapped_rows.failure",
    "retired_pages.pending",
)


def history_rows(text: str) -> list[dict[str, Any]]:
    """The GPUs a cheap read saw, as the history keeps a GPU (history/extract.py ``host_rows``): bus id, UUID,
    serial, name, and the counters the query shows (``read: cheap``). A steady round's bundle holds this CSV
    and not a full read, which it cites (carried.json); its GPUs are still seen. Pure; a text that is no
    query CSV gives no rows."""
    rows = []
    for gpu in parsed(text).gpus:
        pci = query.gpu_id(gpu)
        if isinstance(pci, str):
            counters: dict[str, Any] = {"read": CHEAP} | {name: gpu.get(name) for name in _HISTORY_COUNTERS}
            rows.append({"pci": pci, "uuid": _text(gpu.get("uuid")), "serial": _text(gpu.get("serial")),
                         "name": _text(gpu.get("name")), "counters": counters})  # fmt: skip
    return rows


def differs(cheap: Mapping[str, Any] | str, full: Mapping[str, Any]) -> str | None:
    """Why the cheap read does not stand for the full one (None: every judged value is the same)."""
    if isinstance(cheap, str):
        return cheap
    changed = [name for name in sorted(full) if cheap.get(name) != full[name]]
    return "the cheap read differs from the last full read in " + ", ".join(changed) if changed else None


@dataclass(frozen=True)
class Piece:
    """One read (engine/incremental.Piece): the text to parse after the carried one, the state, a gap, the form."""

    body: str
    state: dict[str, Any] | None
    gap: str | None = None
    read: str = FULL


@dataclass(frozen=True)
class Forms:
    """A collector's two forms: the cheap argvs (the first that answers is read: the shared query, then the
    collector's own), the full argvs, and what each says of the judged values (``judged_full`` of the full
    form's facts, ``judged_cheap`` of the cheap form's text: a dict, or why it cannot be compared), and
    ``findings``: the names of the judged values that hold a finding."""

    cheap_argvs: tuple[tuple[str, ...], ...]
    full_argvs: tuple[tuple[str, ...], ...]
    judged_full: Callable[[Mapping[str, Any]], dict[str, Any]]
    judged_cheap: Callable[[str], dict[str, Any] | str]
    findings: Callable[[Mapping[str, Any]], list[str]]
    # a full result that shows nothing, so the next full argv is tried (the last one's is judged no_data)
    nothing: Callable[[Any], bool] = lambda result: False


def _smi_findings(judged: Mapping[str, Any]) -> list[str]:
    return [name for name in _FINDINGS if judged.get(name)] + (["errors"] if judged.get("field_error_gpus") else [])


NVIDIA_SMI = Forms(
    (SHARED_ARGV, CHEAP_ARGV),
    FULL_ARGVS,
    judged_full,
    lambda text: judged_cheap(parsed(text)),
    _smi_findings,
    nothing=lambda result: not result.gpus and not result.errors,
)


class CheapFirst:
    """A collector's ``cursor`` that reads its cheap form from a saved full read and its full form otherwise
    (nvidia-smi's; the fabric's: cheap_fabric.py). ``parse`` and ``facts`` are the full form's, handed in by
    the collector's module (no import back to it)."""

    follows_since = False  # `--since` windows the kernel log, not these
    cites_text = True  # a cheap read adds no text: its bundle cites the full read's output (engine/incremental.py)
    # News in the same run's kernel-log read (a line it keeps: an Xid, NVRM, AER...) reads the full form at once:
    # the engine starts this read after that one (engine/incremental.waves).
    full_after = ("kernel-log",)
    applies_shows_nothing = True  # a full read that shows nothing is no_data, as the ordinary path has it
    # run once a host, under this limit, for both readers that ask it (engine/shared_reads.py)
    shares = {SHARED_ARGV: SHARED_SECONDS}

    def __init__(
        self, parse: Callable[[str], Any], facts: Callable[[Any], dict[str, Any]], forms: Forms = NVIDIA_SMI
    ) -> None:
        self.parse, self.facts, self.forms = parse, facts, forms
        self.shapes = forms.cheap_argvs  # collectors/readonly_commands.yaml lists them under the kind

    def commands(
        self, state: Mapping[str, Any] | None, params: Mapping[str, Any]
    ) -> list[tuple[tuple[str, ...], dict[str, str]]]:
        if state is None:
            return [(argv, {}) for argv in self.forms.full_argvs]
        return [(argv, {}) for argv in self.forms.cheap_argvs]

    def why_full(self, state: Mapping[str, Any]) -> str | None:
        """A saved full read the cheap form may not stand for: one that found something, or an old-shaped one."""
        judged = state.get("judged")
        if not isinstance(judged, Mapping):
            return "the saved full read has no judged values"
        found = self.forms.findings(judged)
        return "the last full read found " + ", ".join(found) + ": read in full until it clears" if found else None

    def read(self, argv: tuple[str, ...], stdout: str, state: Mapping[str, Any] | None) -> Piece:
        if tuple(argv) not in self.forms.cheap_argvs and tuple(argv) not in EARLIER_CHEAP_ARGVS:
            return self._full(tuple(argv), stdout)
        if state is None or not isinstance(state.get("judged"), Mapping):
            return Piece("", None, "no full read to compare the cheap read with", CHEAP)
        gap = differs(self.forms.judged_cheap(stdout), state["judged"])
        return Piece("", dict(state), gap, CHEAP)

    def _full(self, argv: tuple[str, ...], stdout: str) -> Piece:
        result = self.parse(stdout)
        if self.forms.nothing(result) and argv != self.forms.full_argvs[-1]:
            return Piece(stdout, None)  # shows nothing: the next full form is tried
        state = {
            "full_at": time.time(),
            "full_sha256": hashlib.sha256(stdout.encode("utf-8", "surrogateescape")).hexdigest(),
            "judged": self.forms.judged_full(self.facts(result)),
        }
        return Piece(stdout, state)

    def keep(self, text: str) -> str:
        return text  # the full text: a cheap read's verdict is drawn from it

    def join(self, carried: str, body: str) -> str:
        return body or carried  # a full read's text stands alone; a cheap read adds none
