"""`dcgm-metrics`: NVIDIA dcgm-exporter's telemetry, per GPU, from the exporter's own /metrics or from Prometheus.

On Kubernetes the evidence within reach is often telemetry, not a shell: no kernel log, no nvidia-smi. This
reads the exporter's scrape (``--param dcgm_url=http://NODE:9400/metrics``, a read-only GET as the engines'
/metrics) or a window of the same series for one node from Prometheus (``triage --prometheus URL --node
NAME``: nightowl/collectors/gpu/dcgm_prometheus.py). Every metric name of every exporter release maps to one
fact in one unit (nightowl/knowledge/dcgm_fields.csv, a source per row); labels likewise (dcgm_labels.csv).

``DCGM_FI_DEV_XID_ERRORS`` is the last Xid DCGM saw since the exporter started, not a count: it is read as
``xid_last``, a code. ``DCGM_EXP_XID_ERRORS_TOTAL`` (4.8.3+, opt-in) is a counter per Xid code, read as totals
(``xid_totals``); a code whose total grew since the window start (a Prometheus window), or any counted code
(one scrape: the window is the exporter's life) is an Xid of the window (``xid_new_codes``), as the xid
runbook reads the kernel log's Xids since ``--since``. What telemetry cannot see is said, never assumed: the
kernel log was not read, so the Xid's text, its process and any earlier Xid are unknown (``NOT_SEEN``).

A blind monitor is not a healthy GPU (docs/reference.md#dcgm-metrics): a GPU whose health fields are absent,
answered with DCGM's "no value" sentinels, or stopped (stale for more than two scrape intervals in a
Prometheus window) is not judged, nor is any GPU of a text where DCGM says it cannot answer (its library and
host engine versions disagree, "API version mismatch": nightowl/knowledge/dcgm_errors.csv), and
``health_reporting`` is false with ``blind_reason`` saying why; the xid and node-health runbooks then end
"cannot judge: DCGM is not reporting health" (exit 3). So does an exporter that answers its GET with another
HTTP status than 200 (dcgm-exporter answers 500 when it cannot gather from DCGM): the read runs without curl's
``--fail`` and writes the status after the body (``# nightowl: HTTP 500``), so the answer is evidence about the
monitor, not a failed command with curl's generic text.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from nightowl.collectors.base import Collector, registered, to_jsonable
from nightowl.collectors.gpu import dcgm_fields, dcgm_prometheus
from nightowl.collectors.gpu.dcgm_fields import ERRORS, HEALTH
from nightowl.collectors.pci import normalize_pci
from nightowl.collectors.serving import metrics
from nightowl.collectors.serving.metrics import Sample

KIND = "dcgm-metrics"
EXPORTER_URL = "http://127.0.0.1:9400/metrics"  # dcgm-exporter's default listener (:9400)
# The exporter's HTTP status, written after its body (a comment line of the exposition format): no ``--fail``,
# so a 500 is read as the monitor's answer. curl reads write-out names in any case; upper case keeps them apart
# from the engine's lower-case {parameter} placeholders.
HTTP_MARK = "# nightowl: HTTP "
WRITE_OUT = "\\n" + HTTP_MARK + "%{HTTP_CODE}\\n"
_HTTP_LINE = re.compile(r"(?:^|\n)" + re.escape(HTTP_MARK) + r"(\d{3})[ \t]*\n?\Z")
HTTP_OK = 200
COMMANDS: tuple[tuple[str, ...], ...] = (
    ("curl", "-sS", "--max-time", "5", "-w", WRITE_OUT, "--", "{dcgm_url}"),
    ("curl", "-sS", "--fail", "--max-time", "20", "--", "{dcgm_prometheus_query}"),
)
NOT_SEEN = "kernel log not read: the Xid is DCGM's last value; its text, its process and any earlier Xid are unknown"
NOT_SEEN_WITH_TOTALS = (
    "kernel log not read: DCGM's Xid totals count each code since the exporter started; their text, their process"
    " and any Xid before that are unknown"
)
FELL_OFF_BUS = 79
IDENTITY = ("gpu", "uuid", "pci_bus_id", "device", "model", "hostname", "driver_version")
# label-keyed series: one value per label value (DCGM_EXP_XID_ERRORS_COUNT and _TOTAL per code, per clock event,
# per watch)
KEYED = {"xid_window_count": "xid", "xid_total": "xid", "health_status": "health_watch"}
CLOCK_EVENTS = "DCGM_EXP_CLOCK_EVENTS_COUNT"  # per clock_event label (3.3.5-3.4.0+, NVIDIA/dcgm-exporter#261)
HEALTH_FAIL, HEALTH_WARN = 20, 10  # DCGM_HEALTH_RESULT_FAIL / _WARN (dcgm_structs.h)


@dataclass
class _Gpu:
    identity: dict[str, str | None]
    mig_instances: set[str] = field(default_factory=set)
    pods: set[tuple[str, str, str]] = field(default_factory=set)
    values: dict[str, dict[str, float]] = field(default_factory=dict)  # field -> link/key -> value
    keyed: dict[str, dict[str, float]] = field(default_factory=dict)
    error_values: dict[str, str] = field(default_factory=dict)
    stale: set[str] = field(default_factory=set)
    moved: set[str] = field(default_factory=set)  # fields whose series changed inside a Prometheus window
    xid_new: dict[str, float] = field(default_factory=dict)  # Xid code -> how much its total grew in the window


@dataclass(frozen=True)
class DcgmScrape:
    kind: str = KIND
    source: str | None = None  # exporter (a scrape) or prometheus (a window)
    gpus: tuple[dict[str, Any], ...] = ()
    gpu_count: int = 0
    hostnames: tuple[str, ...] = ()
    driver_versions: tuple[str, ...] = ()
    metrics_read: tuple[str, ...] = ()
    unmapped: tuple[str, ...] = ()
    health_reporting: bool = False
    blind_reason: str | None = None
    dcgm_errors: tuple[dict[str, str], ...] = ()  # lines saying DCGM could not answer (knowledge/dcgm_errors.csv)
    window: dict[str, Any] | None = None
    warnings: tuple[str, ...] = ()


# Per sample: its series stopped; its series moved in the window; how much it grew since the window start (a
# Prometheus window), or None (one scrape: the exporter's life is the window).
Mark = tuple[bool, bool, float | None]


def parse(text: str) -> DcgmScrape:
    """A dcgm-exporter scrape, or a Prometheus query_range answer of its series -> per-GPU facts; never raises."""
    if dcgm_prometheus.is_answer(text):
        window = dcgm_prometheus.read_answer(text)
        marks: list[Mark] = [(window.stale(i), window.moved[i], window.rise[i]) for i in range(len(window.samples))]
        stale = sum(old for old, _, _ in marks)
        win = {"end": window.end, "step": window.step, "series": len(window.samples), "stale_series": stale}
        return _scrape("prometheus", window.samples, marks, window.warnings, win)
    text, status = http_status(text)
    if status is not None and status != HTTP_OK:
        return _not_a_scrape(text, status)
    read = metrics.read_samples(text)
    errors = dcgm_fields.dcgm_errors(text.splitlines())
    return _scrape("exporter", read.samples, [(False, False, None)] * len(read.samples), read.warnings, None, errors)


def http_status(text: str) -> tuple[str, int | None]:
    """The exporter's body and the HTTP status the read wrote after it (None: a saved scrape without it)."""
    found = _HTTP_LINE.search(text)
    if found is None:
        return text, None
    return text[: found.start()], int(found.group(1))


