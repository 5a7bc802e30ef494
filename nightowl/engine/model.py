"""The runbook schema: a decision graph of collect, decide and verdict nodes."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, GetJsonSchemaHandler, model_validator

import nightowl.knowledge.actions as actions  # this module only: the engine imports no other knowledge
from nightowl.engine.background import check_wait
from nightowl.engine.runbook_data import node_kind, node_targets, split_entry

__all__ = ["Action", "Branch", "NextSpec", "Node", "Parameter", "Runbook", "Severity", "VerdictSpec", "split_entry"]

Severity = Literal["ok", "info", "warning", "critical"]


def _known_action(value: str) -> str:
    names = actions.names()
    if value not in names:
        raise ValueError(f"unknown action {value!r}: one of {', '.join(names)}")
    return value


class _ActionEnum:
    """The JSON Schema of an action: the names of nightowl/knowledge/actions.csv, read when asked."""

    def __get_pydantic_json_schema__(self, core: Any, handler: GetJsonSchemaHandler) -> dict[str, Any]:
        return {"type": "string", "enum": list(actions.names())}


# docs/reference.md#verdicts: the first thing a person should do; the vocabulary is data
# (nightowl/knowledge/actions.csv), so it has one home.
Action = Annotated[str, AfterValidator(_known_action), _ActionEnum()]


class Strict(BaseModel):
    """Base of every runbook part: an unknown key is an error (a typo never passes silently); frozen.

    ``defer_build``: the validators are built on the first validation, not at import, so a run whose
    runbook comes from the cache (nightowl/library/runbook_cache.py) never pays for them."""

    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)


class Branch(Strict):
    """One branch of a decide node: when the condition holds, go to ``goto``; branches are tried in order."""

    when: str = Field(description="Jinja2 expression that must yield a bool")
    goto: str = Field(description="the node to go to when `when` holds")
    why: str | None = Field(default=None, description="what it means when this branch is taken")


class NextSpec(Strict):
    """The runbook to run after this verdict (nightowl/engine/chain.py)."""

    runbook: str = Field(description="the runbook to run next (a built-in name or a path)")
    hosts: str = Field(description="expression yielding the host names to run it on")
    params: dict[str, Any] = Field(
        default_factory=dict,
        description="parameter -> expression (strings) or value; a mapping keyed by host names gives each host its own",
    )
    why: str | None = Field(default=None, description="why the next runbook is run, shown with the command")


class VerdictSpec(Strict):
    """What a verdict node concludes: an id, how bad it is, the first action, a summary and its evidence."""

    id: str = Field(description="what it concludes, e.g. gpu-fell-off-bus")
    severity: Severity = Field(description="ok, info, warning or critical")
    action: Action = Field(description="the first thing a person should do (docs/reference.md#verdicts)")
    summary: str = Field(description="Jinja2 template rendered with the facts")
    evidence: list[str] = Field(default_factory=list, description="fact paths, e.g. kernel_log.events")
    gpus: str | None = Field(default=None, description="expression giving the GPUs concerned")
    implicates: str | None = Field(
        default=None,
        description=(
            "scope: job only: expression giving the members (host names) the verdict's action is for; "
            "the others are not implicated, and [] means the job as a whole (docs/runbook-schema.md#jobs)"
        ),
    )
    next: NextSpec | None = Field(default=None, description="the runbook to run next, and on which hosts")


class Node(Strict):
    """A step of the decision graph: exactly one of ``collect`` (then ``next``), ``decide`` (then ``default``),
    ``verdict`` or ``cannot_judge`` (both end the path)."""

    title: str | None = Field(default=None, description="what the node does, shown in the trace and the graph")
    collect: list[str] | None = Field(
        default=None, description="collector kinds to run (`kind:label` takes a kind twice; facts as kind_label)"
    )
    wait: Annotated[float | str | None, AfterValidator(check_wait)] = Field(
        default=None,
        description="seconds (or a parameter name, or `name / 2`: a parameter over a number) to wait before "
        "collecting, e.g. a scrape window",
    )
    background: bool = Field(
        default=False,
        description="a collect node only: start its collectors and go on to `next` at once; they run while "
        "the next nodes wait and collect, and are joined before any node reads facts (docs/runbook-schema.md)",
    )
    next: str | None = Field(default=None, description="after collect: the node to go to")
    decide: list[Branch] | None = Field(default=None, description="branches tried in order; the first true one wins")
    default: str | None = Field(default=None, description="after decide: the node to go to when no branch is true")
    verdict: VerdictSpec | None = Field(default=None, description="ends the path with this verdict")
    cannot_judge: str | None = Field(
        default=None,
        description="ends the path with no verdict (exit 3): a Jinja2 template saying which evidence is missing",
    )

    @model_validator(mode="after")
    def one_kind(self) -> Node:
        """Reject a node that is not exactly one kind, or that has the wrong way out for its kind."""
        kinds = [k for k in ("collect", "decide", "verdict", "cannot_judge") if getattr(self, k) is not None]
        if len(kinds) != 1:
            raise ValueError("a node has exactly one of collect, decide, verdict, cannot_judge")
        if self.collect is not None and not self.next:
            raise ValueError("a collect node needs `next`")
        if self.background and (self.collect is None or self.wait is not None):
            raise ValueError("`background` belongs to collect nodes without `wait` (the walk does not stop there)")
        if self.decide is not None and not self.default:
            raise ValueError("a decide node needs a `default` target")
        if (self.verdict is not None or self.cannot_judge is not None) and (self.next or self.default):
            raise ValueError("a verdict or cannot_judge node ends the path: no `next` or `default`")
        if self.decide is None and self.default:
            raise ValueError("`default` belongs to decide nodes")
        return self

    @property
    def kind(self) -> str:
        """``collect``, ``decide``, ``verdict`` or ``cannot_judge``."""
        return node_kind(self)

    def targets(self) -> list[str]:
        """The nodes this one can go to next, in the order written (none for a verdict)."""
        return node_targets(self)


class Parameter(Strict):
    """A runbook parameter (``--param NAME=VALUE``): its default and what it means."""

    default: Any = Field(default=None, description="the value when no --param gives one; must be of `type`")
    description: str = Field(default="", description="what the parameter means")
    type: Literal["string", "integer", "number", "boolean", "path", "url", "json", "yaml"] | None = Field(
        default=None,
        description="what a value given as text becomes; omitted: the default's type (null default: string). "
        "path and url values are checked (no leading @ or -, http(s) only)",
    )


class Runbook(Strict):
    """A nightowl runbook: a decision graph of collect, decide and verdict nodes, walked from ``entry``.

    This model is the schema pass of loading; nightowl also checks the graph (every node
    reachable, no cycle, every path ends in a verdict), the expressions and the facts each
    condition reads (``nightowl runbook validate``).
    """

    id: str = Field(description="unique name: what `triage RUNBOOK` takes")
    title: str = Field(description="one line, shown by `runbook list`")
    description: str = Field(default="", description="what the runbook is for")
    scope: Literal["host", "job"] = Field(
        default="host", description="host: one run per host; job: one run over all hosts together"
    )
    parameters: dict[str, Parameter] = Field(default_factory=dict, description="name -> parameter (below)")
    include: list[str] = Field(
        default_factory=list,
        description="fragments whose nodes this runbook takes (`fragments/NAME.yaml` beside it); a node id is "
        "defined once, and `nodes:` comes last (docs/runbook-schema.md#fragments)",
    )
    entry: str = Field(description="the first node")
    nodes: dict[str, Node] = Field(description="node id -> node (below)")
