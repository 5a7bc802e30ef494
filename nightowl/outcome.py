"""One record of what a run concluded, built in one place and read by everyone who tells of it.

``serve`` (an alert), ``watch`` (a burst of kernel-log lines) and ``triage --alert`` each used to assemble
what a run produced for the notifier and the status update by themselves, so the same run could be told two
ways: watch's posts lacked the status update serve's carry, and the webhook's ``capture`` had a different
shape from each origin. Here a run's :class:`~nightowl.run.RunResult` becomes an :class:`Outcome` by one
function, :func:`outcome_from_run`; the notify targets (``nightowl/receiver/targets``), the receiver's
journal and ``nightowl watch`` read only that record.

No click and nothing from the receiver or the CLI: Python callers build it as the CLI does::

    result = run_and_save(runbooks.load("xid"), transports, Path("out"))
    outcome = outcome_from_run(result, "hand")
    print(outcome.line, *outcome.findings, sep="\\n")
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Protocol

# What started a run: an alert (serve, triage --alert), a burst of kernel-log lines (watch), a scheduled
# check (check, sweep, a node-problem-detector or Slurm health check), or a person (triage by hand).
ORIGINS = ("alert", "watch", "schedule", "hand")
SEVERITY_ORDER = ("ok", "info", "warning", "critical")  # the verdict's severities, least first
STATUS_UPDATE_BYTES = 16384  # what is read of the bundle's status-update.md (a chat message, not an archive)
SHOWN_REASONS = 4  # distinct no-verdict reasons told in one line; the rest are counted
REASON_CHARS = 160  # a no-verdict reason's length in that line


class RunLike(Protocol):
    """What the builder reads of a run: ``nightowl.run.RunResult`` (not imported: the run path writes the
    status update, which reads this module)."""

    @property
    def runbook(self) -> str: ...
    @property
    def runs(self) -> Sequence[Any]: ...  # engine.runner.HostRun: host, status, verdict, error
    @property
    def bundle(self) -> Path | None: ...
    @property
    def bundle_error(self) -> str | None: ...
    @property
    def status_update(self) -> Path | None: ...


@dataclass(frozen=True)
class Outcome:
    """What one run concluded, as every reader of it tells it.

    ``verdict`` is the run's verdict object (the most severe of its hosts', for a run over several), or None
    when it could not judge (``host_status`` and ``host_error`` say why) or never ran (``failure``).
    ``findings`` are the lines beyond the verdict line (GPU(s), Why, First action, a job's members),
    ``line`` the one-line account (``gpu-fell-off-bus (critical) -> reboot-node``). ``status_update_text``
    is the bundle's status update as written, read once here. ``context`` is the origin's own record (serve:
    the capture's journal entry; watch: its triggers), carried as is to a webhook."""

    origin: str
    runbook: str
    host: str | None
    title: str  # what started it: the alert's name, or ``watch: xid, sxid``
    line: str
    run_id: str | None = None
    bundle: str | None = None
    sha256: str | None = None  # of the bundle's manifest.json (which hashes every file): the bundle's identity
    verdict: Mapping[str, Any] | None = None
    findings: tuple[str, ...] = ()
    host_status: str | None = None
    host_error: str | None = None
    status_update: str | None = None  # the path of status-update.md
    status_update_text: str = ""
    labels: Mapping[str, str] = field(default_factory=dict)
    annotations: Mapping[str, str] = field(default_factory=dict)
    failure: str | None = None  # why the run left no bundle or did not run at all
    incident: str | None = None  # the PagerDuty incident the run answers, when its origin names one
    source: str | None = None  # who delivered the alert (alertmanager, pagerduty) or ``watch``
    context: Mapping[str, Any] = field(default_factory=dict)

    def as_json(self) -> dict[str, Any]:
        """The record as JSON (the webhook's ``outcome``, a bundle's reader)."""
        return {
            "origin": self.origin,
            "runbook": self.runbook,
            "host": self.host,
            "title": self.title,
            "line": self.line,
            "run_id": self.run_id,
            "bundle": self.bundle,
            "sha256": self.sha256,
            "verdict": dict(self.verdict) if self.verdict is not None else None,
            "findings": list(self.findings),
            "host_status": self.host_status,
            "host_error": self.host_error,
            "status_update": self.status_update,
            "labels": dict(self.labels),
            "annotations": dict(self.annotations),
            "failure": self.failure,
            "incident": self.incident,
            "source": self.source,
        }

    def capture_record(self) -> dict[str, Any]:
        """The webhook's ``capture``: the origin's own record with the outcome's fields over it, so
        ``capture.verdict``, ``capture.run_id``, ``capture.status_update`` read the same from every origin."""
        shared = {
            "alert": self.title,
            "source": self.source,
            "host": self.host,
            "runbook": self.runbook,
            "bundle": self.bundle,
            "run_id": self.run_id,
            "verdict": dict(self.verdict) if self.verdict is not None else None,
            "action": (self.verdict or {}).get("action"),
            "host_status": self.host_status,
            "host_error": self.host_error,
            "status_update": self.status_update,
            "outcome": self.line,
            "labels": dict(self.labels),
            "annotations": dict(self.annotations),
        }
        return {**self.context, **shared}

    def with_status_update(self, path: Path | None) -> Outcome:
        """The outcome once the run's status update is written (it renders from this record, so it comes after):
        its path, and its text read once here."""
        if path is None:
            return self
        return replace(self, status_update=str(path), status_update_text=_read_head(path))

    def status_update_lines(self) -> list[str]:
        """The status update, one non-blank printable line each; empty when the run wrote none."""
        from nightowl.safetext import printable

        return [line for line in printable(self.status_update_text).splitlines() if line.strip()]


def outcome_from_run(
    result: RunLike | None,
    origin: str,
    *,
    runbook: str | None = None,
    title: str | None = None,
    host: str | None = None,
    labels: Mapping[str, str] | None = None,
    annotations: Mapping[str, str] | None = None,
    incident: str | None = None,
    source: str | None = None,
    common_cause: Mapping[str, Any] | None = None,
    line: str | None = None,
    failure: str | None = None,
    context: Mapping[str, Any] | None = None,
) -> Outcome:
    """The one way a run becomes an :class:`Outcome`.

    ``result`` is None for a run that never produced one (``failure`` says why). The verdict is the one
    host's, or for a run over several hosts the most severe (a host with no verdict is never hidden: every
    such host's reason is in ``host_error``). ``common_cause`` (a domain most of the hosts share,
    receiver/common_cause.py) leads the verdict's summary; the host's own stays in ``host_summary``.
    ``line`` is the caller's own one-line account where it says more than the verdict (a storm's, an open
    breaker's); by default it is :func:`verdict_line`."""
    if origin not in ORIGINS:
        raise ValueError(f"origin {origin!r}: one of {', '.join(ORIGINS)}")
    runs = list(result.runs) if result is not None else []
    chosen = chosen_run(runs)
    verdict = dict(chosen.verdict) if chosen is not None and chosen.verdict else None
    if verdict is not None and common_cause:
        summary = str(verdict.get("summary") or "")
        cause = str(common_cause.get("line") or "")
        verdict.update(
            summary=f"{cause[:1].upper()}{cause[1:]}. {summary}".strip(),
            host_summary=summary,
            common_cause=common_cause,
        )
    host_status = chosen.status if chosen is not None else None
    host_error = chosen.error if chosen is not None else None
    if len(runs) > 1 and any(not run.verdict for run in runs):  # every host's reason, not the first's
        host_error = no_verdict_line(runs)
    bundle = result.bundle if result is not None else None
    if result is not None and bundle is None:
        failure = failure or result.bundle_error
    update = result.status_update if result is not None else None
    named = host or (chosen.host if chosen is not None else None)
    outcome = Outcome(
        origin=origin,
        runbook=runbook or (result.runbook if result is not None else "?"),
        host=named,
        title=title or origin,
        line="",
        run_id=Path(bundle).name if bundle is not None else None,
        bundle=str(bundle) if bundle is not None else None,
        sha256=manifest_sha256(Path(bundle)) if bundle is not None else None,
        verdict=verdict,
        findings=tuple(finding_lines(verdict)),
        host_status=host_status,
        host_error=host_error,
        status_update=str(update) if update is not None else None,
        status_update_text=_read_head(update) if update is not None else "",
        labels=dict(labels or {}),
        annotations=dict(annotations or {}),
        failure=failure,
        incident=incident,
        source=source,
        context=dict(context or {}),
    )
    return replace(outcome, line=line or verdict_line(verdict, named, host_status, host_error, failure))


def read_bundle_outcome(bundle: Path, problems: list[str] | None = None) -> dict[str, Any] | None:
    """A saved bundle's ``outcome.json`` (the run's :meth:`Outcome.as_json`), for a later reader (the postmortem
    of a saved bundle, the MCP bundle tools); None when the bundle has none (written before it was kept) or it
    cannot be used. A bundle is untrusted input: the file is read as the history reads a bundle's JSON
    (``history.bundle_files``: a regular file, no link followed, within its size cap), and an origin outside
    :data:`ORIGINS` or a verdict that is not an object makes the record unusable rather than trusted. Why one
    cannot be used is one line added to ``problems``, never an exception."""
    import os

    from nightowl.engine import layout
    from nightowl.history.bundle_files import read_json

    path = Path(bundle) / layout.OUTCOME
    if not os.path.lexists(path):
        return None
    try:
        record = read_json(path)
    except OSError as exc:
        return _unusable(problems, exc.strerror or str(exc).removeprefix(f"{layout.OUTCOME}: "))  # a link, too big
    except ValueError as exc:  # not JSON (undecodable bytes are a UnicodeDecodeError), or nested too deep
        return _unusable(problems, f"not JSON: {exc}")
    if not isinstance(record, dict) or record.get("origin") not in ORIGINS:
        return _unusable(problems, f"not the run's outcome record (an object whose origin is one of {ORIGINS})")
    if record.get("verdict") is not None and not isinstance(record.get("verdict"), dict):
        return _unusable(problems, "not the run's outcome record (its verdict is not an object)")
    return record


def chosen_run(runs: Sequence[Any]) -> Any | None:
    """The run an outcome is about: the only one; else the one with the most severe verdict; else the first
    host that gave none (its reason then stands for the run)."""
    worst = most_severe([run.verdict for run in runs if run.verdict])
    judged = next((run for run in runs if worst is not None and run.verdict is worst), None)
    return judged or next((run for run in runs if not run.verdict), None) or (runs[0] if runs else None)


def most_severe(verdicts: Iterable[Mapping[str, Any]]) -> Any | None:
    """The most severe of ``verdicts`` (the first of equals), or None: the one choice the outcome and the
    status update (nightowl/reports/status_update.py) both make, so they never name different verdicts."""
    return max(verdicts, key=lambda verdict: _rank(verdict.get("severity")), default=None)


def _rank(severity: Any) -> int:
    return SEVERITY_ORDER.index(severity) if severity in SEVERITY_ORDER else 0


def verdict_line(
    verdict: Mapping[str, Any] | None,
    host: str | None,
    host_status: str | None,
    host_error: str | None,
    failure: str | None = None,
) -> str:
    """``gpu-fell-off-bus (critical) -> reboot-node``, ``no verdict: host gpu-17 unreachable: ...``, or
    ``failed: ...`` for a run that left no bundle."""
    if failure and not verdict:
        return f"failed: {failure}"
    if verdict:
        return f"{verdict.get('id')} ({verdict.get('severity') or '?'}) -> {verdict.get('action')}"
    why = f"host {host or '?'} {host_status or 'gave no verdict'}"
    return f"no verdict: {why}" + (f": {host_error}" if host_error else "")


def finding_lines(verdict: Mapping[str, Any] | None) -> list[str]:
    """The finding beyond the verdict line: GPU(s), the why line, the first action, and for a job the members
    implicated and not; one printable line each. Nothing when there is no verdict."""
    from nightowl.safetext import one_line

    if not isinstance(verdict, Mapping) or not verdict:
        return []
    lines = []
    cause = verdict.get("common_cause") if isinstance(verdict.get("common_cause"), Mapping) else None
    if cause:  # a storm whose hosts share a domain: the domain is checked before any node is acted on
        lines.append(f"Common cause first: {str(cause.get('line') or '').removeprefix('common cause: ')}")
    gpus = verdict.get("gpus")
    if isinstance(gpus, list) and gpus:
        lines.append(f"GPU(s): {', '.join(str(g) for g in gpus)}")
    summary = str(verdict.get("host_summary") or verdict.get("summary") or "")  # a storm's own, past its cause
    head, dot, _ = summary.partition(". ")
    if head:
        lines.append(f"Why: {head}{'.' if dot else ''}")
    implicated = verdict.get("implicated")
    if isinstance(implicated, list):
        on = ", ".join(map(str, implicated)) or ("the whole job" if verdict.get("whole_job") else "no member")
        others = ", ".join(map(str, verdict.get("not_implicated") or []))
        lines.append(
            f"First action: {verdict.get('action')} on {on}" + (f" (not implicated: {others})" if others else "")
        )
    elif cause:
        lines.append(
            f"First action: inspect {cause.get('kind')} {cause.get('name')}; then {verdict.get('action')} "
            f"only on those of its {cause.get('shared_by')} nodes whose fault the {cause.get('kind')} does not explain"
        )
    else:
        lines.append(f"First action: {verdict.get('action')}")
    return [one_line(line) for line in lines]


def no_verdict_line(runs: Iterable[Any]) -> str | None:
    """``3 hosts gave no verdict: r07-1, r07-2 unreachable: ssh: connect to host <host> port 22: Connection
    refused; r07-3 incomplete: cannot judge: ...``: each distinct reason once with the hosts that gave it (a
    host's own name in its reason read as ``<host>`` so the same failure groups), or None when every host has
    a verdict. (An unreachable storm named only its first host's error: eight hosts behind one dead jump
    host read as one host's problem, issue 45 item 9.)"""
    by_reason: dict[str, list[str]] = {}
    for run in runs:
        if run.verdict:
            continue
        error = _reason_head(str(run.error).replace(run.host, "<host>")) if run.error else None
        by_reason.setdefault(f"{run.status}: {error}" if error else str(run.status), []).append(run.host)
    if not by_reason:
        return None
    told = [f"{', '.join(hosts)} {reason}" for reason, hosts in list(by_reason.items())[:SHOWN_REASONS]]
    more = len(by_reason) - SHOWN_REASONS
    rest = f"; and {more} other {_plural(more, 'reason')} (storm.results)" if more > 0 else ""
    count = sum(map(len, by_reason.values()))
    return f"{count} {_plural(count, 'host')} gave no verdict: {'; '.join(told)}{rest}"


def _plural(count: int, word: str) -> str:
    return word if count == 1 else f"{word}s"


def _reason_head(error: str) -> str:
    """A host's reason as one line tells it: its words before the detail in brackets (a job's "cannot judge: no
    collector returned evidence (every collector failed: ...)" lists every member's failures, with every
    member's name, so the same reason would never group), cut at REASON_CHARS. The bundle keeps the whole."""
    head = error.split(" (", 1)[0].strip() or error
    return head if len(head) <= REASON_CHARS else head[: REASON_CHARS - 1].rstrip() + "…"


def manifest_sha256(bundle: Path) -> str | None:
    """The bundle's identity: the sha256 of its manifest.json (which hashes every other file), as the
    history store and ``verify`` cite it; None when it cannot be read."""
    from nightowl.engine import layout
    from nightowl.engine.private_files import sha256_file

    try:
        return sha256_file(bundle / layout.MANIFEST)
    except OSError:
        return None


def _read_head(path: Path) -> str:
    try:
        with Path(path).open("rb") as handle:
            return handle.read(STATUS_UPDATE_BYTES).decode("utf-8", errors="replace")
    except OSError:
        return ""


def counted(count: int, word: str) -> str:
    """``1 host``, ``8 hosts``, ``1 other host``: a count with its noun in the number it takes, where the
    drafts and the status update used to write ``host(s)``."""
    return f"{count} {_plural(count, word)}"


def _unusable(problems: list[str] | None, why: str) -> dict[str, Any] | None:
    """``outcome.json`` not used (None, read_bundle_outcome's answer), and why, told to the reader's ``problems``."""
    if problems is not None:
        problems.append(f"outcome.json not used: {why}"[:500])
    return None