def _not_a_scrape(body: str, status: int) -> DcgmScrape:
    """An exporter that answered another status than 200: a blind monitor (no GPU judged), its body quoted."""
    said = next((line.strip()[:160] for line in body.splitlines() if line.strip()), "")
    answer = f"HTTP {status}" if status else "no HTTP status"
    line = f"{answer}: {said}" if said else answer
    means = f"dcgm-exporter answered {answer} instead of its metrics"
    return DcgmScrape(
        source="exporter",
        health_reporting=False,
        blind_reason=f"{means}" + (f" ({said!r})" if said else ""),
        dcgm_errors=({"line": line, "means": means},),
        warnings=(f"the metrics URL answered {answer}: no scrape read",),
    )


def _scrape(
    source: str,
    samples: list[Sample],
    marks: list[Mark],
    warnings: list[str],
    window: dict[str, Any] | None,
    errors: list[dict[str, str]] | None = None,
) -> DcgmScrape:
    table = dcgm_fields.by_metric()
    gpus: dict[tuple[str, str], _Gpu] = {}
    read, unmapped = set(), set()
    for sample, (old, moved, rise) in zip(samples, marks, strict=True):
        sample = _base_name(sample, table)
        row = table.get(sample.name)
        if row is None and sample.name != CLOCK_EVENTS:
            if sample.name.upper().startswith("DCGM_"):
                base = sample.name.removesuffix("_total")  # the parser's suffix on an upper-case DCGM name
                unmapped.add(base if base.isupper() else sample.name)
            continue
        gpu = _gpu_of(sample, gpus)
        if gpu is None:
            continue
        read.add(sample.name)
        _add(gpu, sample, row, old, rise)
        if moved and row is not None:
            gpu.moved.add(row.field)
    rows = [_gpu_facts(g) for g in gpus.values()]
    if window is not None and window["end"] is None and samples:
        warnings = [*warnings, "Prometheus' answer has no query_time series: staleness not judged"]
    reporting, why = _reporting(rows, source, window, errors or [])
    return DcgmScrape(
        source=source,
        gpus=tuple(rows),
        gpu_count=len(rows),
        hostnames=tuple(sorted({r["hostname"] for r in rows if r["hostname"]})),
        driver_versions=tuple(sorted({r["driver_version"] for r in rows if r["driver_version"]})),
        metrics_read=tuple(sorted(read)),
        unmapped=tuple(sorted(unmapped)),
        health_reporting=reporting,
        blind_reason=why,
        dcgm_errors=tuple(errors or ()),
        window=window,
        warnings=tuple(warnings),
    )


