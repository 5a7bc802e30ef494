"""The runbook schema: a decision graph of collect, decide and verdict nodes."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

Severity = Literal["ok", "info", "warning", "critical"]
# CONTRACT section 4: the first thing a person should do.
Action = Literal[
    "none",
    "restart-app",
    "reset-gpu",
    "drain-and-reset",
    "reboot-node",
    "hardware-ticket",
    "reconfigure",
    "scale-out",
    "escalate",
]


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Branch(Strict):
    when: str = Field(description="Jinja2 expression that must yield a bool")
    goto: str
    why: str | None = Field(default=None, description="what it means when this branch is taken")


class VerdictSpec(Strict):
    id: str
    severity: Severity
    action: Action
    summary: str = Field(description="Jinja2 template rendered with the facts")
    evidence: list[str] = Field(default_factory=list, description="fact paths, e.g. kernel_log.events")
    gpus: str | None = Field(default=None, description="expression giving the GPUs concerned")


def split_entry(entry: str) -> tuple[str, str]:
    """A collect entry ``kind`` or ``kind:label`` -> (kind, fact namespace).

    ``metrics:after`` takes the metrics collector a second time, as ``metrics_after``.
    """
    kind, _, label = entry.partition(":")
    namespace = kind.replace("-", "_") + (f"_{label.replace('-', '_')}" if label else "")
    return kind, namespace


class Node(Strict):
    title: str | None = None
    collect: list[str] | None = None
    wait: float | str | None = Field(
        default=None, description="seconds (or a parameter name) to wait before collecting, e.g. a scrape window"
    )
    next: str | None = None
    decide: list[Branch] | None = None
    default: str | None = None
    verdict: VerdictSpec | None = None

    @model_validator(mode="after")
    def one_kind(self) -> Node:
        kinds = [k for k in ("collect", "decide", "verdict") if getattr(self, k) is not None]
        if len(kinds) != 1:
            raise ValueError("a node has exactly one of collect, decide, verdict")
        if self.collect is not None and not self.next:
            raise ValueError("a collect node needs `next`")
        if self.decide is not None and not self.default:
            raise ValueError("a decide node needs a `default` target")
        if self.verdict is not None and (self.next or self.default):
            raise ValueError("a verdict node ends the path: no `next` or `default`")
        if self.decide is None and self.default:
            raise ValueError("`default` belongs to decide nodes")
        return self

    @property
    def kind(self) -> str:
        return "collect" if self.collect is not None else "decide" if self.decide is not None else "verdict"

    def targets(self) -> list[str]:
        if self.collect is not None:
            return [self.next] if self.next else []
        if self.decide is not None:
            return [b.goto for b in self.decide] + ([self.default] if self.default else [])
        return []


class Parameter(Strict):
    default: Any = None
    description: str = ""
    type: Literal["string", "integer", "number", "boolean", "path", "url", "json"] | None = Field(
        default=None,
        description="what a value given as text becomes; omitted: the default's type (null default: string). "
        "path and url values are checked (no leading @ or -, http(s) only)",
    )


class Runbook(Strict):
    id: str
    title: str
    description: str = ""
    scope: Literal["host", "job"] = Field(
        default="host", description="host: one run per host; job: one run over all hosts together"
    )
    parameters: dict[str, Parameter] = Field(default_factory=dict)
    entry: str
    nodes: dict[str, Node]
