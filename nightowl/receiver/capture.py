"""One alert's capture: plan it (which rule, runbook and host), then run it into a bundle.

Planning never runs anything and never raises for a bad alert: a capture that will not run says
why in ``reason``. Running is the same ``run_and_save`` as ``nightowl triage``; the bundle's
manifest keeps the alert (labels and annotations scrubbed of secrets).
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from nightowl.receiver.config import ServeConfig
from nightowl.receiver.payload import Alert, parse_payload
from nightowl.receiver.rules import host_name, render_host, render_params

if TYPE_CHECKING:
    from nightowl.outcome import Outcome
    from nightowl.receiver.common_cause import StormRecord
    from nightowl.run import RunResult

STORM_FORKS = 8  # hosts of one storm capture collected side by side


@dataclass
class Capture:
    """One alert's fate: ignored, duplicate, not captured (and why), or the bundle it produced."""

    alert: Alert
    received_at: float
    # queued | running | captured | failed | not_captured | ignored | duplicate | interrupted (resumed later)
    status: str = "queued"
    id: str = field(default_factory=lambda: uuid.uuid4().hex[:16])  # one capture across journal lines
    reason: str | None = None
    rule: str | None = None
    runbook: str | None = None
    host: str | None = None
    host_spec: str | None = None
    params: dict[str, Any] = field(default_factory=dict)
    bundle: str | None = None
    status_update: str | None = None  # the bundle's status-update.md, for the incident channel
    verdict: dict[str, Any] | None = None
    host_status: str | None = None
    host_error: str | None = None  # why the host gave no verdict (unreachable, a missing ssh config)
    notifications: list[dict[str, Any]] | None = None  # one outcome per notify target (receiver/notify.py)
    input_error: bool = False  # not captured because the rule's parameters cannot be used (exit 2 for --alert)
    started_at: float | None = None
    finished_at: float | None = None
    storm: Storm | None = None  # the alerts of one failure domain folded into this capture (receiver/storm.py)
    breaker: dict[str, Any] | None = None  # the fleet circuit breaker when the capture ended (fleet/actions_log.py)
    run_outcome: Outcome | None = None  # what the run concluded (nightowl/outcome.py), once it ran

    def manifest_alert(self) -> dict[str, Any]:
        """The ``alert`` object written to the bundle's manifest (see the module docstring of postmortem)."""
        from nightowl.redact import scrub_secrets

        record = self.alert.record()
        for key in ("labels", "annotations"):
            record[key] = {k: scrub_secrets(v) for k, v in record[key].items()}
        record.update(
            received_at=self.received_at,
            rule=self.rule,
            runbook=self.runbook,
            host=self.host,
            host_spec=self.host_spec,
            queued_s=round(self.started_at - self.received_at, 3) if self.started_at else None,
        )
        if self.storm is not None:
            record["storm"] = self.storm.to_json()
        return record

    def outcome(self) -> str:
        """One line for the serve log, ``triage --alert`` and the notes: the verdict, or what prevented one."""
        from nightowl.fleet.actions_log import breaker_line
        from nightowl.outcome import verdict_line

        if self.status != "captured":
            line = self.status + (f": {self.reason}" if self.reason else "")
        else:
            line = verdict_line(self.verdict, self.host, self.host_status, self.host_error)
        line = self.storm.describe(line) if self.storm is not None and self.status == "captured" else line
        breaker = breaker_line(self.breaker)  # an open breaker: the responders learn actions are held
        return f"{line}; {breaker}" if breaker else line

    def notice(self) -> Outcome:
        """What the notify targets are told: the run's outcome (or, for a capture that never ran, why), with
        the capture's own line (a storm's, an open breaker's) and its journal entry as the origin's record."""
        from nightowl.outcome import outcome_from_run

        alert = self.manifest_alert()
        told = self.run_outcome or outcome_from_run(
            None,
            "alert",
            runbook=self.runbook,
            title=self.alert.name,
            host=self.host,
            failure=self.reason or self.status,
            **_alert_fields(self.alert, alert),
        )
        return replace(told, line=self.outcome(), context=self.to_json())

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "alert": self.alert.name,
            "source": self.alert.source,
            "alert_status": self.alert.status,
            "fingerprint": self.alert.fingerprint,
            "starts_at": self.alert.starts_at,
            "dedupe_key": list(self.alert.dedupe_key),
            "received_at": self.received_at,
            "status": self.status,
            "reason": self.reason,
            "rule": self.rule,
            "runbook": self.runbook,
            "host": self.host,
            "bundle": self.bundle,
            "status_update": self.status_update,
            "run_id": Path(self.bundle).name if self.bundle else None,
            "verdict": self.verdict,
            "host_status": self.host_status,
            "host_error": self.host_error,
            "outcome": self.outcome(),
            "notifications": self.notifications,
            "input_error": self.input_error,
            "started_at": self.started_at,
            "finished_at": self.finished_at,
            "storm": self.storm.to_json() if self.storm is not None else None,
            "breaker": self.breaker,
        }


