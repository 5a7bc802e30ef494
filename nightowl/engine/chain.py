"""Runbook chaining: a verdict names the runbook to run next, on which hosts, with which parameters.

A verdict's ``next`` is ``{runbook, hosts, params}``: ``hosts`` is an expression yielding a list of
host names (``replica_compare.down``), each ``params`` value an expression too (a mapping keyed by
host names becomes a per-host parameter, see ``params_for_host``). ``resolve`` turns it into the
exact command for a person (``nightowl triage xid --host r2``), which ``triage --follow`` runs at
once into the same bundle. The engine does not know where runbooks live: the caller checks that
the named runbook exists and takes the parameters given (``check``).
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any

from nightowl.engine.expressions import ExpressionError, check_condition, evaluate_value
from nightowl.engine.runbook_data import NextSpecData

if TYPE_CHECKING:
    from nightowl.engine.model import NextSpec


def params_for_host(params: Mapping[str, Any], host: str) -> dict[str, Any]:
    """A parameter given as a mapping that names this host takes this host's value.

    So one run can reach replicas on different ports (``base_url={r1: http://10.0.0.5:8000, ...}``);
    a mapping that does not name the host leaves the parameter unset there.
    """
    out = dict(params)
    for name, value in params.items():
        if isinstance(value, Mapping) and value and all(isinstance(k, str) for k in value):
            out[name] = value.get(host)
    return out


def _as_hosts(value: Any) -> list[str]:
    if value is None:
        return []
    if isinstance(value, str):
        return [value]
    if isinstance(value, Mapping):
        return [str(k) for k in value]
    if isinstance(value, Iterable):
        return [str(v) for v in value if v is not None]
    return [str(value)]


def _param_text(value: Any) -> str:
    if isinstance(value, (dict, list)):
        return json.dumps(value, separators=(", ", ": "))
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


NODE_PLACEHOLDER = "NODE"  # printed where no host is known: a word to replace, not a shell-quoted "<host>"


def command(runbook: str, hosts: list[str], params: Mapping[str, Any]) -> str:
    """The exact command line a person would type (shell-quoted)."""
    argv = ["nightowl", "triage", runbook]
    for host in hosts:
        argv += ["--host", host]
    for name, value in params.items():
        if value is not None:
            argv += ["--param", f"{name}={_param_text(value)}"]
    return shlex.join(argv)


def resolve(spec: NextSpec | NextSpecData, ctx: Mapping[str, Any]) -> dict[str, Any]:
    """The next step with its expressions evaluated; an expression that fails is reported, not raised."""
    out: dict[str, Any] = {"runbook": spec.runbook, "hosts": [], "params": {}, "why": spec.why}
    problems = []
    try:
        out["hosts"] = _as_hosts(evaluate_value(spec.hosts, dict(ctx)))
    except ExpressionError as exc:
        problems.append(f"hosts: {exc}")
    for name, source in spec.params.items():
        try:
            out["params"][name] = evaluate_value(source, dict(ctx)) if isinstance(source, str) else source
        except ExpressionError as exc:
            problems.append(f"params.{name}: {exc}")
    if problems:
        out["error"] = "; ".join(problems)
    if not out["hosts"]:  # nothing named a node (a replica reached by URL only): the person names it
        out["needs_host"] = True
    out["command"] = command(spec.runbook, out["hosts"] or [NODE_PLACEHOLDER], out["params"])
    return out


def expressions(spec: NextSpec | NextSpecData) -> list[tuple[tuple[str, ...], str]]:
    """(relative path, expression) of every expression a ``next`` holds, for validation."""
    found: list[tuple[tuple[str, ...], str]] = [(("hosts",), spec.hosts)]
    found += [(("params", name), source) for name, source in spec.params.items() if isinstance(source, str)]
    return found


def check(
    spec: NextSpec | NextSpecData, declared_params: Callable[[str], Iterable[str] | None]
) -> list[tuple[tuple[str, ...], str]]:
    """Problems with a ``next``: the runbook is unknown, a parameter it does not take, a bad expression.

    ``declared_params(runbook)`` gives the parameter names of a runbook, or None when none is known by
    that name.
    """
    problems: list[tuple[tuple[str, ...], str]] = []
    declared = declared_params(spec.runbook)
    if declared is None:
        problems.append((("runbook",), f"next runbook {spec.runbook!r} does not exist"))
    else:
        for name in sorted(set(spec.params) - set(declared)):
            problems.append((("params", name), f"runbook {spec.runbook!r} has no parameter {name!r}"))
    for rel, source in expressions(spec):
        try:
            check_condition("(" + source + ") is not none")
        except ExpressionError as exc:
            problems.append((rel, str(exc)))
    return problems
