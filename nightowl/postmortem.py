"""The postmortem draft of a bundle: what happened, when, why nightowl thinks so, and the proof.

Everything is read from the bundle alone (manifest, trace, verdicts, runbook, raw outputs), so a
draft can be rendered again anywhere, later, from a copied bundle. The shape follows the Google
SRE postmortem (summary, impact, detection, timeline, root causes, actions), with two rules:
every claim cites a file of the bundle with its sha256 from the manifest, and a root cause is
only ever a *candidate* that a runbook verdict reached from cited evidence.
"""

from __future__ import annotations

import json
import os
import re
import time
from collections import Counter
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from nightowl.paths import data_dir

TAGS = ("detection", "diagnosis", "repair", "key moment")
DRAFT_FILES = frozenset({"postmortem.md", "postmortem.html"})
MAX_EVENTS_PER_SOURCE = 30  # timeline rows per raw file; the file itself holds the rest

# Clocks an entry can come from. Only entries whose clock carries an absolute instant are sorted
# against each other; a time without a year or written in seconds since boot is listed apart.
CLOCK_NIGHTOWL = "nightowl (UTC)"
CLOCK_HOST_UTC = "host log (UTC offset written)"
CLOCK_HOST_LOCAL = "host local time (zone not written; read as UTC)"
CLOCK_HOST_NO_YEAR = "host log, no year written"
CLOCK_HOST_BOOT = "host kernel, seconds since boot"

# Kernel-log event kinds that mark a fault; what they are called in the draft.
FAULT_KINDS = {
    "xid": "Xid",
    "sxid": "SXid",
    "fallen_off_bus": "GPU fell off the bus",
    "gpu_reset_required": "GPU reset required",
    "oom_kill": "kernel OOM killer",
    "pcie_aer": "PCIe AER error",
}

# Questions a careful engineer asks when a log shows these; each row names why.
QUESTIONS_BY_EVENT: tuple[tuple[str, str, str], ...] = (
    (
        "crash_dump",
        "The driver wrote a GPU crash dump: was `nvidia-bug-report.sh` run before the NVIDIA "
        "module was unloaded or the node rebooted?",
        "the driver's own banner asks for it (kernel log)",
    ),
    (
        "fallen_off_bus",
        "Has this GPU or slot dropped off the bus before (earlier boots, other tickets)? "
        "nightowl reads only the current boot's kernel log.",
        "NVIDIA Xid catalog: Xid 79 repeated on a slot is a hardware ticket",
    ),
    (
        "pcie_aer",
        "Do the PCIe AER errors point at the same slot or riser as the GPU errors?",
        "AER errors before an Xid 79 usually name the failing link",
    ),
    (
        "gpu_reset_required",
        "Was the GPU reset (or the node rebooted) after the driver asked for it, and did the error come back?",
        "NVIDIA Xid 154 recovery actions",
    ),
    (
        "oom_kill",
        "Which process did the kernel OOM killer end, and was it the serving engine?",
        "kernel OOM killer line",
    ),
)

_ENGINE_TIME = (  # (regex, clock): where engine logs write their time
    (re.compile(r"(?P<ts>\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?Z)"), CLOCK_HOST_UTC),  # TGI (tracing, UTC)
    (re.compile(r"\[(?P<ts>\d{4}-\d\d-\d\d \d\d:\d\d:\d\d)"), CLOCK_HOST_LOCAL),  # SGLang
    (re.compile(r"^(?P<ts>\d{4}-\d\d-\d\d \d\d:\d\d:\d\d)"), CLOCK_HOST_LOCAL),  # Python logging default
    (re.compile(r"\b(?:INFO|WARNING|ERROR|DEBUG|CRITICAL) (?P<ts>\d\d-\d\d \d\d:\d\d:\d\d)"), CLOCK_HOST_NO_YEAR),
)
_ENGINE_FAULT = re.compile(
    r"out of memory|OutOfMemoryError|\bERROR\b|CRITICAL|EngineDeadError|Engine core .*failed|Killed|exit code",
    re.IGNORECASE,
)
_ENGINE_READY = re.compile(
    r"Application startup complete|Uvicorn running|The server is fired up|Connected|Starting vLLM API server",
)


# --- reading the bundle ------------------------------------------------------------------------
def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text()) if path.exists() else None
    except (OSError, ValueError):
        return None


def _sha256(path: Path) -> str:
    from nightowl.engine.bundle import sha256_file

    return sha256_file(path)


