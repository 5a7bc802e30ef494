"""A cap per node (issue 43 item 3, docs/reference.md#node-cap): counted from actions.jsonl per node and fault
family, a drain over it is for a hardware ticket, and an automatic resume over it is held; against a Slurm
stand-in (the real slurmctld: tests/fleet/test_slurm_node_cap.py)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from nightowl.fleet import actions_log, node_caps
from nightowl.fleet.breaker import Caps, NodeState, parse_reasons
from nightowl.fleet.node_caps import NodeCap
from nightowl.fleet.slurm_actions import drain, resume
from tests.fleet.test_breaker import FakeSlurm, _cluster

CAP = NodeCap(3, 7 * 86400)
DAY = 86400.0


def _when(ago_s: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() - ago_s))


def _line(node: str, what: str, result: str, why: str, ago_s: float = 60, bundle: str = "/b/run-1") -> dict[str, Any]:
    return {"node": node, "what": what, "result": result, "why": why, "when": _when(ago_s), "bundle": bundle,
            "bundle_sha256": "ab" * 32}  # fmt: skip


def _failed_verify(node: str, incident: str, verdict: str, ago_s: float = 60) -> dict[str, Any]:
    why = f"verify failed on {node} after incident {incident} [{verdict} -> reboot-node] (kept out): no-new-xid: ..."
    return _line(node, "verify", "verify-failed", why, ago_s, bundle=f"/b/verify-{incident}")


def test_the_count_is_one_node_and_one_fault_family_inside_the_window() -> None:
    bus = "nightowl: gpu-fell-off-bus (reboot-node); 1 of at most 5 drains"
    entries = [
        _line("gpu-17", "drain", "drained", bus, 3 * DAY, "/b/run-1"),
        _line("gpu-17", "drain", "drained-unconfirmed", bus, 2 * DAY, "/b/run-2"),
        _line("gpu-17", "drain", "intended", bus, DAY),  # an intent is not an action
        _line("gpu-17", "drain", "held", bus, DAY),  # the breaker held it: the node was never taken out
        _line("gpu-17", "drain", "drained", bus, 8 * DAY),  # older than the window
        _line("gpu-17", "drain", "drained", "nightowl: nvlink-xid (reset-gpu); no cap", DAY),  # another family
        _line("gpu-03", "drain", "drained", bus, DAY),  # another node
        _line("gpu-17", "resume", "resumed", "nightowl: gpu-fell-off-bus (reboot-node)", DAY),
        _failed_verify("gpu-17", "run-2", "gpu-fell-off-bus", DAY),
        _failed_verify("gpu-17", "run-2", "gpu-fell-off-bus", DAY - 3600),  # the same incident's repair: once
        _failed_verify("gpu-17", "run-9", "nvlink-xid", DAY),
    ]
    tally = node_caps.count(entries, "gpu-17", "gpu-fell-off-bus", CAP, time.time())
    assert tally.count == 3
    assert [(e["what"], e["bundle"]) for e in tally.earlier] == [
        ("drain", "run-1"),
        ("drain", "run-2"),
        ("verify-failed", "verify-run-2"),
    ]
    words = tally.words()
    assert words.startswith("node cap: gpu-17 taken out for gpu-fell-off-bus 3 time(s) in the last 7d")
    assert entries[0]["when"] in words and "sha256 abababababababab" in words and "run-1" in words


def test_the_ticket_reason_is_nightowls_own_and_says_the_count() -> None:
    reason = node_caps.ticket_reason("gpu-fell-off-bus", 4, CAP)
    assert reason == "nightowl: gpu-fell-off-bus (hardware-ticket) 4 times in 7d, node cap 3"
    assert node_caps.family_of(reason) == "gpu-fell-off-bus"
    assert node_caps.held_for_ticket(reason) == {"count": 4, "window": "7d", "max_node_actions": 3}
    assert node_caps.held_for_ticket("nightowl: gpu-fell-off-bus (hardware-ticket)") is None  # the verdict's own
    [fact] = parse_reasons(f"gpu-17|drained|2026-12-01T20:59:00|root|{reason}\n")
    assert fact["ours"] and fact["node_cap"] == {"count": 4, "window": "7d", "max_node_actions": 3}
    assert node_caps.span(90 * 60) == "90m" and node_caps.span(14 * DAY) == "14d" and node_caps.span(45) == "45s"


def _cycles(slurm: FakeSlurm, log: Path, times: int) -> None:
    for number in range(times):
        done = drain(slurm, "n05", "gpu-fell-off-bus", "reboot-node", Caps(), log, node_cap=CAP)
        assert done["result"] == "drained" and "node_cap" not in done, (number, done)
        assert resume(slurm, "n05", log, node_cap=CAP)["result"] == "resumed"


def test_the_fourth_drain_of_one_fault_is_for_a_hardware_ticket_and_no_automatic_resume_returns_it(
    tmp_path: Path,
) -> None:
    slurm, log = FakeSlurm(_cluster(0)), tmp_path / "actions.jsonl"
    _cycles(slurm, log, 3)
    other = drain(slurm, "n06", "gpu-fell-off-bus", "reboot-node", Caps(), log, node_cap=CAP)
    assert other["result"] == "drained" and "node_cap" not in other  # another node counts for itself

    fourth = drain(slurm, "n05", "gpu-fell-off-bus", "reboot-node", Caps(), log, node_cap=CAP)
    assert fourth["result"] == "drained"
    reason = "nightowl: gpu-fell-off-bus (hardware-ticket) 4 times in 7d, node cap 3"
    assert slurm.state["n05"].reason == reason and fourth["why"].startswith(reason + ";")
    assert fourth["node_cap"]["count"] == 3 and fourth["node_cap"]["action"] == "hardware-ticket"
    assert len(fourth["node_cap"]["earlier"]) == 3 and "hardware-ticket instead of reboot-node" in fourth["why"]
    # the same fault seen again while the ticket drain is in place changes nothing
    again = drain(slurm, "n05", "gpu-fell-off-bus", "reboot-node", Caps(), log, node_cap=CAP)
    assert again["result"] == "unchanged" and slurm.state["n05"].reason == reason

    held = resume(slurm, "n05", log, node_cap=CAP)
    assert held["result"] == "held" and held["why"].startswith("node cap: n05 taken out for gpu-fell-off-bus 4")
    assert held["node_cap"]["count"] == 4 and slurm.state["n05"].drained
    assert actions_log.read(log)[-1]["result"] == "held"
    state = actions_log.breaker_state(log)
    assert state is not None and state["open"] is False  # a node's cap is not the fleet's breaker
    # a person, after the repair: no cap given, the node returns
    assert resume(slurm, "n05", log)["result"] == "resumed" and not slurm.state["n05"].drained
    assert actions_log.verify(log) == []


def test_the_ticket_drain_holds_an_automatic_resume_without_the_log(tmp_path: Path) -> None:
    """A new state dir (no actions log): the ticket lives in the scheduler's reason, which still holds it."""
    reason = node_caps.ticket_reason("gpu-fell-off-bus", 4, CAP)
    slurm = FakeSlurm({**_cluster(0), "n05": NodeState("n05", "drained", reason, None)})
    held = resume(slurm, "n05", tmp_path / "new" / "actions.jsonl", node_cap=CAP)
    assert held["result"] == "held" and "drained for a hardware-ticket" in held["why"] and slurm.state["n05"].drained


def test_a_failed_verify_counts_toward_the_cap(tmp_path: Path) -> None:
    slurm, log = FakeSlurm(_cluster(0)), tmp_path / "actions.jsonl"
    _cycles(slurm, log, 2)
    drain(slurm, "n05", "gpu-fell-off-bus", "reboot-node", Caps(), log, node_cap=CAP)  # the third
    actions_log.append(log, _failed_verify("n05", "run-3", "gpu-fell-off-bus"))  # its repair did not take
    held = resume(slurm, "n05", log, node_cap=CAP)
    assert held["result"] == "held" and held["node_cap"]["count"] == 4 and slurm.state["n05"].drained
    # the drain stays, relabelled for the ticket: `slurm reasons` says so, the health check stops verifying it
    assert slurm.state["n05"].reason == "nightowl: gpu-fell-off-bus (hardware-ticket) 4 times in 7d, node cap 3"
    assert [a["result"] for a in actions_log.read(log)][-2:] == ["intended", "relabelled"]
    assert node_caps.count(actions_log.read(log), "n05", "gpu-fell-off-bus", CAP, time.time()).count == 4
    assert resume(slurm, "n05", log)["result"] == "resumed"  # still nightowl's drain: a person returns it
