"""Webhook payloads in, :class:`Alert` out, and PagerDuty's signature check.

Two senders: Alertmanager's webhook (``version: "4"``: ``alerts[]`` with ``status``, ``labels``,
``annotations``, ``startsAt``, ``endsAt``, ``fingerprint``; see
https://prometheus.io/docs/alerting/latest/configuration/#webhook_config) and PagerDuty's v3
webhooks (one ``event`` per delivery, signed with HMAC-SHA256 in
``X-PagerDuty-Signature: v1=<hex>[,v1=<hex>]``; see
https://developer.pagerduty.com/docs/webhooks-overview).
"""

from __future__ import annotations

import hashlib
import hmac
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

# Alerts one delivery may carry: Alertmanager's webhook_config `max_alerts` caps a delivery at the
# sender (https://prometheus.io/docs/alerting/latest/configuration/#webhook_config); beyond this the
# delivery is refused whole, so one request costs a bounded journal and response.
MAX_ALERTS = 500

# PagerDuty v3 event types that open or reopen an incident, and the one that closes it.
PAGERDUTY_FIRING = frozenset({"incident.triggered", "incident.reopened"})
PAGERDUTY_RESOLVED = frozenset({"incident.resolved"})


@dataclass(frozen=True)
class Alert:
    source: str  # alertmanager | pagerduty
    status: str  # firing | resolved | the PagerDuty event type for anything else
    labels: dict[str, str]
    annotations: dict[str, str]
    starts_at: str | None
    ends_at: str | None
    fingerprint: str
    generator_url: str | None = None
    external_url: str | None = None
    receiver: str | None = None
    group_key: str | None = None
    delivery: str | None = None  # PagerDuty: the v3 event's id (a reopen is a new event of the same incident)

    @property
    def name(self) -> str:
        return self.labels.get("alertname") or self.labels.get("title") or "alert"

    @property
    def dedupe_key(self) -> tuple[str, ...]:
        """Alertmanager redelivers the same alert on every group_interval: same fingerprint and start.
        PagerDuty retries one event with its id; a reopened incident is a new event, so it is keyed
        on the delivery, never on the incident id alone."""
        key = (self.source, self.fingerprint, self.starts_at or "", self.status)
        return key + ((self.delivery,) if self.delivery else ())

    @classmethod
    def from_record(cls, record: Mapping[str, Any]) -> Alert:
        """The alert back from :meth:`record` (the receiver's journal keeps queued alerts this way)."""
        return cls(
            source=str(record.get("source") or "alertmanager"),
            status=str(record.get("status") or "firing"),
            labels=_strings(record.get("labels")),
            annotations=_strings(record.get("annotations")),
            starts_at=record.get("starts_at"),
            ends_at=record.get("ends_at"),
            fingerprint=str(record.get("fingerprint") or ""),
            generator_url=record.get("generator_url"),
            external_url=record.get("external_url"),
            receiver=record.get("receiver"),
            group_key=record.get("group_key"),
            delivery=str(record["delivery"]) if record.get("delivery") else None,
        )

    def record(self) -> dict[str, Any]:
        """The ``alert`` object of a bundle's manifest (before the receiver adds rule and timing)."""
        return {
            "source": self.source,
            "status": self.status,
            "name": self.name,
            "labels": dict(self.labels),
            "annotations": dict(self.annotations),
            "starts_at": self.starts_at,
            "ends_at": self.ends_at,
            "fingerprint": self.fingerprint,
            "generator_url": self.generator_url,
            "external_url": self.external_url,
            "receiver": self.receiver,
            "group_key": self.group_key,
            "delivery": self.delivery,
        }


# --- payloads -----------------------------------------------------------------------------------
def _strings(mapping: Any) -> dict[str, str]:
    return {str(k): str(v) for k, v in mapping.items()} if isinstance(mapping, Mapping) else {}


def _time(value: Any) -> str | None:
    """Alertmanager writes ``0001-01-01T00:00:00Z`` for "no end yet": that is null here."""
    if not isinstance(value, str) or not value or value.startswith("0001-01-01"):
        return None
    return value


def _label_fingerprint(labels: dict[str, str]) -> str:
    """Old Alertmanagers send no fingerprint: derive a stable one from the label set."""
    return hashlib.sha256(json.dumps(labels, sort_keys=True).encode()).hexdigest()[:16]


