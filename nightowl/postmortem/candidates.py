"""Root-cause candidates (with their actions) backed by cited evidence, and the open questions."""

from __future__ import annotations

from typing import Any

from nightowl.engine import layout
from nightowl.engine.job import held_where
from nightowl.postmortem.bundle_reader import Bundle
from nightowl.postmortem.citations import cite_lines, cite_numbers, fact_cites, json_lines, merged
from nightowl.postmortem.clocks import (
    CLOCK_HOST_BOOT,
    CLOCK_HOST_LOCAL,
    CLOCK_HOST_NO_YEAR,
    CLOCK_HOST_UTC,
    Moment,
    duration,
)
from nightowl.postmortem.decision_paths import short
from nightowl.postmortem.outputs import FAULT_KINDS, kernel_events, located_kernel_events

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


def readable_evidence(evidence: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The verdict's evidence as a reader checks it: a condition that held (``gpu-visible: (kernel_log.x |
    default([])) | length > 0`` with the values it read) becomes the facts it read, each ``read at`` its node,
    and a fact the verdict's evidence already lists is not repeated; the rule itself is in the decision path."""
    listed = {str(item.get("fact")) for item in evidence}
    out: list[dict[str, Any]] = []
    for item in evidence:
        node, colon, when = str(item.get("fact")).partition(": ")
        reads = item.get("value")
        if not (colon and when and isinstance(reads, dict) and reads and all(isinstance(k, str) for k in reads)):
            out.append(item)
            continue
        for path, value in reads.items():
            if path not in listed:
                listed.add(path)
                out.append({**item, "fact": f"{path} (read at {node})", "value": value})
    return out


def candidates(data: Bundle) -> tuple[list[dict[str, Any]], list[str]]:
    """Root-cause candidates (only from verdicts backed by at least one cited file), and the
    verdicts that could not be backed, for the open questions."""
    from nightowl.collectors.gpu import xid_catalog

    found, unbacked = [], []
    for entry in data.verdicts.get("hosts", []):
        verdict, host = entry.get("verdict"), entry["host"]
        if not verdict or verdict.get("action") == "none":
            continue
        support: list[dict[str, Any]] = []
        for item in readable_evidence(verdict.get("evidence", [])):
            sources = [s.strip() for s in str(item.get("source") or "").split(",") if s.strip()]
            cites = merged(
                [c for s in sources for c in fact_cites(data, s, str(item.get("fact")), item.get("value"))], data
            )
            if any(c.start for c in cites):  # an empty output (a member's log not read) shows no value: not cited
                cites = [c for c in cites if c.start]
            if cites:
                on = held_where(item)  # a job member's own value, or one only some members reported
                support.append(
                    {
                        "fact": f"{item.get('fact')}{on}",
                        "value": short(item.get("value")),
                        "cites": cites,
                        "files": sorted({c.path for c in cites}),
                    }
                )
        if not support:
            unbacked.append(
                f"{host}: the runbook concluded `{verdict.get('id')}` but cited no file of the bundle; "
                "confirm it by hand before acting on it."
            )
            continue
        catalog: list[dict[str, Any]] = []
        for command in data.host_files(host, "kernel-log"):
            for located in located_kernel_events(data, command["file"]):
                event = located["event"]
                if event.get("kind") not in ("xid", "sxid"):
                    continue
                row = xid_catalog.explain(event)
                line = (
                    f"{FAULT_KINDS[row['kind']]} {row['code']}: {row.get('meaning')}; NVIDIA's first step: "
                    f"{row.get('first_step') or row.get('action')}"
                )
                cite = cite_lines(data, command["file"], located["start"], located["end"])
                known = next((c for c in catalog if c["text"] == line), None)
                if known is None:
                    catalog.append({"text": line, "cites": [cite] if cite else []})
                elif cite and len(known["cites"]) < 4:
                    known["cites"].append(cite)
        verdict_cites = cite_numbers(data, layout.VERDICTS, json_lines(data, layout.VERDICTS, "id", verdict.get("id")))
        found.append(
            {
                "host": host,
                "cites": merged([c for s in support for c in s["cites"]], data),
                "id": verdict.get("id"),
                "severity": verdict.get("severity"),
                "action": verdict.get("action"),
                "summary": verdict.get("summary"),
                "gpus": verdict.get("gpus") or [],
                "support": support,
                "catalog": catalog[:8],
                "verdict_cites": verdict_cites,
            }
        )
    return found, unbacked


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
    if host_times and started and started - max(host_times) > 86400 and not data.manifest.get("replayed_hosts"):
        questions.append(
            f"The last host log entry is {duration(started - max(host_times))} before nightowl's "
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