@dataclass
class Storm:
    """Alerts of one rule and one failure domain (``by``=``value``) that arrived within the storm
    window: one capture runs the rule's runbook over all their hosts, in one bundle."""

    by: str  # the label naming the domain, or "rule"
    value: str
    members: list[Capture]  # each folded alert's own plan, first arrival first
    results: list[dict[str, Any]] = field(default_factory=list)  # per host: host, status, verdict, error
    # domains most of whose hosts share a fault (receiver/common_cause.py), the most widely shared first
    common_cause: list[dict[str, Any]] = field(default_factory=list)

    def hosts(self) -> dict[str, str]:
        """Each distinct host once (name -> spec), in arrival order."""
        named: dict[str, str] = {}
        for member in self.members:
            named.setdefault(str(member.host), str(member.host_spec))
        return named

    def alerts_by_host(self) -> dict[str, int]:
        """How many of the folded alerts name each host (64 alerts of 8 hosts: 8 each)."""
        counts: dict[str, int] = {}
        for member in self.members:
            counts[str(member.host)] = counts.get(str(member.host), 0) + 1
        return counts

    def domains(self) -> dict[str, dict[str, str]]:
        """Each host's failure domains as its alerts' labels name them (receiver/common_cause.py)."""
        from nightowl.receiver.common_cause import memberships

        return memberships(((str(m.host), m.alert.labels) for m in self.members), self.by)

    def needing_action(self) -> list[str]:
        return [r["host"] for r in self.results if (r.get("verdict") or {}).get("action") not in (None, "none")]

    def describe(self, worst: str) -> str:
        """``storm rack=r07: 64 alerts on 8 hosts, 8 need action; common cause: rack r07 (...): inspect it
        before reboot-node on 8 nodes (...); worst: gpu-fell-off-bus ...``: the common cause comes first."""
        judged = f", {len(self.needing_action())} need action" if self.results else ""
        from nightowl.outcome import counted

        scope = f"{len(self.members)} alerts on {counted(len(self.hosts()), 'host')}"
        cause = f"; {self.common_cause[0]['line']}" if self.common_cause else ""
        return f"storm {self.by}={self.value}: {scope}{judged}{cause}; worst: {worst}"

    def to_json(self) -> dict[str, Any]:
        return {
            "by": self.by,
            "value": self.value,
            "alerts": len(self.members),
            "hosts": list(self.hosts()),
            "alerts_by_host": self.alerts_by_host(),
            "results": self.results,
            "common_cause": self.common_cause,
        }


