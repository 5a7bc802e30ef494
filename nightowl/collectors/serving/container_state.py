"""`container-state`: how the serving container last ended, from `docker inspect` or `kubectl get pod -o json`.

Reads ``{oom_killed, exit_code, restart_count, reason}`` (docs/sources.md#host-oom: Docker inspect,
Kubernetes ContainerStateTerminated):

* Docker: ``State.OOMKilled``, ``State.ExitCode`` and ``RestartCount`` of ``docker inspect``;
* Kubernetes: ``status.containerStatuses[*]``: ``lastState.terminated`` (the previous run, the one
  that died) or ``state.terminated`` (still down), ``reason`` (``OOMKilled``, ``Error``, ...),
  ``exitCode`` and ``restartCount``.

Exit code 137 is 128 + SIGKILL. Only an OOM record (``OOMKilled``) makes it an OOM; 137 without
one is an external kill (liveness probe, eviction, ``docker kill``, preemption) [docs/sources.md#host-oom, M], which
``external_kill`` says. Pasted output is often cut mid-JSON, so a reader of the ``"Key": value``
lines takes over when the JSON does not load; it never raises.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field, replace
from typing import Any

from nightowl.collectors.base import Collector, registered, to_jsonable
from nightowl.collectors.serving.engine_args import from_argv

KIND = "container-state"
SIGKILL_EXIT = 137  # 128 + 9
OOM_REASONS = frozenset({"OOMKilled", "OOM Killed"})  # k8s; kubelet of 2014 (kubernetes PR 3044)


@dataclass(frozen=True)
class ContainerEnd:
    name: str | None
    oom_killed: bool | None
    exit_code: int | None
    restart_count: int | None
    reason: str | None
    running: bool | None
    finished_at: str | None


@dataclass(frozen=True)
class ContainerState:
    kind: str = KIND
    source: str | None = None  # docker | kubernetes
    name: str | None = None
    oom_killed: bool | None = None
    exit_code: int | None = None
    restart_count: int | None = None
    reason: str | None = None
    running: bool | None = None
    finished_at: str | None = None
    containers: tuple[ContainerEnd, ...] = ()
    warnings: tuple[str, ...] = ()
    # issue 17: what the replica runs and where, compared across replicas by first-look
    image: str | None = None  # docker Config.Image, a pod container's image
    node: str | None = None  # a pod's spec.nodeName (docker: the host itself, not in its inspect)
    engine_args: dict[str, str] = field(default_factory=dict)  # the container's --options


def parse(text: str) -> ContainerState:
    """docker inspect / kubectl pod JSON (or a cut paste of either) -> the last end of the container."""
    if not text.strip():
        return ContainerState()
    document = _load_json(text)
    if document is not None:
        ends, source = _from_document(document)
        if ends:
            state = _state(source, ends, ())
            return replace(state, **_identity(document, state.name))
    ends, source = _from_lines(text)
    if ends:
        return _state(source, ends, ("output is not complete JSON: read field by field",))
    return ContainerState(warnings=("no docker State nor kubernetes containerStatuses found",))


def _load_json(text: str) -> Any:
    start = min((i for i in (text.find("{"), text.find("[")) if i >= 0), default=-1)
    if start < 0:
        return None
    try:
        return json.loads(text[start:])
    except ValueError:
        return None


def _from_document(document: Any) -> tuple[list[ContainerEnd], str | None]:
    items = document if isinstance(document, list) else document.get("items", [document])
    ends: list[ContainerEnd] = []
    source = None
    for item in items:
        if not isinstance(item, dict):
            continue
        if "OOMKilled" in item or "ExitCode" in item:  # a pasted `"State": {...}` block alone
            item = {"State": item}
        if "containerStatuses" in item:  # a pasted pod `"status": {...}` object alone
            item = {"status": item}
        if isinstance(item.get("State"), dict):  # docker inspect
            source = "docker"
            ends.append(_docker_end(item))
        status = item.get("status")
        if isinstance(status, dict):
            for entry in (status.get("initContainerStatuses") or []) + (status.get("containerStatuses") or []):
                if isinstance(entry, dict):
                    source = "kubernetes"
                    ends.append(_kubernetes_end(entry))
    return ends, source


def _identity(document: Any, name: str | None) -> dict[str, Any]:
    """Image, node and command-line options of the container ``name`` (docker inspect or a pod)."""
    items = document if isinstance(document, list) else document.get("items", [document])
    for item in (i for i in items if isinstance(i, dict)):
        config = item.get("Config")
        if isinstance(config, dict):  # docker inspect: Args are the words after the entrypoint's program
            argv = item.get("Args") if isinstance(item.get("Args"), list) else config.get("Cmd")
            argv = argv if isinstance(argv, list) else []
            image = config.get("Image") if isinstance(config.get("Image"), str) else None
            return {"image": image, "engine_args": from_argv(argv)}
        spec = item.get("spec")
        if isinstance(spec, dict):
            containers = [c for c in spec.get("containers") or [] if isinstance(c, dict)]
            chosen = next((c for c in containers if c.get("name") == name), containers[0] if containers else {})
            argv = [*(chosen.get("command") or []), *(chosen.get("args") or [])]
            node = spec.get("nodeName") if isinstance(spec.get("nodeName"), str) else None
            image = chosen.get("image") if isinstance(chosen.get("image"), str) else None
            return {"image": image, "node": node, "engine_args": from_argv(argv)}
        status: dict[str, Any] = item["status"] if isinstance(item.get("status"), dict) else item
        for entry in status.get("containerStatuses") or []:  # a pod's status alone still names the image
            if isinstance(entry, dict) and entry.get("name") == name and isinstance(entry.get("image"), str):
                return {"image": entry["image"]}
    return {}


def _docker_end(item: dict[str, Any]) -> ContainerEnd:
    state = item["State"]
    name = item.get("Name")
    return ContainerEnd(
        name=name.lstrip("/") if isinstance(name, str) else None,
        oom_killed=_bool(state.get("OOMKilled")),
        exit_code=_int(state.get("ExitCode")),
        restart_count=_int(item.get("RestartCount")),
        reason=state.get("Error") or state.get("Status") or None,
        running=_bool(state.get("Running")),
        finished_at=state.get("FinishedAt"),
    )


def _kubernetes_end(entry: dict[str, Any]) -> ContainerEnd:
    terminated = _terminated(entry.get("state")) or _terminated(entry.get("lastState"))
    reason = terminated.get("reason") if terminated else None
    return ContainerEnd(
        name=entry.get("name"),
        oom_killed=(reason in OOM_REASONS) if terminated else None,
        exit_code=_int(terminated.get("exitCode")) if terminated else None,
        restart_count=_int(entry.get("restartCount")),
        reason=reason,
        running=isinstance((entry.get("state") or {}).get("running"), dict),
        finished_at=terminated.get("finishedAt") if terminated else None,
    )


def _terminated(state: Any) -> dict[str, Any] | None:
    if isinstance(state, dict) and isinstance(state.get("terminated"), dict):
        return state["terminated"]
    return None


_FIELD = re.compile(
    r'"(?P<key>OOMKilled|ExitCode|RestartCount|Running|Status|FinishedAt|exitCode|reason'
    r'|restartCount|finishedAt|name|Name)"\s*:\s*(?P<value>"[^"]*"|true|false|-?\d+)'
)


def _from_lines(text: str) -> tuple[list[ContainerEnd], str | None]:
    """Field-by-field reader for cut pastes: the first value of each key wins."""
    found: dict[str, Any] = {}
    for match in _FIELD.finditer(text):
        found.setdefault(match.group("key"), json.loads(match.group("value")))
    if "OOMKilled" in found or "ExitCode" in found:
        name = found.get("Name")
        end = ContainerEnd(
            name=name.lstrip("/") if isinstance(name, str) else None,
            oom_killed=_bool(found.get("OOMKilled")),
            exit_code=_int(found.get("ExitCode")),
            restart_count=_int(found.get("RestartCount")),
            reason=found.get("Status"),
            running=_bool(found.get("Running")),
            finished_at=found.get("FinishedAt"),
        )
        return [end], "docker"
    if "exitCode" in found or "restartCount" in found:
        reason = found.get("reason")
        end = ContainerEnd(
            name=found.get("name"),
            oom_killed=(reason in OOM_REASONS) if "exitCode" in found else None,
            exit_code=_int(found.get("exitCode")),
            restart_count=_int(found.get("restartCount")),
            reason=reason,
            running=None,
            finished_at=found.get("finishedAt"),
        )
        return [end], "kubernetes"
    return [], None


def _state(source: str | None, ends: list[ContainerEnd], warnings: tuple[str, ...]) -> ContainerState:
    chosen = _most_telling(ends)
    return ContainerState(
        source=source,
        name=chosen.name,
        oom_killed=chosen.oom_killed,
        exit_code=chosen.exit_code,
        restart_count=chosen.restart_count,
        reason=chosen.reason,
        running=chosen.running,
        finished_at=chosen.finished_at,
        containers=tuple(ends),
        warnings=warnings,
    )


def _most_telling(ends: list[ContainerEnd]) -> ContainerEnd:
    """The container of a pod that explains the incident: OOM-killed, then SIGKILLed, then died, then first."""
    for test in (
        lambda e: e.oom_killed is True,
        lambda e: e.exit_code == SIGKILL_EXIT,
        lambda e: e.exit_code not in (None, 0),
    ):
        chosen = next((e for e in ends if test(e)), None)
        if chosen is not None:
            return chosen
    return ends[0]


def _bool(value: Any) -> bool | None:
    return value if isinstance(value, bool) else None


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def facts(result: ContainerState) -> dict[str, Any]:
    """Contract-style JSON plus `sigkilled` (exit 137) and `external_kill` (137 with no OOM record)."""
    out: dict[str, Any] = to_jsonable(result)
    out["sigkilled"] = result.exit_code == SIGKILL_EXIT
    out["external_kill"] = result.exit_code == SIGKILL_EXIT and result.oom_killed is not True
    return out


COLLECTOR = Collector(
    **registered(KIND),
    commands=(
        ("docker", "inspect", "--", "{container}"),
        ("kubectl", "get", "pod", "{pod}", "-n", "{namespace}", "-o", "json"),
    ),
    parse=parse,
    facts=facts,
    invasive=False,
)
