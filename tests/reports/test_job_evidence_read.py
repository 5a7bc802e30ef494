"""A job's evidence is the value its branch read (issue 45 item 9): nccl-hang finds the straggler across the
members' logs (rank 3), while each member's own log alone shows none; the verdict, the text report and the
status update's job facts said `straggler_ranks: none` "same on every member" while the branch read [3]."""

from __future__ import annotations

from pathlib import Path

from nightowl.cli.render import text_report
from nightowl.engine.bundle_summary import triage_summary
from nightowl.library.rehearse import rehearsal_cases, replay_case

CASE = next(c for c in rehearsal_cases("nccl-hang") if c["name"].startswith("CPU-side straggler, rank 3"))


def test_the_straggler_ranks_cited_are_the_ones_the_branch_read(tmp_path: Path) -> None:
    runs = replay_case("nccl-hang", CASE, out_dir=tmp_path)
    summary = triage_summary("nccl-hang", "run-1", tmp_path / "run-1", runs)
    job = summary["job"]
    assert job["verdict"]["id"] == "cpu-side-straggler"
    read = [
        c["reads"]["nccl_log.straggler_ranks"]
        for run in runs
        for visit in run.visits
        for c in visit.conditions
        if c.get("value") and "nccl_log.straggler_ranks" in c.get("reads", {})
    ]
    assert read and all(r == [3] for r in read)  # the branch that sent the job to the straggler verdict
    cited = [e for e in job["verdict"]["evidence"] if e["fact"] == "nccl_log.straggler_ranks"]
    assert [(e["value"], e["rule"]) for e in cited] == [([3], "job")]
    assert "nccl_log.straggler_ranks: 3" in text_report(summary)
    assert "straggler_ranks: none" not in text_report(summary)