def stamp(epoch: float | None) -> str:
    if epoch is None:
        return "?"
    moment = datetime.fromtimestamp(epoch, tz=timezone.utc)
    return moment.strftime("%Y-%m-%d %H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"


def _epoch_of(text: str | None) -> tuple[float | None, bool]:
    """(epoch, zone_written) of an ISO 8601 time; a time without a zone is read as UTC."""
    if not text:
        return None, False
    try:
        moment = datetime.fromisoformat(text.replace("Z", "+00:00").replace(" ", "T", 1))
    except ValueError:
        return None, False
    if moment.year <= 1:  # Alertmanager writes 0001-01-01T00:00:00Z for "not ended"
        return None, False
    zone_written = moment.tzinfo is not None
    if not zone_written:
        moment = moment.replace(tzinfo=timezone.utc)
    return moment.timestamp(), zone_written


def _duration(seconds: float) -> str:
    seconds = abs(seconds)
    if seconds < 120:
        return f"{seconds:.1f} s"
    if seconds < 7200:
        return f"{seconds / 60:.1f} min"
    if seconds < 172800:
        return f"{seconds / 3600:.1f} h"
    return f"{seconds / 86400:.1f} days"


@dataclass
class EvidenceFile:
    id: str
    path: str
    sha256: str
    bytes: int
    what: str
    host: str | None = None
    state: str = "ok"  # ok | changed | missing | unlisted


@dataclass
class Moment:
    epoch: float | None
    shown: str
    clock: str
    tag: str
    what: str
    host: str | None = None
    cite: str | None = None
    order: int = 0


@dataclass
class Bundle:
    root: Path
    manifest: dict[str, Any]
    verdicts: dict[str, Any]
    trace: dict[str, Any]
    runbook: Any  # nightowl.engine.model.Runbook or None
    evidence: list[EvidenceFile] = field(default_factory=list)

    @property
    def alert(self) -> dict[str, Any] | None:
        alert = self.manifest.get("alert")
        return alert if isinstance(alert, dict) else None

    def cite(self, rel_path: str | None) -> EvidenceFile | None:
        if rel_path and rel_path.endswith(".out") and not (self.root / rel_path).exists():
            first = rel_path[: -len(".out")] + ".1.out"  # see _renumbered
            rel_path = first if (self.root / first).exists() else rel_path
        return next((e for e in self.evidence if e.path == rel_path), None)

    def host_files(self, host: str, kind: str) -> list[dict[str, Any]]:
        return [
            c
            for c in self.manifest.get("commands", [])
            if c.get("host") == host and c.get("kind") == kind and c.get("file")
        ]


def _renumbered(root: Path, manifest: dict[str, Any]) -> dict[str, Any]:
    """A collector taken twice has its first output renamed ``<kind>.1.out`` after the manifest named it
    ``<kind>.out`` (engine/bundle.py ``_next_stem``): point such entries at the file that exists."""
    for command in manifest.get("commands", []):
        rel = command.get("file")
        if isinstance(rel, str) and rel.endswith(".out") and not (root / rel).exists():
            first = rel[: -len(".out")] + ".1.out"
            if (root / first).exists():
                command["file"] = first
    return manifest


def load(bundle: Path) -> Bundle:
    root = Path(bundle)
    data = Bundle(
        root=root,
        manifest=_renumbered(root, _read_json(root / "manifest.json") or {"commands": []}),
        verdicts=_read_json(root / "verdicts.json") or {"hosts": []},
        trace=_read_json(root / "trace.json") or {"hosts": []},
        runbook=_load_runbook(root / "runbook.yaml"),
    )
    data.evidence = _catalog(data)
    return data


def _load_runbook(path: Path) -> Any:
    if not path.exists():
        return None
    from nightowl.engine.validate import RunbookInvalid, load_runbook

    try:
        return load_runbook(path).runbook
    except (RunbookInvalid, OSError, ValueError):
        return None


def _catalog(data: Bundle) -> list[EvidenceFile]:
    """Every file of the bundle, with the sha256 the manifest recorded (or, while the bundle is
    still being written, the one it will record)."""
    listed = {f["path"]: f for f in data.manifest.get("files", []) if isinstance(f, dict) and "path" in f}
    on_disk = sorted(p.relative_to(data.root).as_posix() for p in data.root.rglob("*") if p.is_file())
    paths = [p for p in on_disk if p not in DRAFT_FILES and p != "manifest.json"]
    paths += [p for p in listed if p not in paths and p not in DRAFT_FILES]
    described = _describe_commands(data.manifest)
    order = {p: i for i, p in enumerate(described)}
    paths.sort(key=lambda p: (0 if p.startswith("hosts/") else 1, order.get(p.rsplit(".", 1)[0] + ".out", 999), p))
    files = []
    for index, rel in enumerate(paths, start=1):
        path = data.root / rel
        entry = listed.get(rel)
        state = "ok"
        if not path.exists():
            state, digest, size = "missing", entry["sha256"] if entry else "", entry.get("bytes", 0) if entry else 0
        else:
            digest, size = _sha256(path), path.stat().st_size
            if entry is None:
                state = "unlisted" if listed else "ok"
            elif entry["sha256"] != digest:
                state, digest = "changed", entry["sha256"]
        host = rel.split("/")[1] if rel.startswith("hosts/") and rel.count("/") >= 2 else None
        files.append(EvidenceFile(f"E{index}", rel, digest, size, _what(rel, described), host, state))
    return files


def _describe_commands(manifest: dict[str, Any]) -> dict[str, str]:
    out: dict[str, str] = {}
    for command in manifest.get("commands", []):
        if command.get("file"):
            argv = " ".join(command.get("argv") or [])
            result = (
                "timed out"
                if command.get("timed_out")
                else f"exit {command['exit_code']}"
                if command.get("exit_code") is not None
                else command.get("error") or "no exit status"
            )
            out[command["file"]] = f"{command.get('kind')}: `{argv}` ({result}, {stamp(command.get('start'))})"
    return out


def _what(rel: str, described: dict[str, str]) -> str:
    if rel in described:
        return described[rel]
    stem, _, ext = rel.rpartition(".")
    if ext in ("err", "rc", "timeout") and f"{stem}.out" in described:
        label = {"err": "stderr", "rc": "exit code", "timeout": "timed-out marker"}[ext]
        return f"{label} of {described[f'{stem}.out'].split(' (', 1)[0]}"
    if rel.endswith("/unreachable"):
        return "why the host could not be reached"
    return {
        "verdicts.json": "verdict per host (CONTRACT s4)",
        "trace.json": "path walked, each condition and the fact values it read",
        "runbook.yaml": "the runbook as it was when the run started",
    }.get(rel, "file of the bundle")


# --- reading raw outputs again -----------------------------------------------------------------
def _parsed(data: Bundle, rel: str, kind: str) -> dict[str, Any] | None:
    path = data.root / rel
    if not path.exists():
        return None
    from nightowl.collectors import get_collector
    from nightowl.collectors.base import to_jsonable

    try:
        return to_jsonable(get_collector(kind).parse(path.read_text(errors="replace")))
    except Exception:  # noqa: BLE001 - a parser bug must not cost the draft
        return None


def kernel_events(data: Bundle, host: str) -> list[tuple[dict[str, Any], str]]:
    """Kernel-log events of a host, parsed again from the raw file, with the file they came from."""
    events = []
    for command in data.host_files(host, "kernel-log"):
        parsed = _parsed(data, command["file"], "kernel-log") or {}
        events += [(event, command["file"]) for event in parsed.get("events", [])]
    return events


def _host_time(written: str | None) -> tuple[float | None, str]:
    if not written:
        return None, CLOCK_HOST_NO_YEAR
    if re.fullmatch(r"\d+\.\d+", written):
        return None, CLOCK_HOST_BOOT
    epoch, zone = _epoch_of(written)
    if epoch is None:
        return None, CLOCK_HOST_NO_YEAR
    return epoch, CLOCK_HOST_UTC if zone else CLOCK_HOST_LOCAL


def _event_text(event: dict[str, Any]) -> str:
    kind = event.get("kind")
    label = FAULT_KINDS.get(str(kind), "NVRM")
    code = f" {event['code']}" if event.get("code") is not None else ""
    where = f" on {event['pci']}" if event.get("pci") else ""
    process = f" (process {event['process']})" if event.get("process") else ""
    count = f" ×{event['count']}" if (event.get("count") or 1) > 1 else ""
    text = " ".join(str(event.get("text") or "").split())
    return f"{label}{code}{where}{process}{count}: {text[:160]}"


def _kernel_moments(data: Bundle, host: str) -> list[Moment]:
    moments: list[Moment] = []
    first_fault: float | None = None
    for index, (event, rel) in enumerate(kernel_events(data, host)[:MAX_EVENTS_PER_SOURCE]):
        epoch, clock = _host_time(event.get("time"))
        fault = event.get("kind") in FAULT_KINDS or event.get("subkind") == "crash_dump"
        if fault and epoch is not None and first_fault is None:
            first_fault = epoch
        tag = "key moment"
        what = _event_text(event)
        if event.get("subkind") == "driver_load":
            after_fault = first_fault is not None and epoch is not None and epoch > first_fault
            tag = "repair" if after_fault else "key moment"
            what = f"NVIDIA driver {event.get('driver_version') or ''} loaded" + (
                " again after the fault" if after_fault else " (this boot)"
            )
        cite = data.cite(rel)
        moments.append(
            Moment(
                epoch,
                str(event.get("time") or "(no time written)"),
                clock,
                tag,
                what,
                host,
                cite.id if cite else None,
                index,
            )
        )
    return moments


def _engine_moments(data: Bundle, host: str) -> list[Moment]:
    moments: list[Moment] = []
    for command in data.host_files(host, "engine-log"):
        path = data.root / command["file"]
        if not path.exists():
            continue
        cite = data.cite(command["file"])
        seen_fault = False
        messages: Counter[str] = Counter()
        for index, line in enumerate(path.read_text(errors="replace").splitlines()):
            fault, ready = bool(_ENGINE_FAULT.search(line)), bool(_ENGINE_READY.search(line))
            if not (fault or ready):
                continue
            written, clock = _engine_time(line)
            if written is None:
                continue
            message = " ".join(line.split())[:180]
            messages[message] += 1
            if messages[message] > 1 or len(moments) >= MAX_EVENTS_PER_SOURCE:
                continue
            epoch = _epoch_of(written)[0] if clock != CLOCK_HOST_NO_YEAR else None
            tag = "repair" if ready and seen_fault else "key moment"
            seen_fault = seen_fault or fault
            moments.append(
                Moment(epoch, written, clock, tag, f"engine log: {message}", host, cite.id if cite else None, index)
            )
    return moments


def _engine_time(line: str) -> tuple[str | None, str]:
    for pattern, clock in _ENGINE_TIME:
        match = pattern.search(line)
        if match:
            return match.group("ts"), clock
    return None, CLOCK_HOST_NO_YEAR


METRIC_FIELDS = ("requests_running", "requests_waiting", "kv_cache_usage", "preemptions_total")


def metric_scrapes(data: Bundle, host: str) -> list[dict[str, Any]]:
    scrapes = []
    for command in data.host_files(host, "metrics"):
        parsed = _parsed(data, command["file"], "metrics")
        if parsed is not None:
            values = {k: parsed.get(k) for k in METRIC_FIELDS if parsed.get(k) is not None}
            scrapes.append({"start": command.get("start"), "file": command["file"], "values": values})
    return scrapes


def _metric_moments(data: Bundle, host: str) -> list[Moment]:
    moments = []
    scrapes = metric_scrapes(data, host)
    for index, scrape in enumerate(scrapes):
        cite = data.cite(scrape["file"])
        shown = (
            ", ".join(f"{k} {v:g}" if isinstance(v, (int, float)) else f"{k} {v}" for k, v in scrape["values"].items())
            or "no serving metric found"
        )
        moments.append(
            Moment(
                scrape["start"],
                stamp(scrape["start"]),
                CLOCK_NIGHTOWL,
                "diagnosis",
                f"metrics scrape: {shown}",
                host,
                cite.id if cite else None,
                index,
            )
        )
    for first, last in zip(scrapes, scrapes[1:], strict=False):
        if first["start"] is None or last["start"] is None:
            continue
        changes = [
            f"{k} {first['values'][k]:g} → {last['values'][k]:g}"
            for k in METRIC_FIELDS
            if isinstance(first["values"].get(k), (int, float)) and isinstance(last["values"].get(k), (int, float))
        ]
        moments.append(
            Moment(
                last["start"],
                stamp(last["start"]),
                CLOCK_NIGHTOWL,
                "diagnosis",
                f"metric window of {_duration(last['start'] - first['start'])}: "
                + (", ".join(changes) or "no comparable values"),
                host,
                ", ".join(c.id for f in (first, last) if (c := data.cite(f["file"]))) or None,
            )
        )
    return moments


# --- the timeline --------------------------------------------------------------------------------
def timeline(data: Bundle) -> tuple[list[Moment], list[Moment]]:
    """(placed, unplaced): placed entries sorted by time; unplaced ones in log order."""
    moments = _alert_moments(data) + _run_moments(data)
    for host in [h["host"] for h in data.verdicts.get("hosts", [])]:
        moments += _kernel_moments(data, host) + _engine_moments(data, host) + _metric_moments(data, host)
    placed = sorted((m for m in moments if m.epoch is not None), key=lambda m: (m.epoch, m.order))
    unplaced = [m for m in moments if m.epoch is None]
    return placed, unplaced


def _alert_moments(data: Bundle) -> list[Moment]:
    alert = data.alert
    if not alert:
        return []
    source = str(alert.get("source") or "alert source")
    clock = f"{source} (UTC)"
    name = alert.get("name") or "alert"
    manifest_cite = None  # the alert lives in manifest.json, which is not hashed by itself
    moments = []
    starts, _ = _epoch_of(alert.get("starts_at"))
    if starts is not None:
        moments.append(
            Moment(starts, stamp(starts), clock, "detection", f"alert `{name}` started firing", None, manifest_cite, -3)
        )
    if alert.get("received_at") is not None:
        moments.append(
            Moment(
                float(alert["received_at"]),
                stamp(float(alert["received_at"])),
                CLOCK_NIGHTOWL,
                "detection",
                f"nightowl received `{name}` from {source}",
                None,
                None,
                -2,
            )
        )
    ends, _ = _epoch_of(alert.get("ends_at"))
    if ends is not None and alert.get("status") == "resolved":
        moments.append(Moment(ends, stamp(ends), clock, "repair", f"alert `{name}` resolved", None, None, 9))
    return moments


def _run_moments(data: Bundle) -> list[Moment]:
    manifest = data.manifest
    verdicts_cite = data.cite("verdicts.json")
    trace_cite = data.cite("trace.json")
    moments = []
    if manifest.get("started") is not None:
        moments.append(
            Moment(
                manifest["started"],
                stamp(manifest["started"]),
                CLOCK_NIGHTOWL,
                "diagnosis",
                f"nightowl started runbook `{manifest.get('runbook')}`",
                None,
                None,
                -1,
            )
        )
    for index, command in enumerate(manifest.get("commands", [])):
        result = (
            "timed out"
            if command.get("timed_out")
            else (
                f"exit {command['exit_code']}"
                if command.get("exit_code") is not None
                else command.get("error") or "no exit"
            )
        )
        cite = data.cite(command.get("file"))
        moments.append(
            Moment(
                command.get("start"),
                stamp(command.get("start")),
                CLOCK_NIGHTOWL,
                "diagnosis",
                f"ran `{' '.join(command.get('argv') or [])}` → {result}, {command.get('bytes', 0)} bytes",
                command.get("host"),
                cite.id if cite else None,
                index,
            )
        )
    for host in data.trace.get("hosts", []):
        for visit in host.get("nodes", []):
            if visit.get("kind") == "verdict":
                verdict = _verdict_of(data, host["host"]) or {}
                moments.append(
                    Moment(
                        visit.get("started"),
                        stamp(visit.get("started")),
                        CLOCK_NIGHTOWL,
                        "diagnosis",
                        f"verdict `{verdict.get('id', visit['node'])}` → first action {verdict.get('action', '?')}",
                        host["host"],
                        verdicts_cite.id if verdicts_cite else None,
                        100,
                    )
                )
            elif visit.get("kind") == "decide" and visit.get("next"):
                moments.append(
                    Moment(
                        visit.get("started"),
                        stamp(visit.get("started")),
                        CLOCK_NIGHTOWL,
                        "diagnosis",
                        f"decided at `{visit['node']}` → `{visit['next']}`",
                        host["host"],
                        trace_cite.id if trace_cite else None,
                        50,
                    )
                )
    return moments


def _verdict_of(data: Bundle, host: str) -> dict[str, Any] | None:
    for entry in data.verdicts.get("hosts", []):
        if entry.get("host") == host:
            return entry.get("verdict")
    return None


# --- decision path, candidates, impact, questions ----------------------------------------------
def _source_file(data: Bundle, host: str, fact_path: str) -> str | None:
    head, _, rest = fact_path.partition(".")
    if head == "status":
        head = rest.partition(".")[0]
    for entry in data.trace.get("hosts", []):
        if entry.get("host") == host:
            for kind, collector in (entry.get("collectors") or {}).items():
                if kind.replace("-", "_") == head:
                    return collector.get("file")
    return None


def _short(value: Any, limit: int = 140) -> str:
    text = json.dumps(value, default=str)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def decision_paths(data: Bundle) -> list[dict[str, Any]]:
    from nightowl.engine.mermaid import to_mermaid

    paths = []
    for entry in data.trace.get("hosts", []):
        host = entry["host"]
        steps = []
        for visit in entry.get("nodes", []):
            node = data.runbook.nodes.get(visit["node"]) if data.runbook else None
            step = {
                "node": visit["node"],
                "kind": visit.get("kind"),
                "title": getattr(node, "title", None),
                "status": visit.get("status"),
                "collectors": visit.get("collectors") or {},
                "taken": None,
            }
            for index, condition in enumerate(visit.get("conditions", [])):
                if condition.get("value"):
                    branch = node.decide[index] if node and node.decide and index < len(node.decide) else None
                    cites = sorted(
                        {c.id for p in condition.get("reads", {}) if (c := data.cite(_source_file(data, host, p)))}
                    )
                    step["taken"] = {
                        "when": condition["when"],
                        "goto": condition.get("goto"),
                        "why": getattr(branch, "why", None),
                        "cites": cites,
                        "reads": {k: _short(v) for k, v in condition.get("reads", {}).items()},
                    }
            errors = [c for c in visit.get("conditions", []) if c.get("error")]
            step["errors"] = [f"`{c['when']}`: {c['error']}" for c in errors]
            if visit.get("kind") == "decide" and step["taken"] is None and visit.get("next"):
                step["taken"] = {
                    "when": "default",
                    "goto": visit["next"],
                    "why": "no condition held",
                    "cites": [],
                    "reads": {},
                }
            steps.append(step)
        mermaid = to_mermaid(data.runbook, entry.get("path")) if data.runbook else None
        paths.append({"host": host, "path": entry.get("path", []), "steps": steps, "mermaid": mermaid})
    return paths


def candidates(data: Bundle) -> tuple[list[dict[str, Any]], list[str]]:
    """Root-cause candidates (only from verdicts backed by at least one cited file), and the
    verdicts that could not be backed, for the open questions."""
    from nightowl.collectors import xid_catalog

    found, unbacked = [], []
    for entry in data.verdicts.get("hosts", []):
        verdict, host = entry.get("verdict"), entry["host"]
        if not verdict or verdict.get("action") == "none":
            continue
        support = []
        for item in verdict.get("evidence", []):
            sources = [s.strip() for s in str(item.get("source") or "").split(",") if s.strip()]
            cites = [c for s in sources if (c := data.cite(s))]
            if cites:
                support.append(
                    {
                        "fact": item.get("fact"),
                        "value": _short(item.get("value")),
                        "cites": [c.id for c in cites],
                        "files": [c.path for c in cites],
                    }
                )
        if not support:
            unbacked.append(
                f"{host}: the runbook concluded `{verdict.get('id')}` but cited no file of the bundle; "
                "confirm it by hand before acting on it."
            )
            continue
        catalog: list[dict[str, Any]] = []
        for event, rel in kernel_events(data, host):
            if event.get("kind") in ("xid", "sxid") and (cite := data.cite(rel)):
                row = xid_catalog.explain(event)
                line = (
                    f"{FAULT_KINDS[row['kind']]} {row['code']}: {row.get('meaning')}; NVIDIA's first step: "
                    f"{row.get('first_step') or row.get('action')}"
                )
                if all(line != c["text"] for c in catalog):
                    catalog.append({"text": line, "cites": [cite.id]})
        found.append(
            {
                "host": host,
                "cites": sorted({i for s in support for i in s["cites"]}),
                "id": verdict.get("id"),
                "severity": verdict.get("severity"),
                "action": verdict.get("action"),
                "summary": verdict.get("summary"),
                "gpus": verdict.get("gpus") or [],
                "support": support,
                "catalog": catalog[:8],
                "verdict_cite": getattr(data.cite("verdicts.json"), "id", None),
            }
        )
    return found, unbacked


def impact(data: Bundle, placed: list[Moment]) -> list[str]:
    """Numbers the evidence has, for the person who writes the impact section."""
    hosts = data.verdicts.get("hosts", [])
    numbers = [
        f"{len(hosts)} host(s) examined; "
        f"{sum(1 for h in hosts if (h.get('verdict') or {}).get('action') not in (None, 'none'))} need action; "
        f"{sum(1 for h in hosts if not h.get('verdict'))} without a verdict."
    ]
    gpus = sorted({str(g) for h in hosts for g in ((h.get("verdict") or {}).get("gpus") or [])})
    if gpus:
        numbers.append(f"GPU(s) named by the verdicts: {', '.join(gpus)}.")
    for entry in hosts:
        host = entry["host"]
        codes = Counter(
            f"{FAULT_KINDS[e['kind']]} {e['code']}"
            for e, _ in kernel_events(data, host)
            if e.get("kind") in ("xid", "sxid") and e.get("code") is not None
            for _ in range(int(e.get("count") or 1))
        )
        if codes:
            numbers.append(
                f"{host}: kernel log lines per code: " + ", ".join(f"{k} ×{v}" for k, v in sorted(codes.items()))
            )
        for scrape in metric_scrapes(data, host)[-1:]:
            if scrape["values"]:
                numbers.append(
                    f"{host}: at the last scrape " + ", ".join(f"{k} = {v}" for k, v in scrape["values"].items())
                )
        for command in data.host_files(host, "engine-log"):
            oom = (_parsed(data, command["file"], "engine-log") or {}).get("oom")
            if oom:
                numbers.append(
                    f"{host}: engine out of memory in phase {oom.get('phase')}: tried "
                    f"{oom.get('tried_gib')} GiB with {oom.get('free_gib')} GiB free of {oom.get('total_gib')} GiB."
                )
    faults = [m for m in placed if m.tag == "key moment" and m.clock != CLOCK_NIGHTOWL]
    started = data.manifest.get("started")
    if faults and started:
        clock_note = " (host local time read as UTC)" if faults[0].clock == CLOCK_HOST_LOCAL else ""
        numbers.append(
            "From the first fault in the logs to nightowl's capture: "
            f"{_duration(started - faults[0].epoch)}{clock_note}."
        )
    return numbers


def detection(data: Bundle) -> dict[str, Any]:
    alert = data.alert or {}
    started = data.manifest.get("started")
    starts, _ = _epoch_of(alert.get("starts_at"))
    received = alert.get("received_at")
    return {
        "alert": alert or None,
        "name": alert.get("name"),
        "fired": stamp(starts) if starts is not None else None,
        "received": stamp(float(received)) if received is not None else None,
        "captured": stamp(started),
        "fired_to_capture": _duration(started - starts) if starts is not None and started else None,
        "summary": (alert.get("annotations") or {}).get("summary")
        or (alert.get("annotations") or {}).get("description"),
    }


def open_questions(data: Bundle, placed: list[Moment], unplaced: list[Moment], unbacked: list[str]) -> list[str]:
    questions = ["Who and what was affected (jobs, users, requests), and for how long? The bundle cannot tell."]
    questions += unbacked
    clocks = {m.clock for m in placed + unplaced}
    if CLOCK_HOST_LOCAL in clocks:
        questions.append(
            "Host log times were written without a time zone and are placed as if UTC; confirm the "
            "host's zone before relating them to the alert and to nightowl's clock."
        )
    if clocks & {CLOCK_HOST_NO_YEAR, CLOCK_HOST_BOOT}:
        questions.append(
            "Some log times have no year or count seconds since boot; they are listed apart, in log "
            "order, not placed on the timeline."
        )
    host_times = [m.epoch for m in placed if m.clock in (CLOCK_HOST_UTC, CLOCK_HOST_LOCAL) and m.epoch]
    started = data.manifest.get("started")
    if host_times and started and started - max(host_times) > 86400:
        questions.append(
            f"The last host log entry is {_duration(started - max(host_times))} before nightowl's "
            "capture: is the log from an earlier boot, or was the bundle replayed from a recording?"
        )
    for entry in data.trace.get("hosts", []):
        for kind, collector in (entry.get("collectors") or {}).items():
            if collector.get("status") not in ("ok", None):
                questions.append(
                    f"{entry['host']}: {kind} was {collector['status']}"
                    f"{': ' + collector['reason'] if collector.get('reason') else ''}; "
                    "what would it have shown?"
                )
        if entry.get("status") != "ok":
            questions.append(f"{entry['host']}: {entry.get('status')}: {entry.get('error') or 'no reason recorded'}.")
    seen_kinds = {
        e.get("subkind") or e.get("kind")
        for h in data.verdicts.get("hosts", [])
        for e, _ in kernel_events(data, h["host"])
    }
    questions += [q for kind, q, _why in QUESTIONS_BY_EVENT if kind in seen_kinds]
    questions.append(
        "Did anything change on these hosts shortly before the first event (driver, firmware, workload, configuration)?"
    )
    if data.manifest.get("partial"):
        questions.append("The run was interrupted (partial bundle): which collectors did not run?")
    return questions


def headline(data: Bundle) -> str:
    hosts = data.verdicts.get("hosts", [])
    ids = sorted({(h.get("verdict") or {}).get("id") or f"no verdict ({h.get('status')})" for h in hosts})
    where = hosts[0]["host"] if len(hosts) == 1 else f"{len(hosts)} hosts"
    return f"{', '.join(ids) or 'no host'} on {where}"


def integrity(data: Bundle) -> list[str]:
    if not data.manifest.get("files"):
        return []  # still being written: the manifest lists files only once the bundle is complete
    return [f"{e.state}: {e.path}" for e in data.evidence if e.state != "ok"]


# --- assembling and rendering -----------------------------------------------------------------
def bundle_context(bundle: Path) -> dict[str, Any]:
    """Everything a template needs, read from the bundle alone."""
    data = load(bundle)
    placed, unplaced = timeline(data)
    found, unbacked = candidates(data)
    return {
        "run_id": data.manifest.get("run_id") or data.verdicts.get("run_id") or Path(bundle).name,
        "runbook": data.manifest.get("runbook") or data.verdicts.get("runbook"),
        "runbook_title": getattr(data.runbook, "title", None),
        "headline": headline(data),
        "hosts": data.verdicts.get("hosts", []),
        "started": stamp(data.manifest.get("started")),
        "finished": stamp(data.manifest.get("finished")),
        "partial": bool(data.manifest.get("partial")),
        "detection": detection(data),
        "impact": impact(data, placed),
        "timeline": [asdict(m) for m in placed],
        "unplaced": [asdict(m) for m in unplaced],
        "paths": decision_paths(data),
        "candidates": found,
        "host_cites": {c["host"]: c["cites"] for c in found},
        "questions": open_questions(data, placed, unplaced, unbacked),
        "evidence": [asdict(e) for e in data.evidence],
        "integrity": integrity(data),
        "tags": TAGS,
        "generated": stamp(time.time()),
        "redacted": False,
    }


def _environment(template: str | None, fmt: str) -> tuple[Any, str]:
    from jinja2 import ChoiceLoader, Environment, FileSystemLoader, StrictUndefined, select_autoescape

    folders = [str(p) for p in _user_template_dirs()] + [str(data_dir("templates"))]
    name = f"postmortem.{fmt}.j2"
    if template:
        candidate = Path(template).expanduser()
        if candidate.is_file():
            folders.insert(0, str(candidate.parent))
            name = candidate.name
        else:
            name = template if template.endswith(".j2") else f"{template}.{fmt}.j2"
    env = Environment(
        loader=ChoiceLoader([FileSystemLoader(f) for f in folders]),
        undefined=StrictUndefined,
        autoescape=select_autoescape(["html.j2", "html"], default_for_string=False),
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
    )
    env.filters["md_cell"] = lambda v: str(v).replace("|", "\\|").replace("\n", " ")
    env.filters["code"] = _inline_code
    return env, name


def _inline_code(text: Any) -> Any:
    """HTML: escape, then show `backticked` spans as <code>."""
    from markupsafe import Markup, escape

    return Markup(re.sub(r"`([^`]+)`", r"<code>\1</code>", str(escape(text))))


def _user_template_dirs() -> list[Path]:
    """A user folder overrides the built-in templates: $NIGHTOWL_TEMPLATES, then ~/.config/nightowl/templates."""
    dirs = []
    if os.environ.get("NIGHTOWL_TEMPLATES"):
        dirs.append(Path(os.environ["NIGHTOWL_TEMPLATES"]).expanduser())
    dirs.append(Path(os.environ.get("XDG_CONFIG_HOME", "~/.config")).expanduser() / "nightowl" / "templates")
    return [d for d in dirs if d.is_dir()]


def render_bundle(bundle: Path, template: str | None = None, fmt: str = "md", redact: bool = False) -> str:
    """The draft of ``bundle`` as Markdown (``fmt="md"``) or a self-contained HTML page."""
    context = bundle_context(Path(bundle))
    if fmt == "html":
        from markupsafe import Markup

        context["svgs"] = {
            p["host"]: Markup(decision_svg(load_runbook_of(Path(bundle)), p["path"])) for p in context["paths"]
        }
    context["redacted"] = redact
    env, name = _environment(template, fmt)
    text = env.get_template(name).render(**context)
    if redact:
        text = redactor_for(Path(bundle)).apply(text)
    return text


def load_runbook_of(bundle: Path) -> Any:
    return _load_runbook(bundle / "runbook.yaml")


def redactor_for(bundle: Path) -> Any:
    """A Redactor that already knows the names the bundle holds (hosts, the alert's labels)."""
    from nightowl.redact import Redactor

    data = load(bundle)
    redactor = Redactor()
    redactor.learn_hosts(h.get("host") for h in data.verdicts.get("hosts", []))
    alert = data.alert or {}
    labels = alert.get("labels") or {}
    redactor.learn_hosts([alert.get("host"), alert.get("host_spec")])
    redactor.learn_hosts(
        str(v)
        for k, v in labels.items()
        if k.lower() in ("instance", "host", "hostname", "node", "nodename", "exported_instance", "pod")
    )
    return redactor


# --- the decision graph as inline SVG (no JavaScript: mermaid.js is not available offline) -------
NODE_W, NODE_H, GAP_X, GAP_Y, CHAR_W, LINE_H = 190, 46, 24, 64, 6.6, 14
TAKEN_FILL, TAKEN_STROKE, PLAIN_FILL, PLAIN_STROKE = "#ffe08a", "#b8860b", "#f4f4f4", "#9a9a9a"


def _layers(runbook: Any) -> dict[str, int]:
    """Longest-path layering from the entry: a node sits one row below its deepest parent."""
    depth = {runbook.entry: 0}
    changed = True
    while changed:  # runbooks are acyclic (validated), so this settles within len(nodes) rounds
        changed = False
        for node_id, node in runbook.nodes.items():
            if node_id not in depth:
                continue
            for target in node.targets():
                if target in runbook.nodes and depth.get(target, -1) < depth[node_id] + 1:
                    depth[target] = depth[node_id] + 1
                    changed = True
    for node_id in runbook.nodes:
        depth.setdefault(node_id, 0)
    return depth


def _wrap(text: str, width: int = 28, lines: int = 2) -> list[str]:
    words, out, line = text.split(), [], ""
    for word in words:
        if len(line) + len(word) + 1 > width and line:
            out.append(line)
            line = word
        else:
            line = f"{line} {word}".strip()
    out.append(line)
    if len(out) > lines:
        out = out[:lines]
        out[-1] = out[-1][: width - 1] + "…"
    return out


def decision_svg(runbook: Any, path: list[str] | None) -> str:
    """The runbook graph drawn top-down, the path taken in amber; a plain SVG any browser shows."""
    from html import escape

    if runbook is None:
        return "<p>(the bundle holds no readable runbook.yaml)</p>"
    taken_nodes = set(path or [])
    taken_edges = set(zip(path or [], (path or [])[1:], strict=False))
    depth = _layers(runbook)
    rows: dict[int, list[str]] = {}
    for node_id in runbook.nodes:
        rows.setdefault(depth[node_id], []).append(node_id)
    # The path taken first in each row, then the rest in runbook order: keeps the story on the left.
    for row in rows.values():
        row.sort(key=lambda n: (n not in taken_nodes, list(runbook.nodes).index(n)))
    width = max(len(r) for r in rows.values()) * (NODE_W + GAP_X) + GAP_X
    height = (max(rows) + 1) * (NODE_H + GAP_Y) + GAP_Y
    position = {
        n: (GAP_X + i * (NODE_W + GAP_X), GAP_Y // 2 + d * (NODE_H + GAP_Y))
        for d, row in rows.items()
        for i, n in enumerate(row)
    }
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" class="decision-graph" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" font-family="sans-serif" font-size="11">',
        '<defs><marker id="arrow" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" markerHeight="7" '
        'orient="auto-start-reverse"><path d="M 0 0 L 10 5 L 0 10 z" fill="#777"/></marker>'
        '<marker id="arrow-taken" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" markerHeight="7" '
        f'orient="auto-start-reverse"><path d="M 0 0 L 10 5 L 0 10 z" fill="{TAKEN_STROKE}"/></marker></defs>',
    ]
    edges = [(s, t) for s, n in runbook.nodes.items() for t in dict.fromkeys(n.targets()) if t in position]
    for source, target in sorted(edges, key=lambda e: e in taken_edges):  # taken edges drawn last, on top
        (sx, sy), (tx, ty) = position[source], position[target]
        x1, y1, x2, y2 = sx + NODE_W / 2, sy + NODE_H, tx + NODE_W / 2, ty
        taken = (source, target) in taken_edges
        stroke, w, marker = (TAKEN_STROKE, 3, "arrow-taken") if taken else ("#bbbbbb", 1, "arrow")
        mid = (y1 + y2) / 2
        parts.append(
            f'<path class="edge{" taken" if taken else ""}" d="M {x1:.0f} {y1:.0f} C {x1:.0f} {mid:.0f}, '
            f'{x2:.0f} {mid:.0f}, {x2:.0f} {y2:.0f}" fill="none" stroke="{stroke}" stroke-width="{w}" '
            f'marker-end="url(#{marker})"/>'
        )
    for node_id, node in runbook.nodes.items():
        x, y = position[node_id]
        taken = node_id in taken_nodes
        fill, stroke = (TAKEN_FILL, TAKEN_STROKE) if taken else (PLAIN_FILL, PLAIN_STROKE)
        label = f"{node.verdict.id} → {node.verdict.action}" if node.verdict else (node.title or node_id)
        radius = 20 if node.kind == "verdict" else 3
        shape = (
            f'<polygon points="{x + 12},{y} {x + NODE_W - 12},{y} {x + NODE_W},{y + NODE_H / 2} '
            f'{x + NODE_W - 12},{y + NODE_H} {x + 12},{y + NODE_H} {x},{y + NODE_H / 2}"'
            if node.kind == "decide"
            else f'<rect x="{x}" y="{y}" width="{NODE_W}" height="{NODE_H}" rx="{radius}"'
        )
        parts.append(
            f'<g class="node{" taken" if taken else ""}" data-node="{escape(node_id)}">{shape} fill="{fill}" '
            f'stroke="{stroke}" stroke-width="{2 if taken else 1}"/>'
        )
        lines = _wrap(label)
        top = y + NODE_H / 2 - (len(lines) - 1) * LINE_H / 2 + 4
        for i, line in enumerate(lines):
            weight = ' font-weight="bold"' if taken else ""
            parts.append(
                f'<text x="{x + NODE_W / 2}" y="{top + i * LINE_H:.0f}" text-anchor="middle"{weight}>'
                f"{escape(line)}</text>"
            )
        parts.append("</g>")
    parts.append("</svg>")
    return "\n".join(parts)
