"""The status update of a run: what the incident channel needs, in plain text (templates/status-update.md.j2).

Impact (which hosts or replicas, since when, what users see), the current action (the verdict's
first action and who runs it), the business action needed, and the time of the next update, which
is left to the person sending it. Written as ``status-update.md`` into every bundle.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from nightowl.paths import data_dir

FILE_NAME = "status-update.md"
TEMPLATE = "status-update.md.j2"
NEXT_UPDATE = "[fill in: e.g. in 30 minutes, or when the action above is done]"

# What users of the service see, by verdict id (docs/reference.md#verdicts); else by severity.
USERS_SEE: dict[str, str] = {
    "all-down-after-change": "errors on every request: the service is down",
    "all-down": "errors on every request: the service is down",
    "partial-down": "some requests fail or retry (those routed to the failing replicas)",
    "partial-after-change": "some requests fail or retry (those routed to the failing replicas)",
    "replica-oom": "failed or retried requests while the replica restarts; less capacity meanwhile",
    "replica-drift": "answers may differ depending on which replica serves them",
    "stream-broken": "streamed answers cut off before the end",
    "kv-full": "slower answers and longer waits for the first token",
    "traffic-surge": "slower answers and longer waits for the first token",
    "latency-up-flat-traffic": "slower answers",
    "slow-replica": "some requests slower than usual",
    "replica-restarted": "failed or retried requests during the restart",
}
BY_SEVERITY = {
    "critical": "errors or no answer on part of the traffic",
    "warning": "degraded service: slower or failed requests on part of the traffic",
    "info": "nothing yet",
    "ok": "nothing: no fault found",
}
# What the business side should do, by the verdict's first action.
BUSINESS: dict[str, str] = {
    "none": "none.",
    "scale-out": "expect degraded latency until capacity is added; pause or defer batch and bulk traffic.",
    "reconfigure": "hold further deploys to this service until the rollback is done.",
    "escalate": "none yet; expect degraded service while the cause is found.",
    "restart-app": "expect failed requests during the restart.",
    "reset-gpu": "expect reduced capacity while the GPU is reset.",
    "drain-and-reset": "expect reduced capacity while the node is drained.",
    "reboot-node": "expect reduced capacity while the node reboots.",
    "hardware-ticket": "expect reduced capacity until the hardware is replaced.",
}
WHO: dict[str, str] = {
    "hardware-ticket": "on-call opens the ticket; the datacenter or vendor replaces the part",
    "reconfigure": "on-call with the service's owners (rollback or config change)",
    "scale-out": "on-call (autoscaler or capacity owner)",
}


def _affected(hosts: list[dict[str, Any]]) -> list[str]:
    return [h["host"] for h in hosts if (h.get("verdict") or {}).get("action") not in (None, "none")]


def _first_sentence(text: str) -> str:
    head, dot, _ = text.partition(". ")
    return head + "." if dot else text


def context(summary: dict[str, Any], now: float | None = None) -> dict[str, Any]:
    hosts = summary.get("hosts") or []
    verdicts = [h["verdict"] for h in hosts if h.get("verdict")]
    worst = max(verdicts, key=lambda v: ["ok", "info", "warning", "critical"].index(v["severity"]), default=None)
    stamp = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(now if now is not None else time.time()))
    names = [h["host"] for h in hosts]
    affected = _affected(hosts)
    no_verdict = [h["host"] for h in hosts if not h.get("verdict")]
    if worst is None:
        impact = f"unknown: no verdict for {', '.join(no_verdict) or 'any host'} (cannot judge yet)"
        action, users_see, business = "find out why nightowl got no evidence (see the bundle)", "unknown", "none yet."
    else:
        named = _named_hosts(worst, affected, names)
        impact = f"{worst['id']} on {', '.join(named) or 'none'} ({len(names)} checked: {', '.join(names)})"
        action = f"{worst['action']}: {_first_sentence(worst['summary'])}"
        users_see = USERS_SEE.get(worst["id"], BY_SEVERITY[worst["severity"]])
        business = BUSINESS.get(worst["action"], "none yet.")
    next_step = (worst or {}).get("next") or {}
    return {
        "service": summary.get("service") or ", ".join(names),
        "now": stamp,
        "impact": impact,
        "since": f"before {stamp} (found by this check; the onset is earlier, see the dashboards)",
        "users_see": users_see,
        "action": action,
        "who": WHO.get((worst or {}).get("action", ""), "on-call"),
        "next_command": next_step.get("command"),
        "business": business,
        "next_update": NEXT_UPDATE,
        "runbook": summary.get("runbook"),
        "run_id": summary.get("run_id"),
        "bundle": summary.get("bundle"),
    }


def _named_hosts(verdict: dict[str, Any], affected: list[str], names: list[str]) -> list[str]:
    """The replicas the verdict is about: the next step's hosts, else those named in its summary."""
    hosts = (verdict.get("next") or {}).get("hosts") or []
    if hosts:
        return list(hosts)
    mentioned = [n for n in names if n in verdict.get("summary", "")]
    return mentioned or affected


def render(summary: dict[str, Any], now: float | None = None) -> str:
    import jinja2  # lazy: keeps `nightowl --help` fast

    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(data_dir("templates"))),
        autoescape=False,  # noqa: S701 - plain text for chat, never HTML
        keep_trailing_newline=True,
    )
    return env.get_template(TEMPLATE).render(**context(summary, now))


def write(bundle: Path, summary: dict[str, Any]) -> Path:
    path = Path(bundle) / FILE_NAME
    path.write_text(render(summary))
    return path
