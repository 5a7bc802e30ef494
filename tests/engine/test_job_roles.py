"""Jobs as first-class (issue 27.1): roles from the runbook's declared ``implicates``, never from host
names in prose; job facts are one member's value or an explicit aggregate, never a sum or a digest no
member has. Every job rehearsal is checked."""

from __future__ import annotations

from pathlib import Path

import pytest

from nightowl.engine.bundle_summary import triage_summary
from nightowl.engine.job import role, shared_facts
from nightowl.engine.members import members_in_minority, members_lacking, members_other_than, members_with
from nightowl.library.rehearse import rehearsal_cases, replay_case

JOB_RUNBOOKS = ("first-look", "nccl-hang", "silent-corruption")
CASES = [(rb, c) for rb in JOB_RUNBOOKS for c in rehearsal_cases(rb)]

# The member each recorded job's verdict is for, as a person reading the evidence names it.
EXPECTED = {
    ("nccl-hang", "watchdog timeouts on one host, Xid 79 on the other"): (["nccl-xid-b"], ["nccl-xid-a"]),
    ("nccl-hang", "CPU-side straggler"): (["nccl-straggler-b"], ["nccl-straggler-a"]),
    ("nccl-hang", "rank 4 enqueued 9141"): (["nccl-gpu-path-a"], ["nccl-gpu-path-b"]),
    ("nccl-hang", "rank 1 never completes init"): (["nccl-init-b"], ["nccl-init-a"]),
    ("first-look", "one replica answers 503"): (["first-look-down-r2"], ["first-look-down-r1", "first-look-down-r3"]),
    ("first-look", "KV cache full"): (["first-look-kv-full-r2"], ["first-look-kv-full-r1", "first-look-kv-full-r3"]),
    ("silent-corruption", "one replica of three answers differently"): (["sdc-diverged"], ["sdc-good-a", "sdc-good-b"]),
    ("silent-corruption", "the diverging replica logged Xid 48"): (["sdc-dbe"], ["sdc-good-a"]),
}


def _summary(runbook: str, case: dict) -> dict:
    return triage_summary(runbook, "run", Path("bundle"), replay_case(runbook, case))


@pytest.mark.parametrize(("runbook", "case"), CASES, ids=[f"{rb}:{c['name'][:40]}" for rb, c in CASES])
def test_no_member_outside_the_declared_ones_is_named_for_action(runbook: str, case: dict) -> None:
    job = _summary(runbook, case)["job"]
    verdict = job.get("verdict")
    members = [m["host"] for m in job["members"]]
    acting = [m["host"] for m in job["members"] if m["role"].startswith("act on") or m["role"] == "implicated"]
    if verdict is None:
        assert not acting
        return
    if verdict["action"] != "none":
        assert "implicated" in verdict, "a job verdict with an action says whom it is for"
    implicated = verdict.get("implicated") or []
    assert acting == [h for h in implicated if h in members]
    assert set(verdict.get("not_implicated") or []).isdisjoint(implicated)
    if verdict["severity"] == "ok":
        assert {m["role"] for m in job["members"]} <= {"healthy", "no verdict (unreachable)"}
    for name, (want, not_want) in EXPECTED.items():
        if (runbook, case["name"][: len(name[1])]) == name:
            assert implicated == want and verdict["not_implicated"] == not_want


def test_every_expected_case_is_recorded() -> None:
    names = {(rb, c["name"]) for rb, c in CASES}
    for runbook, prefix in EXPECTED:
        assert any(rb == runbook and n.startswith(prefix) for rb, n in names), prefix


def test_job_evidence_never_sums_members_nor_cites_a_digest_no_member_has() -> None:
    case = next(c for c in rehearsal_cases("first-look") if c["name"].startswith("KV cache full"))
    evidence = _summary("first-look", case)["job"]["verdict"]["evidence"]
    preemptions = [e for e in evidence if e["fact"] == "replica_metrics_after.preemptions_total"]
    assert preemptions and all(e.get("host") for e in preemptions)  # one value per member, never merged
    assert {e["host"]: e["value"] for e in preemptions}["first-look-kv-full-r2"] == 13
    case = next(c for c in rehearsal_cases("silent-corruption") if "sdc-diverged" in c.get("hosts", []))
    summary = _summary("silent-corruption", case)
    digests = {e["value"] for e in summary["job"]["verdict"]["evidence"] if e["fact"] == "known_answer.answer_digest"}
    facts = summary["job"]["facts"]
    held = next(f for f in facts if f["fact"] == "known_answer.answer_digest")
    assert held["rule"] == "per member" and set(held["values"].values()) == digests and len(digests) == 2


def test_shared_facts_keep_agreement_take_the_max_and_drop_what_differs() -> None:
    shared = shared_facts(
        [
            {"preemptions_total": 42, "digest": "a", "engine": "vllm"},
            {"preemptions_total": 42, "digest": "b", "engine": "vllm"},
            {"preemptions_total": 40, "digest": "a", "engine": "vllm"},
        ]
    )
    assert shared is not None
    assert shared["preemptions_total"] == 42 and shared["_rules"] == {"preemptions_total": "max over members"}
    assert "digest" not in shared and shared["engine"] == "vllm"
    assert shared_facts([{"n": 42}] * 3) == {"n": 42}  # 3 x 42 is 42, never 126
    assert shared_facts([]) is None


def test_member_filters_read_each_members_own_facts() -> None:
    hosts = {
        "a": {"kernel_log": {"xid_codes": []}, "nccl_log": {"ranks_seen": [0, 1], "init_complete_ranks": [0]}},
        "b": {"kernel_log": {"xid_codes": [79]}, "nccl_log": {"ranks_seen": [2, 3], "init_complete_ranks": []}},
        "c": {"kernel_log": {}, "nccl_log": {}},
    }
    assert members_with(hosts, "kernel_log.xid_codes") == ["b"]
    assert members_with(hosts, "kernel_log.xid_codes", [48, 79]) == ["b"]
    assert members_with(hosts, "nccl_log.ranks_seen", [1]) == ["a"]
    assert members_lacking(hosts, "nccl_log.init_complete_ranks") == ["b"]  # c read nothing: not picked
    digests = {"a": {"k": {"d": "x"}}, "b": {"k": {"d": "x"}}, "c": {"k": {"d": "y"}}, "e": {"k": {}}}
    assert members_in_minority(digests, "k.d") == ["c"]
    assert members_other_than(digests, "k.d", "x") == ["c"]
    assert members_in_minority({"a": {"k": {"d": "x"}}, "b": {"k": {"d": "y"}}}, "k.d") == []  # no majority


def test_roles_read_the_declaration() -> None:
    verdict = {"severity": "critical", "action": "drain-and-reset", "implicated": ["b"], "not_implicated": ["a"]}
    assert role("ok", verdict, "b") == "act on: drain-and-reset" and role("ok", verdict, "a") == "not implicated"
    assert role("ok", {**verdict, "implicated": [], "whole_job": True}, "a") == "whole job: drain-and-reset"
    assert role("ok", {**verdict, "implicated": []}, "a") == "not implicated"  # the node to act on is not a member
    assert role("unreachable", verdict, "b") == "act on: drain-and-reset (unreachable)"
    assert role("unreachable", verdict, "a") == "no verdict (unreachable)"
    assert role("ok", {"severity": "ok", "action": "none"}, "a") == "healthy"