def _base_name(sample: Sample, table: dict[str, dcgm_fields.FieldName]) -> Sample:
    """The exporter's own name: the exposition parser adds ``_total`` to the samples of a family typed counter
    (prometheus_client), which DCGM's names (DCGM_FI_DEV_PCIE_REPLAY_COUNTER) do not carry."""
    if sample.name.endswith("_total") and sample.name not in table and sample.name[: -len("_total")] in table:
        return sample._replace(name=sample.name[: -len("_total")])
    return sample


def _gpu_of(sample: Sample, gpus: dict[tuple[str, str], _Gpu]) -> _Gpu | None:
    labels = sample.labels
    identity = {key: dcgm_fields.label(labels, key) for key in IDENTITY}
    handle = identity["uuid"] or identity["gpu"]
    if handle is None:
        return None  # an NVSwitch, CPU or unlabelled series: not a GPU's
    key = (identity["hostname"] or "", handle)
    gpu = gpus.get(key)
    if gpu is None:
        gpu = gpus[key] = _Gpu(identity)
    else:
        for name, value in identity.items():
            gpu.identity[name] = gpu.identity[name] or value
    instance = dcgm_fields.label(labels, "mig_instance")
    if instance:
        gpu.mig_instances.add(instance)
    pod = dcgm_fields.label(labels, "pod")
    if pod:
        gpu.pods.add((dcgm_fields.label(labels, "namespace") or "", pod, dcgm_fields.label(labels, "container") or ""))
    return gpu


def _add(gpu: _Gpu, sample: Sample, row: dcgm_fields.FieldName | None, stale: bool, rise: float | None) -> None:
    name = row.field if row is not None else "clock_events_window"
    if not math.isfinite(sample.value):
        gpu.error_values.setdefault(name, f"{sample.value}")
        return
    sentinel = dcgm_fields.dcgm_error_value(sample.value)
    if sentinel is not None:
        gpu.error_values.setdefault(name, sentinel)
        return
    if stale:
        gpu.stale.add(name)
        return
    value = sample.value * (row.factor if row is not None else 1.0)
    key_label = KEYED.get(name) or ("clock_event" if row is None else None)
    if key_label is not None:
        key = sample.labels.get(key_label) or "?"
        store = gpu.keyed.setdefault(name, {})
        store[key] = max(store.get(key, value), value)
        if name == "xid_total":  # a scrape's window is the exporter's life: all its total is new in it
            new = value if rise is None else rise
            gpu.xid_new[key] = max(gpu.xid_new.get(key, new), new)
        return
    if row is not None and row.kind == "stat":
        gpu.values.setdefault(name, {}).setdefault("", value)  # MIG lines repeat the GPU's value: the first
        return
    link = sample.labels.get("nvlink", "")  # a per-link series sums over links; MIG repeats take the max
    links = gpu.values.setdefault(name, {})
    links[link] = max(links.get(link, value), value)


