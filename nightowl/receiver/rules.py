"""Which runbook on which host: label matchers, rules, and the host and parameter templates.

Rules map an alert to a runbook and a host spec by label matchers, in the order written: the first
rule that matches wins. A rule's ``host`` and string ``params`` are Jinja2 templates over the
alert's labels, annotations and record, rendered in a sandbox. In a host template the expressions
may stand only where the host name goes, and what they render must be an RFC 1123 host name or an
IP address: a label names a host, never a scheme, user, port, jump or identity, nor ``local``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from nightowl.hostnames import host_name_problem
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
    label_urls: tuple[str, ...] = ()  # params whose URL (scheme, host) a label may choose
    # Seconds, as triage's --command-timeout and --host-timeout; None: the config's default.
    command_timeout: float | None = None
    host_timeout: float | None = None
    storm_by: str | None = None  # a label naming the failure domain, or "rule" (docs/receiver.md#alert-storms)

    def matches(self, alert: Alert) -> bool:
        return all(m.matches(alert.labels) for m in self.matchers)


# --- host templates --------------------------------------------------------------------------------
# A host template is literal text and ``{{ expression }}`` slots, and every slot lies in the host
# name: the template's literal text owns the scheme, user, port and query (jump, identity), so an
# alert's labels can fill a host name and nothing else (docs/receiver.md#what-a-label-may-fill).
_SLOT = re.compile(r"\{\{.*?\}\}", re.DOTALL)
_SLOT_MARK = "\x00"
# RFC 1123 section 2.1 host names: dot-separated labels of letters, digits and inner hyphens,
# 63 characters a label, 253 in all (https://www.rfc-editor.org/rfc/rfc1123#page-13).
_DNS_LABEL = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?")


@dataclass(frozen=True)
class HostTemplate:
    """A rule's host spec cut in three: literal ``prefix``, the ``host`` template, literal ``suffix``."""

    prefix: str
    host: str
    suffix: str


def split_host_template(template: str) -> HostTemplate:
    """Cut a host template around its host name; ValueError when a slot lies outside it."""
    if "{%" in template or "{#" in template:
        raise ValueError(f"host {template!r}: only {{{{ expressions }}}} are allowed, no {{% %}} or {{# #}}")
    slots = _SLOT.findall(template)
    skeleton = _SLOT.sub(_SLOT_MARK, template)
    if "{{" in skeleton or "}}" in skeleton:
        raise ValueError(f"host {template!r}: unbalanced {{{{ }}}}")
    start, end = _host_span(skeleton)
    if _SLOT_MARK in skeleton[:start] + skeleton[end:]:
        raise ValueError(
            f"host {template!r}: a label may fill only the host name, never the scheme, user, port or "
            "query (jump, identity): write those in the template"
        )
    pieces = iter(slots)

    def expand(text: str) -> str:
        return "".join(next(pieces) if ch == _SLOT_MARK else ch for ch in text)

    return HostTemplate(expand(skeleton[:start]), expand(skeleton[start:end]), expand(skeleton[end:]))


def _host_span(spec: str) -> tuple[int, int]:
    """Where the host name is in a spec (``replay:DIR/NAME``, ``ssh://user@host:port?q``, ``user@host:port``)."""
    if spec.startswith("replay:"):
        return spec.rfind("/") + 1 if "/" in spec else len("replay:"), len(spec)
    start = spec.index("://") + 3 if "://" in spec else 0
    end = len(spec)
    for stop in ("?", "#", "/") if "://" in spec else ("?",):
        found = spec.find(stop, start)
        end = found if found != -1 and found < end else end
    at = spec.rfind("@", start, end)
    start = at + 1 if at != -1 else start
    if spec.startswith("[", start) and "]" in spec[start:end]:
        return start + 1, spec.index("]", start)
    colon = spec.rfind(":", start, end)
    if colon != -1 and spec.count(":", start, end) == 1 and spec[colon + 1 : end].isdigit():
        return start, colon
    return start, end


def check_host_name(name: str) -> str:
    """An RFC 1123 host name or an IP address, else ValueError saying why (the value shown shortened).

    The rules of any host name (nightowl/hostnames.py) first; then, as a label is the sender's word,
    RFC 1123 strictly: no '_', no hyphen at either end of a label, no final dot."""
    problem = host_name_problem(name)
    if problem is not None:
        raise ValueError(f"host name {_shown(name)!r} is not an RFC 1123 name or an IP address: {problem}")
    if ":" in name:
        return name  # an IPv6 address: host_name_problem parsed it
    bad = next((label for label in name.split(".") if not _DNS_LABEL.fullmatch(label)), None)
    if bad is not None:
        raise ValueError(
            f"host name {_shown(name)!r} is not an RFC 1123 name: label {bad[:70]!r} "
            "(letters, digits and inner hyphens, 1-63 characters)"
        )
    return name