def parse_alertmanager(payload: Any) -> list[Alert]:
    """An Alertmanager webhook; ValueError for anything else, for an empty alert and beyond MAX_ALERTS."""
    if not isinstance(payload, Mapping) or not isinstance(payload.get("alerts"), list):
        raise ValueError("not an Alertmanager webhook payload: no `alerts` list")
    if len(payload["alerts"]) > MAX_ALERTS:
        raise ValueError(
            f"{len(payload['alerts'])} alerts in one delivery, at most {MAX_ALERTS} "
            "(set max_alerts in Alertmanager's webhook_config)"
        )
    alerts = []
    for index, item in enumerate(payload["alerts"]):
        labels = _strings(item.get("labels")) if isinstance(item, Mapping) else {}
        if not labels:  # Alertmanager always sends alertname; an alert without labels is not one
            raise ValueError(f"alerts[{index}] is not an alert: no labels")
        alerts.append(
            Alert(
                source="alertmanager",
                status=str(item.get("status") or payload.get("status") or "firing"),
                labels=labels,
                annotations=_strings(item.get("annotations")),
                starts_at=_time(item.get("startsAt")),
                ends_at=_time(item.get("endsAt")),
                fingerprint=str(item.get("fingerprint") or _label_fingerprint(labels)),
                generator_url=item.get("generatorURL") or None,
                external_url=payload.get("externalURL") or None,
                receiver=payload.get("receiver") or None,
                group_key=payload.get("groupKey") or None,
            )
        )
    return alerts


def parse_pagerduty(payload: Any) -> list[Alert]:
    """A PagerDuty v3 webhook (one event); ValueError for anything else."""
    event = payload.get("event") if isinstance(payload, Mapping) else None
    if not isinstance(event, Mapping):
        raise ValueError("not a PagerDuty v3 webhook payload: no `event` object")
    data: Mapping[str, Any] = event["data"] if isinstance(event.get("data"), Mapping) else {}
    event_type = str(event.get("event_type") or "")
    status = (
        "firing" if event_type in PAGERDUTY_FIRING else "resolved" if event_type in PAGERDUTY_RESOLVED else event_type
    )
    title = str(data.get("title") or data.get("summary") or "")
    labels = {
        "alertname": title,
        "title": title,
        "event_type": event_type,
        "service": str((data.get("service") or {}).get("summary") or ""),
        "urgency": str(data.get("urgency") or ""),
        "priority": str((data.get("priority") or {}).get("summary") or ""),
        "incident_key": str(data.get("incident_key") or ""),
        "incident_number": str(data.get("number") or ""),
    }
    return [
        Alert(
            source="pagerduty",
            status=status,
            labels={k: v for k, v in labels.items() if v},
            annotations={k: str(v) for k, v in (("summary", title), ("html_url", data.get("html_url"))) if v},
            starts_at=_time(data.get("created_at") or event.get("occurred_at")),
            ends_at=_time(event.get("occurred_at")) if status == "resolved" else None,
            fingerprint=str(data.get("id") or event.get("id") or _label_fingerprint(labels)),
            external_url=data.get("html_url") or None,
            delivery=str(event["id"]) if event.get("id") else None,
        )
    ]


# The receiver's routes: each decides its payload's format (and http.py its verification); the body
# never chooses its own format, so an unsigned PagerDuty body sent to /alertmanager is not one.
PARSERS = {"alertmanager": parse_alertmanager, "pagerduty": parse_pagerduty}


def parse_payload(payload: Any) -> list[Alert]:
    """Either sender's payload, told apart by its shape: only for ``triage --alert``, whose file the
    operator chose; the receiver's routes use :data:`PARSERS`. Raises ValueError for anything else."""
    if not isinstance(payload, Mapping):
        raise ValueError("payload is not a JSON object")
    if isinstance(payload.get("event"), Mapping):
        return parse_pagerduty(payload)
    return parse_alertmanager(payload)


def verify_pagerduty_signature(body: bytes, header: str | None, secrets: tuple[str, ...]) -> bool:
    """PagerDuty v3: any ``v1=<hex>`` in the header equals HMAC-SHA256(secret, raw body) for a secret."""
    if not header or not secrets:
        return False
    offered = [part.strip()[3:] for part in header.split(",") if part.strip().startswith("v1=")]
    for secret in secrets:
        expected = hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()
        if any(hmac.compare_digest(expected, candidate) for candidate in offered):
            return True
    return False


def sign_pagerduty(body: bytes, secret: str) -> str:
    """The header value PagerDuty would send (tests and `nightowl serve` docs use it)."""
    return "v1=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()
