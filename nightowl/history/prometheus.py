"""History read back from Prometheus (`check --history-from URL`): per-node checks with no shared disk.

Each node's textfile exports ``nightowl_gpu_incidents_total{host,gpu,code,action}`` (nightowl/fleet/textfile.py);
Prometheus keeps it across the node's reboots and re-imaged state dirs. Asked at the moment this boot
began, ``max_over_time(...[30d])`` says which GPU logged which code in the 30 days before this boot: an
incident of an earlier boot, never this boot's own (a count alone cannot tell two incidents of one boot apart).
"""

from __future__ import annotations

import json
from typing import Any

WINDOW = "30d"
TIMEOUT = 5.0


def incidents_query(host: str) -> str:
    name = host.replace("\\", "\\\\").replace('"', '\\"')
    return f'max by (gpu, code) (max_over_time(nightowl_gpu_incidents_total{{host="{name}"}}[{WINDOW}]))'


def prior_incidents(url: str, host: str, before: float, timeout: float = TIMEOUT) -> list[dict[str, Any]]:
    """``[{gpu, code, incidents}]`` the node's series showed in the 30 days up to ``before`` (Unix time).

    Raises OSError or ValueError when Prometheus cannot be asked or answers something else."""
    import urllib.parse  # lazy: urllib.request pulls in http.client, email and ssl, which `nightowl check`
    import urllib.request  # pays for at every start when no --history-from is given

    query = urllib.parse.urlencode({"query": incidents_query(host), "time": f"{before:.3f}"})
    request = urllib.request.Request(f"{url.rstrip('/')}/api/v1/query?{query}", headers={"Accept": "application/json"})
    with urllib.request.urlopen(request, timeout=timeout) as response:  # noqa: S310 - an http(s) URL the user gave
        answer = json.loads(response.read())
    if answer.get("status") != "success":
        raise ValueError(f"Prometheus: {answer.get('error') or answer}")
    found = []
    for item in answer["data"]["result"]:
        labels, (_, value) = item["metric"], item["value"]
        code = labels.get("code")
        if code and code.isdigit() and float(value) > 0:
            found.append({"gpu": labels.get("gpu") or None, "code": int(code), "incidents": float(value)})
    return found
