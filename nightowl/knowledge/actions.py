"""The verdict actions (``actions.csv``): one row per action with its rank, words and source.

The one home of the action vocabulary: the runbook schema (engine/model.py), the Xid ranking
(collectors/gpu/xid_catalog.py), the status update, the postmortem's prevention items and the
docs (docgen) all read it here. Pure data and the csv module: the engine may import it and stay
GPU-agnostic. Loaded on first use, so importing this module reads no file.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

from nightowl import knowledge

FILE = "actions.csv"
COLUMNS = ("action", "rank", "meaning", "first_step", "business_impact", "who_acts", "source")


@dataclass(frozen=True)
class ActionRow:
    action: str
    rank: int  # 0 = least drastic; the strictest of several actions is the one of highest rank
    meaning: str  # what the action asks of a person (docs/reference.md#verdicts)
    first_step: str  # the first step `nightowl xid` prints for an Xid that calls for this action
    business_impact: str  # what the business side should expect or do (status update)
    who_acts: str  # who carries the action out (status update)
    prevention: str | None  # what keeps the fault from coming back (postmortem action items)
    source: str


@functools.cache
def rows() -> tuple[ActionRow, ...]:
    """Every action, least drastic first; ranks must be 0..n-1 with ``none`` first and ``escalate`` present."""
    table = []
    for line, row in enumerate(knowledge.read_csv(FILE, required=COLUMNS), start=2):
        try:
            rank = int(row["rank"])
        except ValueError:
            raise knowledge.KnowledgeError(f"{knowledge.path(FILE)}: row {line}: rank {row['rank']!r}") from None
        table.append(
            ActionRow(
                action=row["action"],
                rank=rank,
                meaning=row["meaning"],
                first_step=row["first_step"],
                business_impact=row["business_impact"],
                who_acts=row["who_acts"],
                prevention=knowledge.optional(row.get("prevention", "")),
                source=row["source"],
            )
        )
    table.sort(key=lambda r: r.rank)
    if [r.rank for r in table] != list(range(len(table))):
        raise knowledge.KnowledgeError(f"{knowledge.path(FILE)}: ranks must be 0..{len(table) - 1}, each once")
    names = [r.action for r in table]
    if len(set(names)) != len(names) or not names or names[0] != "none" or "escalate" not in names:
        raise knowledge.KnowledgeError(f"{knowledge.path(FILE)}: actions unique, `none` first, `escalate` present")
    return tuple(table)


@functools.cache
def names() -> tuple[str, ...]:
    """The action names, least drastic first."""
    return tuple(r.action for r in rows())


@functools.cache
def by_action() -> dict[str, ActionRow]:
    return {r.action: r for r in rows()}


def rank(action: str) -> int:
    """Rank of ``action``; an action the table does not know counts as ``escalate`` (never as ``none``)."""
    table = by_action()
    return (table.get(action) or table["escalate"]).rank


def first_step(action: str) -> str:
    """The first step of a known action (KeyError for an unknown one: callers name their own fallback)."""
    return by_action()[action].first_step
