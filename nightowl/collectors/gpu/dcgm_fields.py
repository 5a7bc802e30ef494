"""dcgm-exporter's metric and label names across its releases, read from nightowl/knowledge/dcgm_fields.csv and
dcgm_labels.csv (each row with its source), and DCGM's own "no value" answers.

dcgm-exporter renamed its metrics (1.x ``dcgm_*``; 4.9.0 the DCGM 4.7 names with new units; 4.10.0 the PCIe
and NVLink rates) and labels (``Hostname`` -> ``hostname`` in 4.8.3, ``DCGM_FI_DRIVER_VERSION`` ->
``DCGM_FI_SYSTEM_DRIVER_VERSION`` in 4.9.0). Each name maps to one fact in one normalised unit, so scrapes of
every release read to the same facts.
"""

from __future__ import annotations

import functools
import re
from typing import NamedTuple

from nightowl import knowledge

HEALTH, ERRORS, STAT = "health", "errors", "stat"


class FieldName(NamedTuple):
    field: str  # the fact it feeds
    metric: str  # the name a scrape shows
    unit: str  # the unit the exporter gives
    factor: float  # times this = the value in ``unit_out``
    unit_out: str
    versions: str
    kind: str  # health, errors or stat
    source: str


@functools.cache
def names() -> tuple[FieldName, ...]:
    """Every row of dcgm_fields.csv, in file order (a field's newest name first)."""
    rows = knowledge.read_csv(
        "dcgm_fields.csv", required=("field", "metric", "unit", "factor", "unit_out", "kind", "confidence", "source")
    )
    found = []
    for line, row in enumerate(rows, start=2):
        if row["kind"] not in (HEALTH, ERRORS, STAT):
            raise knowledge.KnowledgeError(f"dcgm_fields.csv: line {line}: kind {row['kind']!r}")
        source = knowledge.sourced(row, f"dcgm_fields.csv: line {line}", required=True)
        found.append(
            FieldName(
                row["field"],
                row["metric"],
                row["unit"],
                float(row["factor"]),
                row["unit_out"],
                row["versions"],
                row["kind"],
                source,
            )
        )
    return tuple(found)


@functools.cache
def by_metric() -> dict[str, FieldName]:
    """Metric name -> its row."""
    return {row.metric: row for row in names()}


@functools.cache
def fields(kind: str | None = None) -> tuple[str, ...]:
    """The facts, in file order, of one kind or of all."""
    return tuple(dict.fromkeys(row.field for row in names() if kind is None or row.kind == kind))


@functools.cache
def labels() -> dict[str, tuple[str, ...]]:
    """Key (uuid, hostname, driver_version ...) -> the labels that carry it, newest first."""
    rows = knowledge.read_csv("dcgm_labels.csv", required=("key", "label", "confidence", "source"))
    found: dict[str, list[str]] = {}
    for line, row in enumerate(rows, start=2):
        knowledge.sourced(row, f"dcgm_labels.csv: line {line}", required=True)
        found.setdefault(row["key"], []).append(row["label"])
    return {key: tuple(values) for key, values in found.items()}


def label(sample_labels: dict[str, str], key: str) -> str | None:
    """The first non-empty label that carries ``key``."""
    for name in labels().get(key, ()):
        value = sample_labels.get(name)
        if value:
            return value
    return None


# DCGM's "no value" answers (dcgm_structs.h DCGM_INT32_BLANK 0x7ffffff0, DCGM_INT64_BLANK 0x7ffffffffffffff0,
# DCGM_FP64_BLANK 140737488355328.0, each + 1 not found, + 2 not supported, + 3 not permissioned), which the
# exporter prints as numbers when it does not filter them (go-dcgm; dcgm-exporter internal/pkg/collector/utils.go).
# A float cannot tell the four int64 answers apart: they all read 2**63.
_SENTINEL_WORDS = ("blank", "not found", "not supported", "not permissioned")
_INT32_BLANK = 0x7FFFFFF0
_FP64_BLANK = 140737488355328.0
_INT64_FLOOR = float(0x7FFFFFFFFFFFFFF0)


def dcgm_error_value(value: float) -> str | None:
    """Which DCGM "no value" answer ``value`` is, or None for a measured value."""
    if value >= _INT64_FLOOR:
        return "DCGM int64 blank/not found/not supported/not permissioned"
    for base, width in ((_INT32_BLANK, "int32"), (_FP64_BLANK, "fp64")):
        offset = value - base
        if offset in (0, 1, 2, 3):
            return f"DCGM {width} {_SENTINEL_WORDS[int(offset)]}"
    return None


class ErrorMarker(NamedTuple):
    pattern: re.Pattern[str]
    means: str
    source: str


@functools.cache
def error_markers() -> tuple[ErrorMarker, ...]:
    """Every row of dcgm_errors.csv: what a DCGM that cannot answer health calls leaves in the text."""
    rows = knowledge.read_csv("dcgm_errors.csv", required=("pattern", "means", "confidence", "source"))
    found = []
    for line, row in enumerate(rows, start=2):
        where = f"dcgm_errors.csv: line {line}"
        pattern = knowledge.compile_pattern(row["pattern"], where)
        found.append(ErrorMarker(pattern, row["means"], knowledge.sourced(row, where, required=True)))
    return tuple(found)


MAX_ERROR_LINES = 5  # a log holds the same error every scrape interval: the first few say it


def dcgm_errors(lines: list[str]) -> list[dict[str, str]]:
    """The lines (not metric samples) that say DCGM could not answer, each with what it means, first few only."""
    found: list[dict[str, str]] = []
    for line in lines:
        text = line.strip()
        if not text or text[:5].upper() == "DCGM_" or text.startswith(("dcgm_", "# HELP", "# TYPE")):
            continue
        marker = next((m for m in error_markers() if m.pattern.search(text)), None)
        if marker is not None:
            found.append({"line": text[:300], "means": marker.means})
            if len(found) == MAX_ERROR_LINES:
                break
    return found
