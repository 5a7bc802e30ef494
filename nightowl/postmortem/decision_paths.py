"""The decision path each host took, with the facts each taken branch read and the files they came from."""

from __future__ import annotations

import json
from typing import Any

from nightowl.postmortem.bundle_reader import Bundle
from nightowl.postmortem.citations import fact_cites, merged


def _source_file(data: Bundle, host: str, fact_path: str) -> str | None:
    head, _, rest = fact_path.partition(".")
    if head == "status":
        head = rest.partition(".")[0]
    for entry in data.trace.get("hosts", []):
        if entry.get("host") == host:
            for kind, collector in (entry.get("collectors") or {}).items():
                if kind.replace("-", "_") == head:
                    return collector.get("file")
    return None


def short(value: Any, limit: int = 140) -> str:
    text = json.dumps(value, default=str)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def decision_paths(data: Bundle) -> list[dict[str, Any]]:
    from nightowl.engine.mermaid import to_mermaid

    paths = []
    for entry in data.trace.get("hosts", []):
        host = entry["host"]
        steps = []
        for visit in entry.get("nodes", []):
            node = data.runbook.nodes.get(visit["node"]) if data.runbook else None
            step = {
                "node": visit["node"],
                "kind": visit.get("kind"),
                "title": getattr(node, "title", None),
                "status": visit.get("status"),
                "collectors": visit.get("collectors") or {},
                "taken": None,
            }
            for index, condition in enumerate(visit.get("conditions", [])):
                if condition.get("value"):
                    branch = node.decide[index] if node and node.decide and index < len(node.decide) else None
                    cites = merged(
                        [
                            c
                            for p, v in condition.get("reads", {}).items()
                            for c in fact_cites(data, _source_file(data, host, p), p, v)
                        ],
                        data,
                    )
                    step["taken"] = {
                        "when": condition["when"],
                        "goto": condition.get("goto"),
                        "why": getattr(branch, "why", None),
                        "cites": cites,
                        "reads": {k: short(v) for k, v in condition.get("reads", {}).items()},
                    }
            errors = [c for c in visit.get("conditions", []) if c.get("error")]
            step["errors"] = [f"`{c['when']}`: {c['error']}" for c in errors]
            if visit.get("kind") == "decide" and step["taken"] is None and visit.get("next"):
                step["taken"] = {
                    "when": "default",
                    "goto": visit["next"],
                    "why": "no condition held",
                    "cites": [],
                    "reads": {},
                }
            steps.append(step)
        mermaid = to_mermaid(data.runbook, entry.get("path")) if data.runbook else None
        paths.append({"host": host, "path": entry.get("path", []), "steps": steps, "mermaid": mermaid})
    return paths
