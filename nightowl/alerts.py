"""Alerts in, (runbook, host) out: webhook payload parsing, rule matching, signature checks.

Two senders: Alertmanager's webhook (``version: "4"``: ``alerts[]`` with ``status``, ``labels``,
``annotations``, ``startsAt``, ``endsAt``, ``fingerprint``) and PagerDuty's v3 webhooks (one
``event`` per delivery, signed with HMAC-SHA256 in ``X-PagerDuty-Signature: v1=<hex>[,v1=<hex>]``).
Rules map an alert to a runbook and a host spec by label matchers, in the order written: the first
rule that matches wins.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

DEFAULT_TOKEN_ENV = "NIGHTOWL_SERVE_TOKEN"
# PagerDuty v3 event types that open or reopen an incident, and the one that closes it.
PAGERDUTY_FIRING = frozenset({"incident.triggered", "incident.reopened"})
PAGERDUTY_RESOLVED = frozenset({"incident.resolved"})


# Every key of the serve config and of one rule (fixtures/alerts/serve.yaml shows each, commented).
CONFIG_KEYS = frozenset(
    {
        "rules",
        "out",
        "token",
        "token_file",
        "token_env",
        "pagerduty_secret",
        "pagerduty_secret_file",
        "pagerduty_secret_env",
        "workers",
        "queue",
        "listen",
        "allow_invasive",
        "index_requires_token",
        "known_hosts",
        "ssh_config",
    }
)
RULE_KEYS = frozenset({"name", "match", "runbook", "host", "params", "on_resolved"})


class ConfigError(ValueError):
    """The serve config is unusable; the message names the file and the key."""


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

    @property
    def name(self) -> str:
        return self.labels.get("alertname") or self.labels.get("title") or "alert"

    @property
    def dedupe_key(self) -> tuple[str, str, str, str]:
        """Alertmanager redelivers the same alert on every group_interval: same fingerprint and start."""
        return (self.source, self.fingerprint, self.starts_at or "", self.status)

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


def parse_alertmanager(payload: Mapping[str, Any]) -> list[Alert]:
    if not isinstance(payload.get("alerts"), list):
        raise ValueError("not an Alertmanager webhook payload: no `alerts` list")
    alerts = []
    for item in payload["alerts"]:
        if not isinstance(item, Mapping):
            continue
        labels = _strings(item.get("labels"))
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


def parse_pagerduty(payload: Mapping[str, Any]) -> list[Alert]:
    event = payload.get("event")
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
        )
    ]


def parse_payload(payload: Any) -> list[Alert]:
    """Either sender's payload; raises ValueError for anything else."""
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


# --- rules ---------------------------------------------------------------------------------------
_MATCHER = re.compile(r"^\s*(?P<name>[A-Za-z_][A-Za-z0-9_]*)\s*(?P<op>=~|!~|!=|=)\s*(?P<value>.*?)\s*$")


@dataclass(frozen=True)
class Matcher:
    """An Alertmanager-style label matcher: ``name=value``, ``!=``, ``=~`` and ``!~`` (anchored regex)."""

    name: str
    op: str
    value: str

    def matches(self, labels: Mapping[str, str]) -> bool:
        actual = labels.get(self.name, "")
        if self.op == "=":
            return actual == self.value
        if self.op == "!=":
            return actual != self.value
        found = re.fullmatch(self.value, actual) is not None
        return found if self.op == "=~" else not found

    @classmethod
    def parse(cls, text: str) -> Matcher:
        match = _MATCHER.match(text)
        if match is None:
            raise ValueError(f"not a label matcher: {text!r} (expected name=value, !=, =~ or !~)")
        value = match.group("value")
        if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
            value = value[1:-1]
        if match.group("op") in ("=~", "!~"):
            re.compile(value)
        return cls(match.group("name"), match.group("op"), value)


