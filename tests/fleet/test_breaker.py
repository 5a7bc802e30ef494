"""The fleet circuit breaker, the hash-chained actions log, and drain/resume against a Slurm stand-in."""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from pathlib import Path

from nightowl.fleet import actions_log
from nightowl.fleet.breaker import Caps, NodeState, keeps_drain, may_drain, parse_sinfo
from nightowl.fleet.slurm_actions import drain, resume

NOW = datetime(2026, 12, 1, 21, 0, 0)


def _sinfo(rows: list[tuple[str, str, str, str]]) -> str:
    return "".join(f"{n}|{s}|{t}|{r}\n" for n, s, t, r in rows)


def test_parse_sinfo_keeps_one_row_per_node_and_reasons_with_the_separator() -> None:
    text = _sinfo([("a", "idle", "Unknown", "none"), ("b", "drained", "2026-12-01T20:59:00", "x|y")])
    text += "a|idle|Unknown|none\n"
    nodes = parse_sinfo(text)
    assert list(nodes) == ["a", "b"]
    assert nodes["b"].reason == "x|y" and nodes["b"].since == datetime(2026, 12, 1, 20, 59)
    assert nodes["a"].since is None and not nodes["a"].drained


def _cluster(own_drains: int, total: int = 20, age_s: float = 10) -> dict[str, NodeState]:
    since = NOW - timedelta(seconds=age_s)
    nodes = {f"n{i:02d}": NodeState(f"n{i:02d}", "idle", "none", None) for i in range(total)}
    for i in range(own_drains):
        nodes[f"n{i:02d}"] = NodeState(f"n{i:02d}", "drained", "nightowl: nvlink-xid (reset-gpu)", since)
    return nodes


def test_the_lower_of_the_absolute_and_the_percentage_cap_holds() -> None:
    assert Caps(max_drain=5).limit(288) == 5
    assert Caps(max_drain_percent=1).limit(288) == 2
    assert Caps(max_drain=5, max_drain_percent=10).limit(20) == 2
    assert Caps().limit(10) is None


def test_may_drain_counts_nightowls_own_drains_inside_the_window_only() -> None:
    caps = Caps(max_drain=3, window_s=3600)
    assert may_drain("n10", _cluster(2), caps, NOW).allowed
    held = may_drain("n10", _cluster(3), caps, NOW)
    assert not held.allowed and "3 nodes already drained" in held.why and "--max-drain 3" in held.why
    assert may_drain("n10", _cluster(3, age_s=4000), caps, NOW).allowed  # older than the window
    others = _cluster(0)
    others["n01"] = NodeState("n01", "drained", "maintenance: PSU", NOW)
    others["n02"] = NodeState("n02", "drained", "maintenance: PSU", NOW)
    assert may_drain("n10", others, Caps(max_drain=1), NOW).allowed  # a person's drains are not ours


def test_simultaneous_drains_settle_on_the_cap() -> None:
    nodes = _cluster(7)  # seven checks drained in the same second
    caps = Caps(max_drain=5)
    kept = [n for n in nodes if nodes[n].drained and keeps_drain(n, nodes, caps, NOW).allowed]
    assert kept == ["n00", "n01", "n02", "n03", "n04"]


def test_actions_log_is_a_hash_chain(tmp_path: Path) -> None:
    log = tmp_path / "actions.jsonl"
    first = actions_log.append(log, {"node": "a", "what": "drain", "why": "x", "result": "drained"})
    second = actions_log.append(log, {"node": "b", "what": "drain", "why": "y", "result": "held"})
    assert first["prev"] == "" and second["prev"] == first["hash"]
    assert actions_log.verify(log) == []
    lines = log.read_text().splitlines()
    edited = json.loads(lines[0]) | {"result": "held"}
    log.write_text(json.dumps(edited) + "\n" + lines[1] + "\n")
    assert actions_log.verify(log) == ["line 1: hash does not match its fields"]
    log.write_text(lines[1] + "\n")
    assert actions_log.verify(log) == ["line 1: prev is not the hash of line 0"]


