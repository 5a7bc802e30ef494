"""A job fact one member holds is not "the same on every member": the others gave nothing to compare (their
collector failed, or they were not reached). The JSON names who holds it and who did not report it, and the
text report and the postmortem draft say so next to the fact."""

from __future__ import annotations

from pathlib import Path

import pytest

from nightowl.cli.render import text_report
from nightowl.engine.bundle_summary import triage_summary
from nightowl.engine.job import HELD_BY_SOME, SAME_ON_EVERY_MEMBER, held_where
from nightowl.library.rehearse import rehearsal_cases, replay_case
from nightowl.postmortem.render import render_bundle

JOB_RUNBOOKS = ("first-look", "nccl-hang", "silent-corruption")
CASES = [(rb, c) for rb in JOB_RUNBOOKS for c in rehearsal_cases(rb)]
# sdc-dbe's recording has no nvidia-smi output; sdc-good-a's lists its GPUs with clean memory.
DBE_CASE = ("silent-corruption", "the diverging replica logged Xid 48")


def _case(runbook: str, starts: str) -> dict:
    return next(c for c in rehearsal_cases(runbook) if c["name"].startswith(starts))


@pytest.mark.parametrize(("runbook", "case"), CASES, ids=[f"{rb}:{c['name'][:40]}" for rb, c in CASES])
def test_same_on_every_member_only_when_every_member_holds_it(runbook: str, case: dict) -> None:
    job = triage_summary(runbook, "run", Path("b"), replay_case(runbook, case))["job"]
    members = [m["host"] for m in job["members"]]
    for fact in job["facts"]:
        if fact["rule"] == SAME_ON_EVERY_MEMBER:
            assert fact["held_by"] == members, fact
        elif fact["rule"] == HELD_BY_SOME:
            assert fact["held_by"] and fact["not_reported_by"], fact
            assert sorted(fact["held_by"] + fact["not_reported_by"]) == sorted(members), fact


def test_a_clean_memory_list_from_the_healthy_replica_is_not_the_faulty_ones() -> None:
    runbook, starts = DBE_CASE
    summary = triage_summary(runbook, "run", Path("b"), replay_case(runbook, _case(runbook, starts)))
    facts = {f["fact"]: f for f in summary["job"]["facts"]}
    dram = facts["nvidia_smi.dram_uncorrectable_volatile_gpus"]
    assert dram["rule"] == HELD_BY_SOME and dram["value"] == []
    assert dram["held_by"] == ["sdc-good-a"] and dram["not_reported_by"] == ["sdc-dbe"]
    evidence = {e["fact"]: e for e in summary["hosts"][0]["verdict"]["evidence"] if "held_by" in e}
    assert evidence["nvidia_smi.remap_failure_gpus"]["not_reported_by"] == ["sdc-dbe"]
    text = text_report(summary)
    assert "nvidia_smi.dram_uncorrectable_volatile_gpus on sdc-good-a only (sdc-dbe did not report it): none" in text


def test_the_postmortem_cites_the_fact_as_the_reporting_members_own(tmp_path: Path) -> None:
    runbook, starts = DBE_CASE
    replay_case(runbook, _case(runbook, starts), out_dir=tmp_path)
    (bundle,) = [p for p in tmp_path.iterdir() if p.is_dir()]
    draft = render_bundle(bundle)
    assert "`nvidia_smi.remap_failure_gpus on sdc-good-a only (sdc-dbe did not report it)` = `[]`" in draft
    assert "`nvidia_smi.remap_failure_gpus` = `[]`" not in draft


def test_held_where_reads_each_rule() -> None:
    assert held_where({"fact": "a.b", "host": "h1", "rule": "per member"}) == " on h1"
    assert held_where({"fact": "a.b", "held_by": ["h1", "h2"], "rule": SAME_ON_EVERY_MEMBER}) == ""
    assert held_where({"fact": "a.b", "rule": "job"}) == ""
    partial = {"fact": "a.b", "held_by": ["h1"], "not_reported_by": ["h2", "h3"], "rule": HELD_BY_SOME}
    assert held_where(partial) == " on h1 only (h2, h3 did not report it)"
    assert held_where({}) == ""  # a host run's own evidence item