def _gpu_facts(gpu: _Gpu) -> dict[str, Any]:
    ident = gpu.identity
    pci = normalize_pci(ident["pci_bus_id"]) if ident["pci_bus_id"] else None
    out: dict[str, Any] = {
        "name": pci or ident["uuid"] or f"gpu {ident['gpu']}",
        "gpu": ident["gpu"],
        "uuid": ident["uuid"],
        "pci": pci,
        "device": ident["device"],
        "model": ident["model"],
        "hostname": ident["hostname"],
        "driver_version": ident["driver_version"],
        "mig_instances": sorted(gpu.mig_instances, key=lambda v: (len(v), v)),
        "pods": [{"namespace": n, "pod": p, "container": c} for n, p, c in sorted(gpu.pods)],
    }
    for name in dcgm_fields.fields():
        if name in KEYED:
            continue
        links = gpu.values.get(name)
        out[name] = _number(math.fsum(links.values())) if links else None
    out["xid_window"] = {k: _number(v) for k, v in sorted(gpu.keyed.get("xid_window_count", {}).items())}
    out["xid_totals"] = {k: _number(v) for k, v in sorted(gpu.keyed.get("xid_total", {}).items())}
    out["xid_new"] = {k: _number(v) for k, v in sorted(gpu.xid_new.items()) if v > 0}
    out["health_watches"] = {k: _number(v) for k, v in sorted(gpu.keyed.get("health_status", {}).items())}
    out["clock_events_window"] = {k: _number(v) for k, v in sorted(gpu.keyed.get("clock_events_window", {}).items())}
    out["error_values"] = dict(sorted(gpu.error_values.items()))
    out["stale_fields"] = sorted(gpu.stale)
    out["health_fields"] = sorted(
        n for n in dcgm_fields.fields(HEALTH) if out.get(n) is not None or (n in KEYED and gpu.keyed.get(n))
    )
    out["health_watches_contradicted"] = _contradicted(gpu, out["health_watches"])
    if out["health_watches_contradicted"]:
        out["health_fields"].remove("health_status")
    return out


def _contradicted(gpu: _Gpu, watches: dict[str, Any]) -> list[str]:
    """The error fields that moved in the window while every DCGM health watch of the GPU still passed: the
    watches are not watching (health calls failing while stats work, as DCGM 4.7's "API version mismatch",
    NVIDIA/DCGM#314), so their zeros say nothing."""
    if not watches or any(watches.values()):
        return []
    counters = set(dcgm_fields.fields(HEALTH)) | set(dcgm_fields.fields(ERRORS))
    return sorted(name for name in gpu.moved & counters if name != "health_status")


def _number(value: float) -> int | float:
    return int(value) if value.is_integer() and abs(value) < 2**53 else value


def _reporting(
    rows: list[dict[str, Any]], source: str, window: dict[str, Any] | None, errors: list[dict[str, str]]
) -> tuple[bool, str | None]:
    """Whether DCGM reports health for every GPU, and if not, why (a blind monitor is not a healthy GPU)."""
    if errors:  # DCGM said it cannot answer: whatever fields still read, its health zeros say nothing
        first = errors[0]
        return False, f"DCGM says it cannot answer, {first['means']} ({first['line'][:160]!r})"
    if not rows:
        return False, "no GPU series in the " + ("window" if source == "prometheus" else "scrape")
    if window is not None and window["series"] and window["stale_series"] == window["series"]:
        return False, (
            f"every DCGM series stopped more than {dcgm_prometheus.STALE_AFTER_STEPS} scrape intervals before the"
            f" window's end (step {window['step']} s): the exporter or its scrape is gone"
        )
    blind = [r for r in rows if not r["health_fields"] or r["health_watches_contradicted"]]
    if not blind:
        return True, None
    reasons = sorted({_why_blind(r) for r in blind})
    return False, f"GPU {', '.join(r['name'] for r in blind)}: " + "; ".join(reasons)


