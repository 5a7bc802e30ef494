"""The files a model's runbook parameters make nightowl read, held to the server's ``read_roots``.

A ``path`` parameter (``engine_log_file``, ``nccl_log``, ``xid_policy``, ...: every parameter a runbook
declares ``type: path``, checked as engine/params.py says) names a file that is read either

- by a collector's command on the host (its ``{name}`` fills an argv element of a read-only shape,
  collectors/readonly_commands.yaml: ``tail -- {engine_log_file}``): on ``local`` it must be inside the
  roots; on a live remote host nightowl cannot resolve it against them (symlinks there are the host's),
  so it is refused when ``read_roots`` is set; a replay reads only what was recorded, so it is not checked;
- or by nightowl itself on the server's machine (``xid_policy``, ``model_config``): inside the roots
  whatever the hosts, replays included.

``PATH_LISTS`` are text parameters a collector reads as a ``:``-separated list of paths (``$PATH`` style,
a leading ``~/`` for the home folder): no runbook can declare that type, so they are named here, and
tests/mcp/test_mcp_paths.py fails when a command shape reads a file from a parameter this module misses.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from nightowl.mcp.config import ConfigError, ServerConfig
from nightowl.mcp.hooks import ToolError

# free_space.py's script: `space_paths` (and `space_path`, handed to the same script) split on ":".
PATH_LISTS = frozenset({"space_paths"})
_PLACEHOLDER = re.compile(r"\{(\w+)\}")


@functools.cache
def host_read() -> frozenset[str]:
    """Every parameter a read-only command shape takes as an argument: what a collector reads on the host."""
    from nightowl.collectors.readonly import ALLOWED

    return frozenset(name for shape in ALLOWED for element in shape for name in _PLACEHOLDER.findall(element))


def path_params(
    parameters: Mapping[str, Mapping[str, Any]], runbooks: Mapping[str, Mapping[str, Any]]
) -> frozenset[str]:
    """The parameters of one runbook (``schemas.runbook_parameters()[name]["parameters"]``) that name files: those
    it declares ``type: path``, and those any of ``runbooks`` declares so (a collector reads ``{engine_log_file}``
    the same way whichever runbook passes it, declared a path or not)."""
    return frozenset(parameters) & path_names(runbooks)


def path_names(runbooks: Mapping[str, Mapping[str, Any]]) -> frozenset[str]:
    """Every parameter name some runbook declares ``type: path``, and ``PATH_LISTS``."""
    declared = {name for info in runbooks.values() for name, spec in info["parameters"].items()}
    return frozenset(
        name for info in runbooks.values() for name, spec in info["parameters"].items() if spec.get("type") == "path"
    ) | (PATH_LISTS & declared)


def check_path_params(
    config: ServerConfig,
    runbooks: Mapping[str, Mapping[str, Any]],
    runbook: str,
    given: Mapping[str, Any],
    hosts: Iterable[str],
    also: Path | None,
) -> None:
    """Refuse (ToolError) a model-given path parameter that would make nightowl read outside ``read_roots``."""
    if not config.read_roots:
        return  # the documented default: anything the server's user (or a host's SSH user) can read
    hosts = tuple(hosts)
    live_local = [h for h in hosts if _is_local(h)]
    remote = [h for h in hosts if not _is_local(h) and not h.startswith("replay:")]
    from nightowl.engine.params import coerce

    declared = runbooks[runbook]["parameters"]
    for name in sorted(path_params(declared, runbooks) & set(given)):
        # as the run will read it: a `yaml` value may be a mapping host -> file (first-look's engine_log_file)
        paths = [p for p in _texts(coerce(name, declared[name]["type"], given[name])) if p]
        if not paths:
            continue
        on_host = name in host_read()
        if on_host and remote:
            raise ToolError(
                f"parameter {name} names a file on the live host {remote[0]!r}: refused over MCP while the "
                "server's config sets read_roots (a path on another machine cannot be checked against them; "
                "run it from the CLI, or triage a recording of the host with replay)"
            )
        if on_host and not live_local:
            continue  # replays only: nothing is read from the path
        for candidate, expand in (c for value in paths for c in _candidates(value, split=on_host)):
            try:
                config.readable(candidate, also=also, expand_user=expand)
            except ConfigError as exc:
                raise ToolError(f"parameter {name}: {exc}") from None


def _is_local(spec: str) -> bool:
    from nightowl.transports.hostspec import LOCAL_NAMES

    return spec.strip().lower() in LOCAL_NAMES


def _candidates(value: str, split: bool) -> list[tuple[str, bool]]:
    """Every path ``value`` can be read as: itself, each ``:``-part where a command's script splits it, and
    each with and without ``~`` expanded (``tail`` does not expand it, the free-space script and nightowl do)."""
    parts = [value, *(p for p in value.split(":") if p)] if split else [value]
    return [(part, expand) for part in dict.fromkeys(parts) for expand in (True, False)]


def _texts(value: Any) -> list[str]:
    """The strings of a parameter's value: itself, or the values of a mapping or list (never its keys: hosts)."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, Mapping):
        return [text for item in value.values() for text in _texts(item)]
    if isinstance(value, (list, tuple)):
        return [text for item in value for text in _texts(item)]
    return []