def plan_capture(alert: Alert, config: ServeConfig, received_at: float) -> Capture:
    """Match the rules; a Capture that is ``queued`` (ready to run) or says why it will not run."""
    capture = Capture(alert, received_at)
    rule = config.rule_for(alert)
    if rule is None:
        capture.status, capture.reason = "ignored", "no rule matches this alert's labels"
        return capture
    capture.rule, capture.runbook = rule.name, rule.runbook
    if alert.status != "firing" and not (alert.status == "resolved" and rule.on_resolved):
        capture.status = "ignored"
        capture.reason = (
            f"{alert.status} alert; rule {rule.name} does not opt in (on_resolved: true)"
            if alert.status == "resolved"
            else f"event {alert.status} is neither firing nor resolved"
        )
        return capture
    try:
        host_spec = render_host(rule, alert)
    except Exception as exc:  # noqa: BLE001 - a bad template or label is this alert's problem only
        capture.status, capture.reason = "not_captured", f"cannot name the host: {exc}"
        return capture
    capture.host_spec = host_spec
    try:
        capture.params = render_params(rule, alert)
    except Exception as exc:  # noqa: BLE001 - a label that escapes its template is this alert's problem only
        capture.status, capture.reason = "not_captured", f"cannot fill the parameters: {exc}"
        return capture
    capture.host = host_name(host_spec)
    return capture


def run_capture(
    capture: Capture,
    config: ServeConfig,
    lookup: Callable[[str], Any] | None = None,
    stopping: threading.Event | None = None,
) -> Capture:
    """Run the rule's runbook on the alert's host now, as ``triage`` runs it (``nightowl.run``): the same
    parameter checks (a rule's unreadable ``xid_policy`` is "not captured", naming the file), the rule's
    host and command timeouts; the bundle carries the alert in its manifest. ``stopping`` is the
    receiver's own stop: a collector killed by it leaves the capture interrupted, to be resumed."""
    import dataclasses

    from nightowl import history
    from nightowl.run import Interrupted, RunHooks, RunRefused, RunSettings, run_and_save

    capture.started_at = time.time()
    try:
        loaded = config.runbooks.load(str(capture.runbook))
        transports = _transports(capture, config)
        limits = config.limits_for(capture.rule)
        manifest = {"alert": capture.manifest_alert()}
        storm = _storm_record(capture, manifest)  # a storm's record in the manifest, and its common causes
        result = run_and_save(
            loaded,
            transports,
            config.out_dir,
            params=capture.params,
            settings=RunSettings(
                allow_invasive=config.allow_invasive,
                command_timeout=limits.command_timeout,
                host_timeout=limits.host_timeout,
                forks=min(STORM_FORKS, len(transports)),
                origin="alert",
            ),
            hooks=RunHooks(
                extra_manifest=manifest,
                on_host_done=storm.host_done if storm is not None else None,
                lookup=lookup,
                describe=_description(capture, storm),
            ),
            context=dataclasses.replace(history.run_context(config.history), stop=stopping),  # its store, its stop
        )
    except RunRefused as exc:
        capture.status, capture.reason, capture.input_error = "not_captured", str(exc), True
    except Interrupted as exc:
        capture.status, capture.bundle = "interrupted", str(exc.bundle) if exc.bundle else None
        what = "terminated" if exc.terminated else "interrupted"
        capture.reason = f"{what} mid-capture (nightowl was stopping): partial bundle kept; serve resumes it"
    except Exception as exc:  # noqa: BLE001 - the receiver keeps serving whatever one capture does
        capture.status, capture.reason = "failed", f"{type(exc).__name__}: {exc}"
    else:
        _captured(capture, result)
        from nightowl.fleet.actions_log import breaker_state, watched_path

        capture.breaker = breaker_state(watched_path())
    capture.finished_at = time.time()
    return capture


def _captured(capture: Capture, result: RunResult) -> None:
    """The capture's record of a run: its bundle, status update, and the run's outcome (the one host's
    verdict, or a storm's most severe, led by the cause its hosts share), as the run built it with what the
    capture told it (``_description``): ``run_and_save`` gives every result its Outcome, never rebuilt here."""
    if result.bundle is None:  # the verdict stands; the evidence could not be written
        capture.status, capture.reason = "failed", result.bundle_error
    else:
        capture.status, capture.bundle = "captured", str(result.bundle)
    capture.status_update = str(result.status_update) if result.status_update else None
    if result.status_update_error:
        capture.reason = result.status_update_error
    outcome = result.outcome
    assert outcome is not None, "run_and_save builds every run's Outcome"
    capture.run_outcome = outcome
    capture.verdict = dict(outcome.verdict) if outcome.verdict is not None else None
    capture.host_status, capture.host_error = outcome.host_status, outcome.host_error


