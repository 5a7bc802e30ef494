"""A runbook's node graph: the few directed-graph operations validation needs, in plain Python.

Importing networkx costs a tenth of a second of CPU, a fifth of what `nightowl check` may spend in
all, for a graph of a dozen nodes. Only a runbook with a cycle still asks networkx, to name the same
first cycle it always named (the graph is handed over in the same insertion order).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any


class NodeGraph:
    """Nodes (with attributes) and directed edges, kept in insertion order; an edge added twice is one."""

    def __init__(self) -> None:
        self.nodes: dict[str, dict[str, Any]] = {}
        self._succ: dict[str, dict[str, None]] = {}
        self._pred: dict[str, dict[str, None]] = {}
        self._edges: list[tuple[str, str]] = []

    def add_node(self, node: str, **attrs: Any) -> None:
        self.nodes.setdefault(node, {}).update(attrs)
        self._succ.setdefault(node, {})
        self._pred.setdefault(node, {})

    def add_edge(self, source: str, target: str) -> None:
        for node in (source, target):
            if node not in self.nodes:
                self.add_node(node)
        if target not in self._succ[source]:
            self._succ[source][target] = None
            self._pred[target][source] = None
            self._edges.append((source, target))

    def successors(self, node: str) -> list[str]:
        return list(self._succ[node])

    def predecessors(self, node: str) -> list[str]:
        return list(self._pred[node])

    def out_degree(self, node: str) -> int:
        return len(self._succ[node])

    def descendants(self, start: str, blocked: Iterable[str] = ()) -> set[str]:
        """Nodes reachable from ``start`` through none of ``blocked``; never ``start`` itself (as networkx)."""
        stop = set(blocked)
        seen: set[str] = set()
        todo = [n for n in self._succ[start] if n not in stop]
        while todo:
            node = todo.pop()
            if node in seen:
                continue
            seen.add(node)
            todo.extend(n for n in self._succ[node] if n not in seen and n not in stop)
        seen.discard(start)
        return seen

    def has_cycle(self) -> bool:
        return len(self.topological_order()) < len(self.nodes)

    def topological_order(self) -> list[str]:
        """Every node after all its predecessors (Kahn); the nodes of a cycle, and below it, are left out."""
        waiting = {node: len(pred) for node, pred in self._pred.items()}
        ready = [node for node, count in waiting.items() if count == 0]
        order: list[str] = []
        while ready:
            node = ready.pop()
            order.append(node)
            for target in self._succ[node]:
                waiting[target] -= 1
                if waiting[target] == 0:
                    ready.append(target)
        return order

    def first_cycle(self) -> list[str]:
        """The source node of each edge of the first cycle networkx's ``find_cycle`` finds; [] when none."""
        if not self.has_cycle():
            return []
        import networkx as nx  # only a broken runbook gets here

        graph = nx.DiGraph()
        for node, attrs in self.nodes.items():
            graph.add_node(node, **attrs)
        graph.add_edges_from(self._edges)
        return [edge[0] for edge in nx.find_cycle(graph)]
