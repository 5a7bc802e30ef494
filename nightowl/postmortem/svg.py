"""The decision graph as inline SVG (no JavaScript: mermaid.js is not available offline)."""

from __future__ import annotations

from typing import Any

NODE_W, NODE_H, GAP_X, GAP_Y, CHAR_W, LINE_H = 190, 46, 24, 64, 6.6, 14
TAKEN_FILL, TAKEN_STROKE, PLAIN_FILL, PLAIN_STROKE = "#ffe08a", "#b8860b", "#f4f4f4", "#9a9a9a"


def _layers(runbook: Any) -> dict[str, int]:
    """Longest-path layering from the entry: a node sits one row below its deepest parent."""
    depth = {runbook.entry: 0}
    changed = True
    while changed:  # runbooks are acyclic (validated), so this settles within len(nodes) rounds
        changed = False
        for node_id, node in runbook.nodes.items():
            if node_id not in depth:
                continue
            for target in node.targets():
                if target in runbook.nodes and depth.get(target, -1) < depth[node_id] + 1:
                    depth[target] = depth[node_id] + 1
                    changed = True
    for node_id in runbook.nodes:
        depth.setdefault(node_id, 0)
    return depth


def _wrap(text: str, width: int = 28, lines: int = 2) -> list[str]:
    words, out, line = text.split(), [], ""
    for word in words:
        if len(line) + len(word) + 1 > width and line:
            out.append(line)
            line = word
        else:
            line = f"{line} {word}".strip()
    out.append(line)
    if len(out) > lines:
        out = out[:lines]
        out[-1] = out[-1][: width - 1] + "…"
    return out


def decision_svg(runbook: Any, path: list[str] | None) -> str:
    """The runbook graph drawn top-down, the path taken in amber; a plain SVG any browser shows."""
    from html import escape

    if runbook is None:
        return "<p>(the bundle holds no readable runbook.yaml)</p>"
    taken_nodes = set(path or [])
    taken_edges = set(zip(path or [], (path or [])[1:], strict=False))
    depth = _layers(runbook)
    rows: dict[int, list[str]] = {}
    for node_id in runbook.nodes:
        rows.setdefault(depth[node_id], []).append(node_id)
    # The path taken first in each row, then the rest in runbook order: keeps the story on the left.
    for row in rows.values():
        row.sort(key=lambda n: (n not in taken_nodes, list(runbook.nodes).index(n)))
    width = max(len(r) for r in rows.values()) * (NODE_W + GAP_X) + GAP_X
    height = (max(rows) + 1) * (NODE_H + GAP_Y) + GAP_Y
    position = {
        n: (GAP_X + i * (NODE_W + GAP_X), GAP_Y // 2 + d * (NODE_H + GAP_Y))
        for d, row in rows.items()
        for i, n in enumerate(row)
    }
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" class="decision-graph" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" font-family="sans-serif" font-size="11">',
        '<defs><marker id="arrow" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" markerHeight="7" '
        'orient="auto-start-reverse"><path d="M 0 0 L 10 5 L 0 10 z" fill="#777"/></marker>'
        '<marker id="arrow-taken" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" markerHeight="7" '
        f'orient="auto-start-reverse"><path d="M 0 0 L 10 5 L 0 10 z" fill="{TAKEN_STROKE}"/></marker></defs>',
    ]
    edges = [(s, t) for s, n in runbook.nodes.items() for t in dict.fromkeys(n.targets()) if t in position]
    for source, target in sorted(edges, key=lambda e: e in taken_edges):  # taken edges drawn last, on top
        (sx, sy), (tx, ty) = position[source], position[target]
        x1, y1, x2, y2 = sx + NODE_W / 2, sy + NODE_H, tx + NODE_W / 2, ty
        taken = (source, target) in taken_edges
        stroke, w, marker = (TAKEN_STROKE, 3, "arrow-taken") if taken else ("#bbbbbb", 1, "arrow")
        mid = (y1 + y2) / 2
        parts.append(
            f'<path class="edge{" taken" if taken else ""}" d="M {x1:.0f} {y1:.0f} C {x1:.0f} {mid:.0f}, '
            f'{x2:.0f} {mid:.0f}, {x2:.0f} {y2:.0f}" fill="none" stroke="{stroke}" stroke-width="{w}" '
            f'marker-end="url(#{marker})"/>'
        )
    for node_id, node in runbook.nodes.items():
        x, y = position[node_id]
        taken = node_id in taken_nodes
        fill, stroke = (TAKEN_FILL, TAKEN_STROKE) if taken else (PLAIN_FILL, PLAIN_STROKE)
        label = f"{node.verdict.id} → {node.verdict.action}" if node.verdict else (node.title or node_id)
        radius = 20 if node.kind == "verdict" else 3
        shape = (
            f'<polygon points="{x + 12},{y} {x + NODE_W - 12},{y} {x + NODE_W},{y + NODE_H / 2} '
            f'{x + NODE_W - 12},{y + NODE_H} {x + 12},{y + NODE_H} {x},{y + NODE_H / 2}"'
            if node.kind == "decide"
            else f'<rect x="{x}" y="{y}" width="{NODE_W}" height="{NODE_H}" rx="{radius}"'
        )
        parts.append(
            f'<g class="node{" taken" if taken else ""}" data-node="{escape(node_id)}">{shape} fill="{fill}" '
            f'stroke="{stroke}" stroke-width="{2 if taken else 1}"/>'
        )
        lines = _wrap(label)
        top = y + NODE_H / 2 - (len(lines) - 1) * LINE_H / 2 + 4
        for i, line in enumerate(lines):
            weight = ' font-weight="bold"' if taken else ""
            parts.append(
                f'<text x="{x + NODE_W / 2}" y="{top + i * LINE_H:.0f}" text-anchor="middle"{weight}>'
                f"{escape(line)}</text>"
            )
        parts.append("</g>")
    parts.append("</svg>")
    return "\n".join(parts)
