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
            "input_error": self.input_error,
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
    from nightowl.library import runbooks
    from nightowl.run import Interrupted, RunRefused, run_and_save
    from nightowl.transports import open_transport

    capture.started_at = time.time()
    try:
        loaded = runbooks.load(str(capture.runbook))
        spec = str(capture.host_spec)
        ssh_options = None if spec == "local" or spec.startswith("replay:") else _ssh_options(config)
        limits = config.limits_for(capture.rule)
        result = run_and_save(
            loaded,
            {str(capture.host): lambda: open_transport(spec, ssh_options)},
            config.out_dir,
            params=capture.params,
            allow_invasive=config.allow_invasive,
            command_timeout=limits.command_timeout,
            host_timeout=limits.host_timeout,
            forks=1,
            extra_manifest={"alert": capture.manifest_alert()},
            stopping=stopping,
            lookup=lookup,
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
    capture.finished_at = time.time()
    return capture


def _captured(capture: Capture, result: Any) -> None:
    """The capture's record of a run: its bundle, status update, and the one host's verdict."""
    if result.bundle is None:  # the verdict stands; the evidence could not be written
        capture.status, capture.reason = "failed", result.bundle_error
    else:
        capture.status, capture.bundle = "captured", str(result.bundle)
    capture.status_update = str(result.status_update) if result.status_update else None
    if result.status_update_error:
        capture.reason = result.status_update_error
    run = result.runs[0]
    capture.verdict, capture.host_status, capture.host_error = run.verdict, run.status, run.error


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
