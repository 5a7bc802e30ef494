"""A node condition through node-problem-detector's custom-plugin contract.

NPD (pkg/custompluginmonitor, documented in
https://github.com/kubernetes/node-problem-detector/blob/master/docs/custom_plugin_monitor.md) runs a
plugin, reads its exit status (0 OK, 1 NonOK, anything else Unknown) and its stdout, whitespace-trimmed
and cut at ``max_output_length`` bytes (default 80), as the condition's message; the condition's type
and reason are fixed in the monitor's rule. NonOK sets the condition True, so the condition names the
problem: ``NightowlGPUProblem`` (deploy/kubernetes/nightowl-npd-monitor.json). Without NPD,
``nightowl k8s condition`` sets ``NightowlGPUHealthy`` (the polarity of ``Ready``, reason = verdict id)
itself: fleet/k8s_condition.py. Pure: the `check` report and its exit status in, the plugin's exit
status and message out.
"""

from __future__ import annotations

from enum import IntEnum
from typing import Any

NPD_DEFAULT_MAX_OUTPUT_LENGTH = 80  # NPD's defaultMaxOutputLength (custompluginmonitor/types/config.go)


class PluginStatus(IntEnum):
    OK = 0
    NON_OK = 1
    UNKNOWN = 2


def plugin_result(
    report: dict[str, Any] | None, check_status: int, max_output_length: int = NPD_DEFAULT_MAX_OUTPUT_LENGTH
) -> tuple[PluginStatus, str]:
    """NPD's status and message for this node from `nightowl check --format json` and its exit status.

    Exit 1 (the node needs action) is NonOK, exit 0 OK, anything else (no verdict, usage error, a bug,
    killed) Unknown: a check that could not judge never reports a problem nor clears one. The message
    leads with the verdict id and the bundle id, so NPD's cut keeps what identifies the evidence.
    """
    status = {0: PluginStatus.OK, 1: PluginStatus.NON_OK}.get(check_status, PluginStatus.UNKNOWN)
    hosts = (report or {}).get("hosts") or [{}]
    host = hosts[0] if isinstance(hosts[0], dict) else {}
    verdict = host.get("verdict") or {}
    bundle = str((report or {}).get("run_id") or (report or {}).get("bundle") or "-").rsplit("/", 1)[-1]
    if verdict:
        text = f"{verdict.get('id')} [{bundle}] {verdict.get('summary') or ''}"
    else:
        text = f"no verdict (exit {check_status}) [{bundle}] {host.get('error') or ''}"
    return status, fit(text, max_output_length)


def fit(text: str, limit: int) -> str:
    """``text`` on one line, trimmed as NPD trims it, within ``limit`` UTF-8 bytes, never cut inside a
    character (NPD's own cut is by bytes and could split one)."""
    line = " ".join(text.split())
    data = line.encode("utf-8")
    if len(data) <= limit:
        return line
    return data[:limit].decode("utf-8", errors="ignore").rstrip()