def _why_blind(row: dict[str, Any]) -> str:
    if row["health_watches_contradicted"]:
        moved = ", ".join(row["health_watches_contradicted"])
        return f"DCGM's health watches all pass while {moved} moved in the window: the watches are not watching"
    health = set(dcgm_fields.fields(HEALTH))
    errors = sorted(f"{n} ({w})" for n, w in row["error_values"].items() if n in health)
    if errors:
        return "DCGM answered its error value for " + ", ".join(errors)
    stale = sorted(n for n in row["stale_fields"] if n in health)
    if stale:
        return "health series stopped (" + ", ".join(stale) + ")"
    return "no health field (last Xid, ECC, row remap, retired pages, DCGM health) is exported"


def _gpu_names(rows: Iterable[dict[str, Any]]) -> list[str]:
    return [row["name"] for row in rows]


def facts(result: DcgmScrape) -> dict[str, Any]:
    """The contract JSON plus the lists runbooks read (GPUs named by PCI address, else UUID)."""
    from nightowl.collectors.gpu import xid_catalog

    out: dict[str, Any] = to_jsonable(result)
    rows = out["gpus"]
    last = [(row, int(row["xid_last"])) for row in rows if row["xid_last"]]
    out["xid_last_gpus"] = [{"gpu": row["name"], "code": code} for row, code in last]
    out["xid_last_codes"] = sorted({code for _, code in last})
    new = [(row, int(c), n) for row in rows for c, n in row["xid_new"].items() if c.isdigit() and int(c)]
    out["xid_new_gpus"] = [{"gpu": row["name"], "code": code, "count": n} for row, code, n in new]
    out["xid_new_codes"] = sorted({code for _, code, _ in new})
    out["xid_total_codes"] = sorted(
        {int(c) for row in rows for c, n in row["xid_totals"].items() if c.isdigit() and int(c) and n}
    )
    # the window's Xids: the exporter's window count, and every code whose total grew since the window start
    window = {int(c) for row in rows for c, n in row["xid_window"].items() if c.isdigit() and n}
    window_codes = sorted(window | set(out["xid_new_codes"]))
    out["xid_window_codes"] = window_codes
    codes = set(out["xid_last_codes"]) | set(window_codes)
    out["xid_action"] = xid_catalog.strictest(xid_catalog.action_for(c) for c in codes) if codes else "none"
    out["fallen_off_bus_gpus"] = _gpu_names(row for row, code in last if code == FELL_OFF_BUS)
    out["remap_failure_gpus"] = _gpu_names(r for r in rows if r["row_remap_failure"])
    out["remap_pending_gpus"] = _gpu_names(r for r in rows if r["row_remap_pending"])
    out["retired_pages_pending_gpus"] = _gpu_names(r for r in rows if r["retired_pages_pending"])
    out["dbe_volatile_gpus"] = _gpu_names(r for r in rows if r["ecc_dbe_volatile"])
    out["health_fail_gpus"] = _gpu_names(r for r in rows if any(v >= HEALTH_FAIL for v in r["health_watches"].values()))
    out["health_warn_gpus"] = _gpu_names(
        r for r in rows if any(HEALTH_WARN <= v < HEALTH_FAIL for v in r["health_watches"].values())
    )
    out["link_error_gpus"] = _gpu_names(r for r in rows if any(r[n] for n in dcgm_fields.fields(ERRORS)))
    out["unjudged_gpus"] = _gpu_names(r for r in rows if not r["health_fields"])
    out["not_seen"] = NOT_SEEN_WITH_TOTALS if any(row["xid_totals"] for row in rows) else NOT_SEEN
    return out


def shows_nothing(text: str) -> bool:
    """Blank, or a Prometheus answer with no series of the node: no telemetry (no_data, never an all-clear). An
    exporter's answer with another HTTP status than 200 is evidence (a blind monitor), even with no body."""
    text, status = http_status(text)
    if status is not None and status != HTTP_OK:
        return False
    if not text.strip():
        return True
    if dcgm_prometheus.is_answer(text):
        window = dcgm_prometheus.read_answer(text)
        return not window.samples and not window.warnings
    return False


COLLECTOR = Collector(
    **registered(KIND),
    shows_nothing=shows_nothing,
    commands=COMMANDS,
    parse=parse,
    facts=facts,
)
