"""Scheduler actions as library calls: drain or resume nodes, or refuse a report about another node, each
returning one outcome per node (the entry actions.jsonl keeps: node, what, result, why, bundle).

No click and no exit: `nightowl slurm`, `nightowl k8s condition` and `nightowl verify` (nightowl/cli) print
the outcomes and exit with ``action_status``; a Python caller reads them as they are. The Slurm calls
themselves and the circuit breaker are nightowl/fleet/slurm_actions.py.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

# What each action result means for the exit status (docs/reference.md#scheduler-actions): done or already
# so; held by the breaker or a node's cap; failed or refused (the node was not changed as asked).
HELD = frozenset({"held", "would-hold"})
# Acted on, but unconfirmed (the breaker's confirming read failed) or unlogged: the caller must look (exit 5).
UNSURE = frozenset({"failed", "drained-unconfirmed", "set-unconfirmed"})
ACTIONS_HELD, ACTIONS_FAILED = 4, 5

Outcome = dict[str, Any]  # one node's entry, as actions.jsonl keeps it


def action_status(done: list[Outcome], refused: frozenset[str] = frozenset()) -> int:
    """0 every requested action done or already in place; 4 some held and none failed; 5 any failed or refused,
    left unconfirmed, or not logged."""
    results = [entry["result"] for entry in done]
    if any(result in UNSURE or result in refused for result in results) or any(
        entry.get("logged") is False for entry in done
    ):
        return ACTIONS_FAILED
    if any(result in HELD for result in results):
        return ACTIONS_HELD
    return 0


def read_report(text: str) -> dict[str, Any] | None:
    """A check report as JSON (None when it is not an object: no verdict)."""
    try:
        report = json.loads(text or "null")
    except ValueError:
        return None
    return report if isinstance(report, dict) else None


def verdict_from_report(
    report: dict[str, Any] | None, verdict: str | None, action: str | None, bundle: Path | None
) -> tuple[str, str, Path | None]:
    """The verdict, its action and the bundle a drain cites: each given value, else the report's first host's.
    Raises ValueError when the report holds no verdict."""
    hosts = (report or {}).get("hosts") or [{}]
    found = (hosts[0] if isinstance(hosts, list) and isinstance(hosts[0], dict) else {}).get("verdict") or {}
    if not isinstance(found, dict) or not found.get("id"):
        raise ValueError("--report: no verdict in the report (nightowl check --format json of the node)")
    given = (report or {}).get("bundle")
    return (
        verdict or str(found["id"]),
        action or str(found.get("action") or ""),
        bundle or (Path(given) if isinstance(given, str) and given else None),
    )


def check_node(
    report: dict[str, Any] | None, nodes: tuple[str, ...], what: str, log: Path, dry_run: bool, for_other_node: bool
) -> tuple[str | None, list[Outcome]]:
    """A report belongs to its node. Returns the note every line logged carries (a report about another node
    applied because ``for_other_node``) and the refusals: one logged outcome per node of NODES the report
    does not name, when not ``for_other_node`` (then nothing else may be done)."""
    from nightowl.fleet.identity import other_node

    mismatched = {node: why for node in nodes if (why := other_node(report, node))}
    if not mismatched:
        return None, []
    if for_other_node:
        note = "; ".join(f"{why}: applied with --report-for-other-node" for why in dict.fromkeys(mismatched.values()))
        return note, []
    return None, [
        record_failure(log, node, what, f"{why}: refused (--report-for-other-node applies it)", dry_run, "refused")
        for node, why in mismatched.items()
    ]


def record_failure(log: Path, node: str, what: str, error: str, dry_run: bool, result: str = "failed") -> Outcome:
    """A failed (or refused) attempt, as actions.jsonl keeps it (a dry run logs nothing). A log that cannot
    take the line (the very failure, e.g. a full disk) leaves it unlogged, said in the entry: nothing was done."""
    from nightowl.fleet import actions_log

    entry = {"node": node, "what": what, "why": error[:500], "result": result, "bundle": None, "bundle_sha256": None}
    if dry_run:
        return entry
    try:
        return actions_log.append(log, entry)
    except OSError as exc:
        return {**entry, "why": f"{entry['why']}; not logged ({exc})", "logged": False}


def each_node(
    nodes: tuple[str, ...], act: Callable[[Any, str], Outcome], what: str, log: Path, dry_run: bool
) -> list[Outcome]:
    """Every node of the list, in order: a node the scheduler fails on is logged as failed (with its error)
    and the list goes on, so one bad node never leaves the rest undone."""
    from nightowl.fleet.slurm_actions import Slurm, SlurmError

    slurm_client = Slurm()
    done = []
    for node in nodes:
        try:
            done.append(act(slurm_client, node))
        except (SlurmError, OSError, subprocess.TimeoutExpired) as exc:
            done.append(record_failure(log, node, what, str(exc), dry_run))
    return done


def drain_nodes(
    nodes: tuple[str, ...], verdict: str, verdict_action: str, caps: Any, log: Path, **options: Any
) -> list[Outcome]:
    """Drain NODES in order behind the breaker (``slurm_actions.drain``; ``options``: bundle, dry_run, lock,
    note, node_cap). A dry run counts the drains it would already have made. A node drained by someone else
    is in the state asked for: done, its reason left as it is."""
    from nightowl.fleet import slurm_actions

    dry_run = bool(options.get("dry_run"))
    planned: list[str] = []

    def act(client: Any, node: str) -> Outcome:
        entry = slurm_actions.drain(client, node, verdict, verdict_action, caps, log, planned=tuple(planned), **options)
        if entry["result"] == "would-drain":
            planned.append(node)
        return entry

    return each_node(nodes, act, "drain", log, dry_run)


def resume_nodes(
    nodes: tuple[str, ...], log: Path, *, dry_run: bool, lock: Path | None, node_cap: Any
) -> list[Outcome]:
    """Resume NODES that nightowl drained; a node someone else drained stays drained (its result `not-ours`)."""
    from nightowl.fleet import slurm_actions

    def act(client: Any, node: str) -> Outcome:
        return slurm_actions.resume(client, node, log, dry_run=dry_run, lock=lock, node_cap=node_cap)

    return each_node(nodes, act, "resume", log, dry_run)