@dataclass(frozen=True)
class Rule:
    name: str
    matchers: tuple[Matcher, ...]
    runbook: str
    host: str  # Jinja2 template over labels, annotations, alert -> a host spec
    params: dict[str, Any] = field(default_factory=dict)  # string values are templates too
    on_resolved: bool = False

    def matches(self, alert: Alert) -> bool:
        return all(m.matches(alert.labels) for m in self.matchers)


@dataclass(frozen=True)
class ServeConfig:
    rules: tuple[Rule, ...]
    out_dir: Path
    token: str | None = None
    pagerduty_secrets: tuple[str, ...] = ()
    workers: int = 2
    queue_size: int = 8
    listen: str = "127.0.0.1:9797"
    allow_invasive: bool = False
    index_requires_token: bool = True
    known_hosts: Path | None = None
    ssh_config: Path | None = None

    def rule_for(self, alert: Alert) -> Rule | None:
        return next((r for r in self.rules if r.matches(alert)), None)


def _secret(doc: Mapping[str, Any], key: str, where: str, default_env: str | None = None) -> str | None:
    """A secret from ``<key>``, ``<key>_file`` or ``<key>_env`` (so the config file need not hold it)."""
    if doc.get(f"{key}_file"):
        path = Path(str(doc[f"{key}_file"])).expanduser()
        try:
            return path.read_text().strip() or None
        except OSError as exc:
            raise ConfigError(f"{where}: {key}_file: cannot read {path}: {exc}") from None
    if doc.get(f"{key}_env"):
        return os.environ.get(str(doc[f"{key}_env"])) or None
    if doc.get(key):
        return str(doc[key])
    return os.environ.get(default_env) or None if default_env else None


def _rule(item: Any, index: int, where: str) -> Rule:
    from nightowl import runbooks

    here = f"{where}: rules[{index}]"
    if not isinstance(item, Mapping):
        raise ConfigError(f"{here}: a rule is a mapping with match, runbook and host")
    unknown = set(item) - RULE_KEYS
    if unknown:
        raise ConfigError(f"{here}: unknown key(s) {', '.join(sorted(unknown))}")
    for key in ("match", "runbook", "host"):
        if not item.get(key):
            raise ConfigError(f"{here}: `{key}` is required")
    raw = item["match"]
    texts = (
        [f"{k}={v}" for k, v in raw.items()]
        if isinstance(raw, Mapping)
        else ([raw] if isinstance(raw, str) else list(raw))
    )
    try:
        matchers = tuple(Matcher.parse(str(t)) for t in texts)
        runbooks.resolve(str(item["runbook"]))
    except (ValueError, FileNotFoundError, re.error) as exc:
        raise ConfigError(f"{here}: {exc}") from None
    params = item.get("params") or {}
    if not isinstance(params, Mapping):
        raise ConfigError(f"{here}: params is a mapping")
    return Rule(
        str(item.get("name") or f"rule-{index + 1}"),
        matchers,
        str(item["runbook"]),
        str(item["host"]),
        dict(params),
        bool(item.get("on_resolved", False)),
    )


