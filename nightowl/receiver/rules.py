"""Which runbook on which host: label matchers, rules, and the host and parameter templates.

Rules map an alert to a runbook and a host spec by label matchers, in the order written: the first
rule that matches wins. A rule's ``host`` and string ``params`` are Jinja2 templates over the
alert's labels, annotations and record, rendered in a sandbox; a label can fill the template but
can never turn the host into ``local`` or a replay.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from nightowl.receiver.payload import Alert

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
