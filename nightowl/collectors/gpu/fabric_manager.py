"""``fabric-manager``: whether NVIDIA Fabric Manager runs on this host and what its log says, read-only.

On HGX boards with NVSwitch (A100/H100/H200/B200 8-GPU) the host's Fabric Manager configures the
switches; without it the GPUs stay out of the fabric and CUDA fails to start (NVIDIA Fabric Manager
User Guide, https://docs.nvidia.com/datacenter/tesla/fabric-manager-user-guide/index.html).
The collector runs ``systemctl is-active``, which prints one word (active, inactive, failed, activating,
...) and exits 3 when the unit is not active; a unit that is not installed also reads ``inactive``, so the
runbook judges this only where Fabric Manager is expected. The parser also reads what an operator saves
or pastes: ``systemctl status`` (its ``Active:`` line and journal tail), ``journalctl -u
nvidia-fabricmanager`` and ``/var/log/fabricmanager.log``. Each line is judged against the Fabric Manager
lines NVIDIA documents (nightowl/knowledge/fabric_manager_errors.csv, read by ``sxid_catalog``); an error
line no row names escalates. Errors before the last "Successfully configured" (a restart that recovered)
are history, not the state now.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from nightowl.collectors.base import Collector, registered, to_jsonable

KIND = "fabric-manager"
UNIT = "nvidia-fabricmanager"
# systemctl(1) is-active states (ActiveState of systemd.unit).
STATES = frozenset(
    {"active", "reloading", "inactive", "failed", "activating", "deactivating", "maintenance", "refreshing"}
)
# `systemctl status`: "     Active: active (running) since ..." / "Active: failed (Result: exit-code)".
_ACTIVE_LINE = re.compile(r"^\s*Active:\s*(?P<state>[a-z-]+)")
# The line Fabric Manager logs when it has configured every GPU and NVSwitch (FM user guide, "Starting FM").
CONFIGURED = "successfully configured all the available gpus and nvswitches"
# An error line of FM, its start script, systemd's view of the unit, or nvlsm (NVLink5): judged by the csv.
_ERROR_LINE = re.compile(
    r"\[ERROR\]|\[FATAL\]|\berror\b|\bfailed\b|can't|cannot|don'?t match|doesn't match|invalid value"
    r"|is \w+ module loaded\?|Exit code: [1-9]",
    re.IGNORECASE,
)
# Lines that name an error word without being one (FM's own INFO lines, systemd's pointers to the journal).
_NOT_ERRORS = re.compile(r"\[INFO\]|See \"systemctl status|journalctl -x|Nothing to do.*\bsuccess", re.IGNORECASE)
# Most urgent first: the action a set of error lines calls for is the first of these any line asks.
ACTION_ORDER = ("reboot-node", "drain-and-reset", "reset-gpu", "hardware-ticket", "reconfigure", "escalate")


@dataclass(frozen=True)
class FabricManagerState:
    kind: str
    warnings: tuple[str, ...]
    unit: str
    state: str | None
    active: bool | None
    configured: bool = False  # "Successfully configured all the available GPUs and NVSwitches" seen
    errors: tuple[dict[str, str], ...] = ()  # error lines after the last configuration: {line, action, meaning}
    log_lines: int = 0  # lines read as Fabric Manager log or journal


def _judge(line: str) -> dict[str, str] | None:
    from nightowl.collectors.gpu.sxid_catalog import fabric_manager_lines

    lowered = line.lower()
    for row in fabric_manager_lines():
        if row.pattern.lower() in lowered:
            if row.verdict_action == "none":
                return None
            return {"line": line.strip()[:300], "action": row.verdict_action, "meaning": row.meaning}
    if _ERROR_LINE.search(line) and not _NOT_ERRORS.search(line):
        return {"line": line.strip()[:300], "action": "escalate", "meaning": "a Fabric Manager error line"}
    return None


def parse(text: str) -> FabricManagerState:
    """``systemctl is-active``'s word, ``systemctl status``, the journal or the FM log; never raises."""
    lines = [line for line in str(text).splitlines() if line.strip()]
    if len(lines) == 1 and lines[0].strip().lower() in STATES:
        word = lines[0].strip().lower()
        return FabricManagerState(KIND, (), UNIT, word, word in ("active", "reloading"))
    state: str | None = None
    configured = False
    errors: list[dict[str, str]] = []
    for line in lines:
        active = _ACTIVE_LINE.match(line)
        if active is not None and active.group("state") in STATES:
            state = active.group("state")
            continue
        if CONFIGURED in line.lower():
            configured, errors = True, []  # what went wrong before it was recovered from
            continue
        judged = _judge(line)
        if judged is not None:
            errors.append(judged)
    read = sum(1 for line in lines if _looks_like_fm(line))
    warnings: tuple[str, ...] = ()
    if state is None and not configured and not errors and not read:
        first = lines[0].strip()[:80] if lines else ""
        warnings = (
            f"not a systemctl state or a Fabric Manager log: {first}" if first else "systemctl printed nothing",
        )
    active_now = state in ("active", "reloading") if state else (True if configured and not errors else None)
    return FabricManagerState(KIND, warnings, UNIT, state, active_now, configured, tuple(errors), read)


def _looks_like_fm(line: str) -> bool:
    lowered = line.lower()
    return any(
        word in lowered
        for word in ("fabricmanager", "fabric manager", "nv-fabricmanager", "nvswitch", "nvlsm", "[tid ")
    )


def worst_action(errors: tuple[dict[str, str], ...] | list[dict[str, str]]) -> str | None:
    """The most urgent action the error lines ask (ACTION_ORDER), None without errors."""
    actions = {error["action"] for error in errors}
    return next((action for action in ACTION_ORDER if action in actions), "escalate" if actions else None)


def facts(result: FabricManagerState) -> dict[str, Any]:
    data: dict[str, Any] = to_jsonable(result)
    data["error_action"] = worst_action(result.errors)
    # healthy: running or configured with no error since; unhealthy: an error line, or a unit failed; else unknown
    if result.errors or result.state == "failed":
        data["healthy"] = False
    elif result.active or result.configured:
        data["healthy"] = True
    else:
        data["healthy"] = None
    return data


COLLECTOR = Collector(**registered(KIND), commands=(("systemctl", "is-active", UNIT),), parse=parse, facts=facts)
