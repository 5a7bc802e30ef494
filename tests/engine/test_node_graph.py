"""engine/node_graph.py agrees with networkx (which validation used) on random graphs: reachability,
topological order, cycles, and the first cycle named."""

from __future__ import annotations

import random

import networkx as nx
import pytest

from nightowl.engine.node_graph import NodeGraph


def random_graphs(count: int) -> list[tuple[list[str], list[tuple[str, str]]]]:
    rng = random.Random(22)
    graphs = []
    for _ in range(count):
        nodes = [f"n{i}" for i in range(rng.randint(1, 12))]
        edges = [(rng.choice(nodes), rng.choice(nodes)) for _ in range(rng.randint(0, 20))]
        if rng.random() < 0.5:  # many acyclic ones: edges only forward
            edges = [(a, b) for a, b in edges if nodes.index(a) < nodes.index(b)]
        graphs.append((nodes, edges))
    return graphs


def both(nodes: list[str], edges: list[tuple[str, str]]) -> tuple[NodeGraph, nx.DiGraph]:
    ours, theirs = NodeGraph(), nx.DiGraph()
    for node in nodes:
        ours.add_node(node, kind="x")
        theirs.add_node(node, kind="x")
    for a, b in edges:
        ours.add_edge(a, b)
        theirs.add_edge(a, b)
    return ours, theirs


@pytest.mark.parametrize(("nodes", "edges"), random_graphs(300))
def test_agrees_with_networkx(nodes: list[str], edges: list[tuple[str, str]]) -> None:
    ours, theirs = both(nodes, edges)
    assert list(ours.nodes) == list(theirs.nodes)
    for node in nodes:
        assert ours.descendants(node) == nx.descendants(theirs, node)
        assert ours.out_degree(node) == theirs.out_degree(node)
        assert ours.predecessors(node) == list(theirs.predecessors(node))
    cyclic = not nx.is_directed_acyclic_graph(theirs)
    assert ours.has_cycle() is cyclic
    if cyclic:
        assert ours.first_cycle() == [edge[0] for edge in nx.find_cycle(theirs)]
    else:
        order = ours.topological_order()
        assert sorted(order) == sorted(nodes)
        assert all(order.index(a) < order.index(b) for a, b in set(edges))
        assert ours.first_cycle() == []
    blocked = set(nodes[::3])
    free = theirs.subgraph(n for n in nodes if n not in blocked)
    start = nodes[-1]
    if start not in blocked:
        for goal in nodes:
            if goal in blocked or goal == start:
                continue
            assert (goal in ours.descendants(start, blocked=blocked)) is nx.has_path(free, start, goal)


def test_an_edge_added_twice_is_one() -> None:
    graph = NodeGraph()
    graph.add_node("a")
    graph.add_edge("a", "b")
    graph.add_edge("a", "b")
    assert graph.out_degree("a") == 1 and graph.predecessors("b") == ["a"]