def load_config(path: Path, out_dir: Path | None = None, for_receiver: bool = True) -> ServeConfig:
    """Read the YAML config of ``nightowl serve`` (see fixtures/alerts/serve.yaml)."""
    import yaml

    where = str(path)
    try:
        doc = yaml.safe_load(Path(path).read_text()) or {}
    except (OSError, yaml.YAMLError) as exc:
        raise ConfigError(f"{where}: {exc}") from None
    if not isinstance(doc, Mapping):
        raise ConfigError(f"{where}: the config is a mapping")
    unknown = set(doc) - CONFIG_KEYS
    if unknown:
        raise ConfigError(f"{where}: unknown key(s) {', '.join(sorted(unknown))}")
    rules = tuple(_rule(item, i, where) for i, item in enumerate(doc.get("rules") or []))
    if not rules:
        raise ConfigError(f"{where}: no rules: nothing would ever be captured")
    # The token and the PagerDuty secret guard the receiver's HTTP endpoint; `triage --alert` reads a
    # saved payload and needs neither (for_receiver=False).
    token = _secret(doc, "token", where, DEFAULT_TOKEN_ENV) if for_receiver else None
    if for_receiver and not token:
        raise ConfigError(f"{where}: no bearer token (set token_file, token_env or ${DEFAULT_TOKEN_ENV})")
    secret = _secret(doc, "pagerduty_secret", where) if for_receiver else None
    try:
        workers, queue_size = int(doc.get("workers", 2)), int(doc.get("queue", 8))
    except (TypeError, ValueError):
        raise ConfigError(f"{where}: workers and queue are numbers") from None
    if not (1 <= workers <= 64 and 1 <= queue_size <= 10000):
        raise ConfigError(f"{where}: workers must be 1-64 and queue 1-10000")
    from nightowl.paths import default_out_dir

    out = out_dir or (Path(str(doc["out"])).expanduser() if doc.get("out") else default_out_dir())
    return ServeConfig(
        rules=rules,
        out_dir=out,
        token=token,
        pagerduty_secrets=tuple(s.strip() for s in (secret or "").split(",") if s.strip()),
        workers=workers,
        queue_size=queue_size,
        listen=str(doc.get("listen") or "127.0.0.1:9797"),
        allow_invasive=bool(doc.get("allow_invasive", False)),
        index_requires_token=bool(doc.get("index_requires_token", True)),
        known_hosts=Path(str(doc["known_hosts"])).expanduser() if doc.get("known_hosts") else None,
        ssh_config=Path(str(doc["ssh_config"])).expanduser() if doc.get("ssh_config") else None,
    )


# --- host templates --------------------------------------------------------------------------------
_SAFE_SPEC = re.compile(r"^[A-Za-z0-9_.:@/?=&\[\]%+~-]{1,512}$")


def _hostonly(value: str) -> str:
    """``10.0.0.5:9400`` -> ``10.0.0.5``, ``[fe80::1]:9400`` -> ``fe80::1``, ``gpu-17`` -> ``gpu-17``."""
    value = str(value)
    if value.startswith("[") and "]" in value:
        return value[1 : value.index("]")]
    return value.rsplit(":", 1)[0] if value.count(":") == 1 else value


def render_host(rule: Rule, alert: Alert) -> str:
    """The host spec a rule names for an alert. Labels fill the template; they cannot change its scheme."""
    from jinja2 import StrictUndefined
    from jinja2.sandbox import SandboxedEnvironment

    env = SandboxedEnvironment(undefined=StrictUndefined, autoescape=False)
    env.filters["hostonly"] = _hostonly
    context = {"labels": alert.labels, "annotations": alert.annotations, "alert": alert.record()}
    spec = env.from_string(rule.host).render(**context).strip()
    literal_prefix = rule.host.split("{", 1)[0]
    if not _SAFE_SPEC.match(spec) or host_name(spec).startswith("-") or ".." in spec.split("/"):
        raise ValueError(f"rule {rule.name}: host {spec!r} is not a host spec")
    for scheme in ("replay:", "local"):
        if spec.startswith(scheme) and not literal_prefix.startswith(scheme):
            raise ValueError(f"rule {rule.name}: a label may not turn the host into {scheme!r}")
    return spec


def render_params(rule: Rule, alert: Alert) -> dict[str, Any]:
    from jinja2 import StrictUndefined
    from jinja2.sandbox import SandboxedEnvironment

    env = SandboxedEnvironment(undefined=StrictUndefined, autoescape=False)
    context = {"labels": alert.labels, "annotations": alert.annotations, "alert": alert.record()}
    return {k: env.from_string(v).render(**context) if isinstance(v, str) else v for k, v in rule.params.items()}


def host_name(spec: str) -> str:
    """What the bundle calls the host: the directory of a replay, the host of a URL, else the spec."""
    if spec.startswith("replay:"):
        return Path(spec[len("replay:") :]).name or spec
    if "://" in spec:
        from urllib.parse import urlsplit

        return urlsplit(spec).hostname or spec
    return spec.rsplit("@", 1)[-1]
