"""One alert's capture: plan it (which rule, runbook and host), then run it into a bundle.

Planning never runs anything and never raises for a bad alert: a capture that will not run says
why in ``reason``. Running is the same ``run_runbook`` as ``nightowl triage``; the bundle's
manifest keeps the alert (labels and annotations scrubbed of secrets).
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from nightowl.receiver.config import ServeConfig
from nightowl.receiver.payload import Alert, parse_payload
from nightowl.receiver.rules import host_name, render_host, render_params


@dataclass
class Capture:
    """One alert's fate: ignored, duplicate, not captured (and why), or the bundle it produced."""

    alert: Alert
    received_at: float
    status: str = "queued"  # queued | running | captured | failed | not_captured | ignored | duplicate
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
    started_at: float | None = None
    finished_at: float | None = None

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
        return record

    def outcome(self) -> str:
        """One line for the serve log, ``triage --alert`` and the notes: the verdict, or what prevented one."""
        return describe_outcome(self.status, self.verdict, self.host, self.host_status, self.host_error, self.reason)

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
            "started_at": self.started_at,
            "finished_at": self.finished_at,
        }


def describe_outcome(
    status: str,
    verdict: dict[str, Any] | None,
    host: str | None,
    host_status: str | None,
    host_error: str | None,
    reason: str | None,
) -> str:
    """``gpu-fell-off-bus (critical) -> reboot-node`` or ``no verdict: host gpu-17 unreachable: ...``."""
    if status != "captured":
        return status + (f": {reason}" if reason else "")
    if verdict:
        return f"{verdict.get('id')} ({verdict.get('severity') or '?'}) -> {verdict.get('action')}"
    why = f"host {host or '?'} {host_status or 'gave no verdict'}"
    return f"no verdict: {why}" + (f": {host_error}" if host_error else "")


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


def run_capture(capture: Capture, config: ServeConfig, lookup: Callable[[str], Any] | None = None) -> Capture:
    """Run the rule's runbook on the alert's host now; the bundle carries the alert in its manifest."""
    from nightowl import runbooks
    from nightowl.collectors import get_collector
    from nightowl.engine.runner import RunOptions
    from nightowl.engine.session import run_runbook
    from nightowl.postmortem.render import render_drafts
    from nightowl.redact import scrub_secrets
    from nightowl.transports import open_transport

    capture.started_at = time.time()
    try:
        loaded = runbooks.load(str(capture.runbook))
        options = RunOptions(params=loaded.resolve_params(capture.params), allow_invasive=config.allow_invasive)
        spec = str(capture.host_spec)
        ssh_options = None if spec == "local" or spec.startswith("replay:") else _ssh_options(config)
        transports = {str(capture.host): lambda: open_transport(spec, ssh_options)}
        runs, bundle = run_runbook(
            loaded,
            transports,
            lookup or get_collector,  # type: ignore[arg-type]
            options,
            config.out_dir,
            forks=1,
            render_postmortem=render_drafts,
            redact=scrub_secrets,
            extra_manifest={"alert": capture.manifest_alert()},
        )
    except Exception as exc:  # noqa: BLE001 - the receiver keeps serving whatever one capture does
        capture.status, capture.reason = "failed", f"{type(exc).__name__}: {exc}"
    else:
        capture.status, capture.bundle = "captured", str(bundle)
        capture.status_update = _status_update(capture, bundle, runs)
        capture.verdict, capture.host_status = runs[0].verdict, runs[0].status
        capture.host_error = runs[0].error
    capture.finished_at = time.time()
    return capture


def _status_update(capture: Capture, bundle: Path, runs: list[Any]) -> str | None:
    """status-update.md in the bundle, as `triage` writes it; a failure to write it never fails the capture."""
    from nightowl import status_update

    try:
        return str(status_update.write_for_runs(str(capture.runbook), bundle, runs)[1])
    except Exception as exc:  # noqa: BLE001 - the evidence is saved; the message is a convenience
        capture.reason = f"status update not written: {type(exc).__name__}: {exc}"
        return None


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
    return results
