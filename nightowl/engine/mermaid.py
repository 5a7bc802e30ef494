"""Draw a runbook as a Mermaid flowchart, optionally marking the path taken."""

from __future__ import annotations

import re

from nightowl.engine.model import Runbook

_SHAPES = {"collect": ('[/"', '"/]'), "decide": ('{"', '"}'), "verdict": ('(["', '"])'), "cannot_judge": ('(["', '"])')}


def _mid(node_id: str) -> str:
    return "n_" + re.sub(r"[^A-Za-z0-9_]", "_", node_id)


def _label(text: str) -> str:
    return text.replace('"', "'")


def to_mermaid(runbook: Runbook, path: list[str] | None = None) -> str:
    taken = set(zip(path or [], (path or [])[1:], strict=False))
    lines = ["flowchart TD"]
    for node_id, node in runbook.nodes.items():
        left, right = _SHAPES[node.kind]
        text = node.verdict.id + " → " + node.verdict.action if node.verdict else (node.title or node_id)
        if node.cannot_judge is not None:
            text = f"{node.title or node_id} → no verdict"
        lines.append(f"  {_mid(node_id)}{left}{_label(text)}{right}")
    edge_index = 0
    highlighted: list[int] = []
    for node_id, node in runbook.nodes.items():
        for target in dict.fromkeys(node.targets()):
            lines.append(f"  {_mid(node_id)} --> {_mid(target)}")
            if (node_id, target) in taken:
                highlighted.append(edge_index)
            edge_index += 1
    if path:
        lines.append("  classDef taken fill:#ffe08a,stroke:#b8860b,stroke-width:2px")
        lines.append("  class " + ",".join(_mid(n) for n in dict.fromkeys(path)) + " taken")
    if highlighted:
        lines.append(f"  linkStyle {','.join(map(str, highlighted))} stroke:#b8860b,stroke-width:3px")
    return "\n".join(lines) + "\n"
