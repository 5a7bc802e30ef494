"""A validated runbook as plain frozen data, for walking it: the same fields as engine/model.py's schema.

The pydantic models of engine/model.py are the schema pass of validation; once a runbook has passed every
pass, walking it only reads attributes. Importing pydantic and building the models costs about a fifth of
a second of CPU, a third of what `nightowl check` may spend in all, so a runbook loaded by name
(nightowl/library/runbooks.py, from the cache or just validated) is this copy, and a run that finds its
runbook in the cache never imports pydantic. tests/engine/test_runbook_data.py checks that each class
here has exactly its model's fields and that every built-in runbook converts to equal data both ways.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


def split_entry(entry: str) -> tuple[str, str]:
    """A collect entry ``kind`` or ``kind:label`` -> (kind, fact namespace).

    ``metrics:after`` takes the metrics collector a second time, as ``metrics_after``.
    """
    kind, _, label = entry.partition(":")
    namespace = kind.replace("-", "_") + (f"_{label.replace('-', '_')}" if label else "")
    return kind, namespace


@dataclass(frozen=True)
class BranchData:
    """engine/model.py ``Branch``: when ``when`` holds, go to ``goto``."""

    when: str
    goto: str
    why: str | None = None


@dataclass(frozen=True)
class NextSpecData:
    """engine/model.py ``NextSpec``: the runbook to run after a verdict."""

    runbook: str
    hosts: str
    params: dict[str, Any] = field(default_factory=dict)
    why: str | None = None


@dataclass(frozen=True)
class VerdictSpecData:
    """engine/model.py ``VerdictSpec``: what a verdict node concludes."""

    id: str
    severity: str
    action: str
    summary: str
    evidence: list[str] = field(default_factory=list)
    gpus: str | None = None
    implicates: str | None = None
    next: NextSpecData | None = None


@dataclass(frozen=True)
class NodeData:
    """engine/model.py ``Node``: one step of the decision graph."""

    title: str | None = None
    collect: list[str] | None = None
    wait: float | str | None = None
    background: bool = False
    next: str | None = None
    decide: list[BranchData] | None = None
    default: str | None = None
    verdict: VerdictSpecData | None = None
    cannot_judge: str | None = None

    @property
    def kind(self) -> str:
        """``collect``, ``decide``, ``verdict`` or ``cannot_judge``."""
        return node_kind(self)

    def targets(self) -> list[str]:
        """The nodes this one can go to next, in the order written (none for a verdict)."""
        return node_targets(self)


def node_kind(node: Any) -> str:
    """A node's kind (engine/model.py ``Node`` or ``NodeData``): the one of its ways out it has."""
    if node.collect is not None:
        return "collect"
    if node.decide is not None:
        return "decide"
    return "verdict" if node.verdict is not None else "cannot_judge"


def node_targets(node: Any) -> list[str]:
    """The nodes a node (``Node`` or ``NodeData``) can go to next, in the order written (none for a verdict)."""
    if node.collect is not None:
        return [node.next] if node.next else []
    if node.decide is not None:
        return [b.goto for b in node.decide] + ([node.default] if node.default else [])
    return []


@dataclass(frozen=True)
class ParameterData:
    """engine/model.py ``Parameter``: a runbook parameter."""

    default: Any = None
    description: str = ""
    type: str | None = None


@dataclass(frozen=True)
class RunbookData:
    """engine/model.py ``Runbook``: the whole decision graph, walked from ``entry``."""

    id: str
    title: str
    entry: str
    nodes: dict[str, NodeData]
    description: str = ""
    scope: str = "host"
    parameters: dict[str, ParameterData] = field(default_factory=dict)
    include: list[str] = field(default_factory=list)


# model class name -> its plain twin
TWINS: dict[str, type] = {
    "Branch": BranchData,
    "NextSpec": NextSpecData,
    "VerdictSpec": VerdictSpecData,
    "Node": NodeData,
    "Parameter": ParameterData,
    "Runbook": RunbookData,
}


def as_data(value: Any) -> Any:
    """A validated model (engine/model.py) as its plain twin, recursively; other values as they are."""
    twin = TWINS.get(type(value).__name__)
    fields = getattr(type(value), "model_fields", None)
    if twin is not None and fields is not None:
        return twin(**{name: as_data(getattr(value, name)) for name in fields})
    if isinstance(value, dict):
        return {key: as_data(item) for key, item in value.items()}
    if isinstance(value, list):
        return [as_data(item) for item in value]
    return value
