"""The YAML config of ``nightowl serve`` (fixtures/alerts/serve.yaml shows every key, commented).

Loading checks every key and every rule up front, so a typo fails at start-up with the file and
the key named, never at 3 a.m. when the first alert arrives.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from nightowl.library.runbooks import RunbookLibrary
from nightowl.receiver.credentials import read_secret
from nightowl.receiver.notify import NotifyConfig, parse_notify
from nightowl.receiver.payload import Alert
from nightowl.receiver.rules import Matcher, Rule, split_host_template
from nightowl.receiver.sections import known_section

DEFAULT_TOKEN_ENV = "NIGHTOWL_SERVE_TOKEN"

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
        "notify",
        "session_hours",
        "cookie_secure",
        "command_timeout",
        "host_timeout",
        "storm",
    }
)
RULE_KEYS = frozenset(
    {
        "name",
        "match",
        "runbook",
        "host",
        "params",
        "on_resolved",
        "label_urls",
        "command_timeout",
        "host_timeout",
        "storm_by",
    }
)
STORM_KEYS = frozenset({"by", "window", "max_hosts", "workers", "queue"})
_LABEL_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


class ConfigError(ValueError):
    """The serve config is unusable; the message names the file and the key."""


@dataclass(frozen=True)
class RunLimits:
    """A capture's deadlines in seconds, as triage's --command-timeout and --host-timeout (None: none)."""

    command_timeout: float | None = None
    host_timeout: float | None = None


@dataclass(frozen=True)
class StormConfig:
    """How alerts of one failure domain fold into one capture (docs/receiver.md#alert-storms).

    ``by``: the labels that name a domain (``rack``, ``switch``), tried in order; a rule's
    ``storm_by`` (a label, or ``rule``) overrides them. Firing alerts of one rule and one domain
    value arriving within ``window`` seconds of the first become one capture over their hosts, at
    most ``max_hosts`` hosts a capture. Storm captures have a lane of their own: ``workers`` and
    ``queue`` apart from the receiver's, so a storm never holds up another alert."""

    by: tuple[str, ...] = ()
    window_s: float = 5.0
    max_hosts: int = 64
    workers: int = 1
    queue_size: int = 4


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
    notify: NotifyConfig = NotifyConfig()
    session_hours: float = 12.0  # a browser login lasts this long
    cookie_secure: bool = False  # mark the session cookie Secure (set it when a TLS proxy fronts serve)
    limits: RunLimits = RunLimits()  # the top-level command_timeout and host_timeout: rules that set none
    storm: StormConfig = StormConfig()
    runbooks: RunbookLibrary = RunbookLibrary()  # the folders of the command that read the config
    history: Path | None = None  # the history store that command chose (--history; None: off)

    def rule_for(self, alert: Alert) -> Rule | None:
        return next((r for r in self.rules if r.matches(alert)), None)

    def limits_for(self, rule_name: str | None) -> RunLimits:
        """The rule's timeouts, each one it does not set taken from the config's defaults."""
        rule = next((r for r in self.rules if r.name == rule_name), None)
        if rule is None:
            return self.limits
        return RunLimits(
            command_timeout=rule.command_timeout if rule.command_timeout is not None else self.limits.command_timeout,
            host_timeout=rule.host_timeout if rule.host_timeout is not None else self.limits.host_timeout,
        )


def _secret(doc: Mapping[str, Any], key: str, where: str, default_env: str | None = None) -> str | None:
    """A secret from ``<key>``, ``<key>_file`` or ``<key>_env`` (so the config file need not hold it)."""
    try:
        return read_secret(doc, key, where, default_env)
    except ValueError as exc:
        raise ConfigError(str(exc)) from None


def _rule(item: Any, index: int, where: str, runbooks: RunbookLibrary) -> Rule:
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
        split_host_template(str(item["host"]))
    except (ValueError, FileNotFoundError, re.error) as exc:
        raise ConfigError(f"{here}: {exc}") from None
    params = item.get("params") or {}
    if not isinstance(params, Mapping):
        raise ConfigError(f"{here}: params is a mapping")
    label_urls = item.get("label_urls") or []
    if not isinstance(label_urls, list) or not all(isinstance(k, str) and k in params for k in label_urls):
        raise ConfigError(f"{here}: label_urls is a list of this rule's params")
    return Rule(
        str(item.get("name") or f"rule-{index + 1}"),
        matchers,
        str(item["runbook"]),
        str(item["host"]),
        dict(params),
        bool(item.get("on_resolved", False)),
        tuple(label_urls),
        command_timeout=_seconds(item, "command_timeout", here),
        host_timeout=_seconds(item, "host_timeout", here),
        storm_by=_storm_by(item, here),
    )


def _storm_by(item: Mapping[str, Any], where: str) -> str | None:
    """A rule's ``storm_by``: a label name, or ``rule`` (all its firing alerts within the window fold)."""
    value = item.get("storm_by")
    if value is None:
        return None
    if not isinstance(value, str) or not _LABEL_NAME.match(value):
        raise ConfigError(f"{where}: storm_by is a label name or `rule` (got {value!r})")
    return value


def parse_storm(doc: Any, where: str) -> StormConfig:
    """The ``storm`` section; ConfigError names the file and the key."""
    if not known_section(doc, "storm", STORM_KEYS, where, ConfigError):
        return StormConfig()
    by = doc.get("by") or []
    by = [by] if isinstance(by, str) else by
    if not isinstance(by, list) or not all(isinstance(b, str) and _LABEL_NAME.match(b) for b in by):
        raise ConfigError(f"{where}: storm.by is a label name or a list of them")
    try:
        window = float(doc.get("window", 5.0))
        max_hosts, workers, size = int(doc.get("max_hosts", 64)), int(doc.get("workers", 1)), int(doc.get("queue", 4))
    except (TypeError, ValueError):
        raise ConfigError(f"{where}: storm: window, max_hosts, workers and queue are numbers") from None
    if not (0 < window <= 600 and 2 <= max_hosts <= 1024 and 1 <= workers <= 16 and 1 <= size <= 1000):
        raise ConfigError(f"{where}: storm: window 0-600 s, max_hosts 2-1024, workers 1-16, queue 1-1000")
    return StormConfig(tuple(by), window, max_hosts, workers, size)


def _seconds(doc: Mapping[str, Any], key: str, where: str) -> float | None:
    """A timeout in seconds: a positive number, or absent (None)."""
    value = doc.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value <= 86400:
        raise ConfigError(f"{where}: {key} must be a number of seconds, more than 0 and at most 86400 (got {value!r})")
    return float(value)


def _default_limits(doc: Mapping[str, Any], where: str) -> RunLimits:
    """The config's own timeouts, for every rule that sets none (none set: each collector's own timeout)."""
    return RunLimits(_seconds(doc, "command_timeout", where), _seconds(doc, "host_timeout", where))


def load_config(
    path: Path,
    out_dir: Path | None = None,
    for_receiver: bool = True,
    runbooks: RunbookLibrary | None = None,
    history: Path | None = None,
) -> ServeConfig:
    """Read the YAML config of ``nightowl serve`` (see fixtures/alerts/serve.yaml); its rules' runbooks are
    resolved through ``runbooks`` (the command's ``--runbook-path`` folders), kept for the captures with the
    ``history`` store the command chose, which they record into."""
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
    runbooks = runbooks or RunbookLibrary()
    rules = tuple(_rule(item, i, where, runbooks) for i, item in enumerate(doc.get("rules") or []))
    if not rules:
        raise ConfigError(f"{where}: no rules: nothing would ever be captured")
    # The token and the PagerDuty secret guard the receiver's HTTP endpoint; `triage --alert` reads a
    # saved payload and needs neither (for_receiver=False).
    token = _secret(doc, "token", where, DEFAULT_TOKEN_ENV) if for_receiver else None
    if for_receiver and not token:
        raise ConfigError(f"{where}: no bearer token (set token_file, token_env or ${DEFAULT_TOKEN_ENV})")
    if for_receiver and token:
        from nightowl.receiver.auth import token_problem

        problem = token_problem(token)
        if problem:
            raise ConfigError(f"{where}: token: {problem} (e.g. `openssl rand -hex 32`)")
    secret = _secret(doc, "pagerduty_secret", where) if for_receiver else None
    try:
        workers, queue_size = int(doc.get("workers", 2)), int(doc.get("queue", 8))
    except (TypeError, ValueError):
        raise ConfigError(f"{where}: workers and queue are numbers") from None
    if not (1 <= workers <= 64 and 1 <= queue_size <= 10000):
        raise ConfigError(f"{where}: workers must be 1-64 and queue 1-10000")
    try:
        notify = parse_notify(doc.get("notify"), where) if for_receiver else NotifyConfig()
        session_hours = float(doc.get("session_hours", 12))
    except (TypeError, ValueError) as exc:
        raise ConfigError(str(exc) if "notify" in str(exc) else f"{where}: session_hours is a number") from None
    if not 0 < session_hours <= 24 * 30:
        raise ConfigError(f"{where}: session_hours must be more than 0 and at most 720")
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
        notify=notify,
        session_hours=session_hours,
        cookie_secure=bool(doc.get("cookie_secure", False)),
        limits=_default_limits(doc, where),
        storm=parse_storm(doc.get("storm"), where),
        runbooks=runbooks,
        history=history,
    )