def _description(capture: Capture, storm: StormRecord | None = None) -> Callable[[list[Any]], dict[str, Any]]:
    """What the capture tells the run's Outcome (``RunHooks.describe``): the alert's name, host, labels and
    incident, and for a storm the cause its hosts share (its record completed from the finished runs, the
    common causes those ``storm`` judged for the manifest)."""

    def describe(runs: list[Any]) -> dict[str, Any]:
        cause = _storm_results(capture, runs, storm) if capture.storm is not None else None
        return {
            "runbook": capture.runbook,
            "title": capture.alert.name,
            "host": capture.host,
            "common_cause": cause,
            **_alert_fields(capture.alert, capture.manifest_alert()),
        }

    return describe


def _alert_fields(alert: Alert, record: dict[str, Any]) -> dict[str, Any]:
    """What the outcome keeps of the alert: its labels and annotations (scrubbed as in the manifest), who
    delivered it, and the PagerDuty incident its v3 webhook names (the note goes on it)."""
    incident = alert.fingerprint if alert.source == "pagerduty" and alert.fingerprint else None
    return {
        "labels": record.get("labels") or {},
        "annotations": record.get("annotations") or {},
        "source": alert.source,
        "incident": incident,
    }


def _storm_record(capture: Capture, manifest: dict[str, Any]) -> StormRecord | None:
    """For a storm: what keeps the manifest's storm record (results, common cause) current as each host
    finishes (its ``host_done``), so the bundle and its draft are written with them."""
    if capture.storm is None or not isinstance(manifest["alert"].get("storm"), dict):
        return None
    from nightowl.receiver.common_cause import StormRecord

    storm = capture.storm
    return StormRecord(manifest["alert"], storm.domains(), list(storm.hosts()))


def _storm_results(capture: Capture, runs: list[Any], record: StormRecord | None) -> dict[str, Any] | None:
    """A storm's record: every host's outcome and the domains most of whose hosts share a fault (those its
    manifest ``record`` judged: once per storm); returns the most widely shared (it leads the outcome's
    verdict, and so the status update's), or None."""
    from nightowl.receiver.common_cause import common_causes, result_of

    assert capture.storm is not None
    capture.storm.results = [result_of(run) for run in runs]
    storm = capture.storm
    causes = record.common_causes(runs) if record is not None else None
    storm.common_cause = causes if causes is not None else common_causes(runs, storm.domains(), storm.alerts_by_host())
    return capture.storm.common_cause[0] if capture.storm.common_cause else None


def _transports(capture: Capture, config: ServeConfig) -> dict[str, Callable[[], Any]]:
    """One opener per host: the alert's host, or each distinct host of a storm."""
    from nightowl.transports import open_transport

    specs = capture.storm.hosts() if capture.storm is not None else {str(capture.host): str(capture.host_spec)}

    def opener(spec: str) -> Callable[[], Any]:
        ssh_options = None if spec == "local" or spec.startswith("replay:") else _ssh_options(config)
        return lambda: open_transport(spec, ssh_options)

    return {name: opener(spec) for name, spec in specs.items()}


def _ssh_options(config: ServeConfig) -> Any:
    from nightowl.transports.ssh import SSHOptions

    return SSHOptions(known_hosts=config.known_hosts, ssh_config=config.ssh_config)


def triage_alert_payload(
    payload: Any, config: ServeConfig, lookup: Callable[[str], Any] | None = None
) -> list[Capture]:
    """`nightowl triage --alert FILE`: what the receiver would do with this payload, done now, in order."""
    received_at = time.time()
    results = []
    for alert in parse_payload(payload):
        capture = plan_capture(alert, config, received_at)
        results.append(run_capture(capture, config, lookup) if capture.status == "queued" else capture)
        if capture.status == "interrupted":  # Ctrl-C stops the command, not only this capture
            break
    return results