def _shown(name: str) -> str:
    return name if len(name) <= 80 else name[:77] + "..."


def _hostonly(value: str) -> str:
    """``10.0.0.5:9400`` -> ``10.0.0.5``, ``[fe80::1]:9400`` -> ``fe80::1``, ``gpu-17`` -> ``gpu-17``."""
    value = str(value)
    if value.startswith("[") and "]" in value:
        return value[1 : value.index("]")]
    return value.rsplit(":", 1)[0] if value.count(":") == 1 else value


def render_host(rule: Rule, alert: Alert) -> str:
    """The host spec a rule names for an alert: the labels fill the host name, the template the rest."""
    from jinja2 import StrictUndefined
    from jinja2.sandbox import SandboxedEnvironment

    if not _SLOT.search(rule.host):
        return rule.host.strip()  # all literal: the operator wrote the whole spec
    template = split_host_template(rule.host)
    env = SandboxedEnvironment(undefined=StrictUndefined, autoescape=False)
    env.filters["hostonly"] = _hostonly
    context = {"labels": alert.labels, "annotations": alert.annotations, "alert": alert.record()}
    name = env.from_string(template.host).render(**context).strip()
    try:
        check_host_name(name)
    except ValueError as exc:
        raise ValueError(f"rule {rule.name}: {exc}") from None
    if ":" in name and "://" in template.prefix and not template.prefix.endswith("["):
        # ssh://root@::1:22 would read the last group as a port: a URL needs [ ] around an IPv6 slot.
        raise ValueError(f"rule {rule.name}: IPv6 address {name!r} in a URL template without [ ] around the slot")
    if template.prefix.strip() == "" and template.suffix == "" and name.lower() == "local":
        raise ValueError(f"rule {rule.name}: a label may not turn the host into 'local'")
    return (template.prefix + name + template.suffix).strip()


def render_params(rule: Rule, alert: Alert) -> dict[str, Any]:
    """The rule's params for an alert. What a label fills stays where the template put it: a path
    never leaves the template's directory, and a URL's scheme and host come from a label only for a
    param the rule lists in ``label_urls`` (ValueError naming the rule and the param otherwise)."""
    from jinja2 import StrictUndefined
    from jinja2.sandbox import SandboxedEnvironment

    env = SandboxedEnvironment(undefined=StrictUndefined, autoescape=False)
    context = {"labels": alert.labels, "annotations": alert.annotations, "alert": alert.record()}
    rendered: dict[str, Any] = {}
    for key, value in rule.params.items():
        if not isinstance(value, str):
            rendered[key] = value
            continue
        text = env.from_string(value).render(**context)
        if _SLOT.search(value):
            problem = label_value_problem(key, value, text, key in rule.label_urls)
            if problem:
                raise ValueError(f"rule {rule.name}: parameter {key}: {problem}")
        rendered[key] = text
    return rendered


_FIXED_ORIGIN = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://[^/?#{}]+/")
_URLISH = re.compile(r"^\s*[A-Za-z][A-Za-z0-9+.-]*:(//)?")


def label_value_problem(key: str, template: str, text: str, url_allowed: bool = False) -> str | None:
    """Why a param rendered from labels escapes its template, or None."""
    import posixpath

    first = _SLOT.search(template)
    literal = template[: first.start()] if first else template
    if "://" in text or (_URLISH.match(text) and not _URLISH.match(literal or "x")):
        if not (url_allowed or _FIXED_ORIGIN.match(literal)):
            return (
                "a label may not choose a URL's scheme or host (list the param in the rule's `label_urls` to allow it)"
            )
        return None
    if ".." in text.replace("\\", "/").split("/"):
        return f"{_shown(text)!r}: a label may not climb out of the template's directory (..)"
    if "/" in literal:
        base = literal[: literal.rfind("/") + 1]
        normal = posixpath.normpath(text)
        inside = posixpath.normpath(base)
        if not (normal == inside or normal.startswith(inside.rstrip("/") + "/")):
            return f"{_shown(text)!r} is outside {base!r}, the template's directory"
    elif text.startswith("/"):
        return f"{_shown(text)!r}: a label may not name an absolute path"
    return None


def host_name(spec: str) -> str:
    """What the bundle calls the host: the directory of a replay, else the host the spec names as
    written, as a sweep names an inventory entry (``ssh://root@GPU-17:2222`` -> ``GPU-17``)."""
    from nightowl.transports.hostspec import written_host

    if spec.startswith("replay:"):
        return Path(spec[len("replay:") :]).name or spec
    try:
        return written_host(spec)
    except ValueError:
        return spec  # an operator's literal spec that will not parse: its capture fails, named as written