class FakeSlurm:
    """sinfo and scontrol as a dict of node states (the real ones: tests/fleet/test_slurm_breaker.py)."""

    def __init__(self, nodes: dict[str, NodeState]) -> None:
        self.state = nodes
        self.calls: list[tuple[str, str]] = []

    def nodes(self) -> dict[str, NodeState]:
        return dict(self.state)

    def drain(self, node: str, reason: str) -> None:
        self.calls.append(("drain", node))
        self.state[node] = NodeState(node, "drained", reason, NOW)

    def resume(self, node: str) -> None:
        self.calls.append(("resume", node))
        self.state[node] = NodeState(node, "idle", "none", None)


def test_drain_holds_at_the_cap_and_logs_both(tmp_path: Path) -> None:
    slurm = FakeSlurm(_cluster(0))
    log = tmp_path / "actions.jsonl"
    caps = Caps(max_drain=2)
    results = [
        drain(slurm, f"n{i:02d}", "nvlink-xid", "reset-gpu", caps, log, now=lambda: NOW, settle=0)["result"]
        for i in range(4)
    ]
    assert results == ["drained", "drained", "held", "held"]
    # the intent before each drain, its outcome after; a drain held before acting is one line
    assert [(a["node"], a["result"]) for a in actions_log.read(log)] == [
        ("n00", "intended"),
        ("n00", "drained"),
        ("n01", "intended"),
        ("n01", "drained"),
        ("n02", "held"),
        ("n03", "held"),
    ]
    assert "circuit breaker open" in actions_log.read(log)[4]["why"]
    again = drain(slurm, "n00", "nvlink-xid", "reset-gpu", caps, log, now=lambda: NOW, settle=0)
    assert again["result"] == "unchanged" and len(actions_log.read(log)) == 6


def test_dry_run_changes_and_logs_nothing(tmp_path: Path) -> None:
    slurm = FakeSlurm(_cluster(1))
    log = tmp_path / "actions.jsonl"
    caps = Caps(max_drain=1)
    held = drain(slurm, "n05", "nvlink-xid", "reset-gpu", caps, log, dry_run=True, now=lambda: NOW)
    free = drain(slurm, "n05", "nvlink-xid", "reset-gpu", Caps(), log, dry_run=True, now=lambda: NOW)
    assert (held["result"], free["result"]) == ("would-hold", "would-drain")
    assert slurm.calls == [] and not log.exists()


def test_resume_only_its_own_drains(tmp_path: Path) -> None:
    nodes = _cluster(1)
    nodes["n05"] = NodeState("n05", "drained", "maintenance: PSU swap", NOW)
    nodes["n06"] = NodeState("n06", "drained", "nightowl: hand-written note", NOW)
    slurm = FakeSlurm(nodes)
    log = tmp_path / "actions.jsonl"
    assert drain(slurm, "n05", "v", "reboot-node", Caps(), log)["result"] == "not-ours"
    assert [resume(slurm, n, log)["result"] for n in ("n00", "n05", "n06", "n07")] == [
        "resumed",
        "not-ours",
        "not-ours",
        "unchanged",
    ]
    assert slurm.state["n05"].reason == "maintenance: PSU swap" and slurm.calls == [("resume", "n00")]


def test_a_dry_run_over_many_nodes_counts_what_it_would_have_drained(tmp_path: Path) -> None:
    slurm = FakeSlurm(_cluster(0))
    planned: list[str] = []
    results = []
    for i in range(4):
        entry = drain(
            slurm,
            f"n{i:02d}",
            "v",
            "reset-gpu",
            Caps(max_drain=2),
            tmp_path / "a",
            dry_run=True,
            planned=tuple(planned),
            now=lambda: NOW,
        )
        planned += [entry["node"]] if entry["result"] == "would-drain" else []
        results.append(entry["result"])
    assert results == ["would-drain", "would-drain", "would-hold", "would-hold"] and slurm.calls == []
