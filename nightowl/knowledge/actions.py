"""The verdict actions (``actions.csv``): one row per action with its rank, words and source.

The one home of the action vocabulary: the runbook schema (engine/model.py), the Xid ranking
(collectors/gpu/xid_catalog.py), the status update, the postmortem's prevention items and the
docs (docgen) all read it here. Pure data and the csv module: the engine may import it and stay
GPU-agnostic. Loaded on first use, so importing this module reads no file.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

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
    takes_node_out: bool = False  # the GPU or node leaves service: the health check drains, watch starts a run


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
                takes_node_out=_yes_no(row.get("takes_node_out") or "no", line),
            )
        )
    table.sort(key=lambda r: r.rank)
    if [r.rank for r in table] != list(range(len(table))):
        raise knowledge.KnowledgeError(f"{knowledge.path(FILE)}: ranks must be 0..{len(table) - 1}, each once")
    names = [r.action for r in table]
    if len(set(names)) != len(names) or not names or names[0] != "none" or "escalate" not in names:
        raise knowledge.KnowledgeError(f"{knowledge.path(FILE)}: actions unique, `none` first, `escalate` present")
    return tuple(table)


def _yes_no(value: str, line: int) -> bool:
    if value not in ("yes", "no"):
        raise knowledge.KnowledgeError(f"{knowledge.path(FILE)}: row {line}: takes_node_out {value!r} (yes or no)")
    return value == "yes"


@functools.cache
def node_actions() -> tuple[str, ...]:
    """The actions that take the GPU or node out of service (``takes_node_out``), least drastic first."""
    return tuple(r.action for r in rows() if r.takes_node_out)


def takes_node_out(action: str) -> bool:
    """Whether ``action`` takes the GPU or node out of service; an unknown action does not."""
    row = by_action().get(action)
    return bool(row and row.takes_node_out)


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


# -- the first action's steps by tenancy (action_steps.csv, tenancy_signs.csv; docs/reference.md#tenancy) --------
STEPS_FILE = "action_steps.csv"
SIGNS_FILE = "tenancy_signs.csv"
TENANCIES = ("bare-metal", "vm", "managed")
IN_WORDS = {"bare-metal": "bare metal", "vm": "a VM", "managed": "a managed instance"}
UNDETERMINED = "tenancy not determined (no declared tenancy, no GPU virtualization mode read): bare-metal steps"


@dataclass(frozen=True)
class StepsRow:
    action: str
    tenancy: str
    steps: str
    nvsentinel: str  # NVSentinel's RecommendedAction for the same remedy (RESTART_VM, RESTART_BM, COMPONENT_RESET ...)
    source: str


@dataclass(frozen=True)
class TenancySign:
    fact: str  # namespace.fact, as runbook conditions name it
    value: re.Pattern[str]
    tenancy: str
    source: str


@functools.cache
def steps_rows() -> dict[tuple[str, str], StepsRow]:
    """(action, tenancy) -> its steps; every action and tenancy named must be known, each pair once."""
    table: dict[tuple[str, str], StepsRow] = {}
    required = ("action", "tenancy", "steps", "nvsentinel", "source")
    for line, row in enumerate(knowledge.read_csv(STEPS_FILE, required=required), start=2):
        key = (row["action"], row["tenancy"])
        if row["action"] not in by_action() or row["tenancy"] not in TENANCIES or key in table:
            raise knowledge.KnowledgeError(f"{knowledge.path(STEPS_FILE)}: row {line}: unknown or repeated {key}")
        table[key] = StepsRow(row["action"], row["tenancy"], row["steps"], row["nvsentinel"], row["source"])
    return table


@functools.cache
def tenancy_signs() -> tuple[TenancySign, ...]:
    signs = []
    for line, row in enumerate(knowledge.read_csv(SIGNS_FILE, required=("fact", "value", "tenancy", "source")), 2):
        if row["tenancy"] not in TENANCIES or "." not in row["fact"]:
            raise knowledge.KnowledgeError(f"{knowledge.path(SIGNS_FILE)}: row {line}: tenancy or fact not known")
        value = re.compile(row["value"], re.IGNORECASE)
        signs.append(TenancySign(row["fact"], value, row["tenancy"], row["source"]))
    return tuple(signs)


def tenancy_of(facts: Mapping[str, Any], declared: str | None = None) -> tuple[str | None, str | None]:
    """(tenancy, what said so) from a declared value, else the first sign the facts show; (None, None) when
    nothing does. ``facts`` maps a collector namespace to its facts, as runbook conditions see them."""
    if declared:
        if declared not in TENANCIES:
            raise ValueError(f"tenancy {declared!r} is not one of {', '.join(TENANCIES)}")
        return declared, "declared"
    for sign in tenancy_signs():
        namespace, _, name = sign.fact.partition(".")
        value = (facts.get(namespace) or {}).get(name) if isinstance(facts.get(namespace), dict) else None
        if isinstance(value, str) and sign.value.fullmatch(value.strip()):
            return sign.tenancy, f'{sign.fact} = "{value.strip()}"'  # quoted: a mode of "None" is a word
    return None, None


def first_steps(action: str, facts: Mapping[str, Any], declared: Any = None, host: str | None = None) -> dict[str, Any]:
    """The verdict's ``first_step``: ``{tenancy, determined_by, steps, nvsentinel, source}`` for ``action`` on a
    host with these facts. An undetermined tenancy gets the bare-metal steps and says so; an action the
    tenancy does not change keeps actions.csv's ``first_step``; an unknown action is escalate's. ``declared``
    may map host names to tenancies (a sweep's inventory labels): ``host``'s entry is then the declared one."""
    if isinstance(declared, Mapping):
        declared = declared.get(host) if host is not None else None
    tenancy, why = tenancy_of(facts, declared if declared in TENANCIES else None)
    known = action if action in by_action() else "escalate"
    row = steps_rows().get((known, tenancy or "bare-metal"))
    out: dict[str, Any] = {"tenancy": tenancy, "determined_by": why}
    if row is None:
        out.update(steps=by_action()[known].first_step, nvsentinel=None, source=by_action()[known].source)
    else:
        out.update(steps=row.steps, nvsentinel=row.nvsentinel, source=row.source)
    if tenancy is None and any(key[0] == known for key in steps_rows()):
        out["note"] = UNDETERMINED  # the steps differ by tenancy: the reader must know these are bare metal's
    return out


def steps_line(first_step: Mapping[str, Any] | None) -> str | None:
    """One line for a person: ``on a VM (nvidia_smi.virtualization_mode = "Pass-Through"): stop and start ...``."""
    if not first_step or not first_step.get("steps"):
        return None
    if first_step.get("tenancy"):
        where = IN_WORDS.get(first_step["tenancy"], first_step["tenancy"])
        return f"on {where} ({first_step.get('determined_by')}): {first_step['steps']}"
    return f"on bare metal, assumed ({first_step.get('note') or 'tenancy not determined'}): {first_step['steps']}"
