"""One postmortem per incident (issue 27.2): a job's bundle gets one Summary bullet, one root cause and one
first action for the job, action items only for the members its runbook implicates, bounded citations;
the silent-corruption draft states the window of possibly wrong responses. The status update speaks of
the job once."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from nightowl.postmortem.render import render_bundle
from nightowl.reports import status_update
from tests.postmortem.bundles import rehearsed_bundle


def _section(draft: str, name: str) -> str:
    return draft.split(f"## {name}\n", 1)[1].split("\n## ", 1)[0]


def _mitigations(draft: str) -> list[str]:
    return [
        row for row in _section(draft, "Action items").splitlines() if "| mitigate |" in row or "| prevent |" in row
    ]


def test_nccl_hang_draft_names_the_faulty_rank_host_only(tmp_path: Path) -> None:
    bundle, _ = rehearsed_bundle(tmp_path, "nccl-hang", "watchdog timeouts on one host, Xid 79")
    draft = render_bundle(bundle)
    summary = _section(draft, "Summary")
    assert summary.count("\n- ") + summary.startswith("- ") == 1  # one bullet for the job
    assert "implicated: nccl-xid-b" in summary and "not implicated: nccl-xid-a" in summary
    assert len(re.findall(r"\[E\d+ ", summary)) <= 4
    rows = _mitigations(draft)
    assert rows and all("nccl-xid-b" in r and "nccl-xid-a" not in r for r in rows)
    assert _section(draft, "Root causes").count("candidate;") == 1
    assert _section(draft, "Resolution").count("First action proposed") == 1
    assert "2 of 2 hosts" not in _section(draft, "Impact")
    assert "not implicated: nccl-xid-a" in _section(draft, "Impact")
    timeline = _section(draft, "Timeline")
    assert "| nccl-xid-a |" in timeline and "| nccl-xid-b |" in timeline  # a lane per member
    assert _section(draft, "Supporting information").count("Path taken:") == 1


def test_silent_corruption_draft_states_the_window_of_possibly_wrong_answers(tmp_path: Path) -> None:
    bundle, _ = rehearsed_bundle(tmp_path, "silent-corruption", "one replica of three answers differently")
    draft = render_bundle(bundle)
    impact = _section(draft, "Impact")
    assert "3 of 3" not in impact and "need action" not in impact.split("\n")[0]
    assert re.search(r"responses served by sdc-diverged from 2024-06-12T13:00:00Z to this capture", impact), impact
    assert all("sdc-good" not in row for row in _mitigations(draft))


@pytest.mark.parametrize(
    ("runbook", "starts", "implicated", "others"),
    [
        ("first-look", "one replica answers 503", "r2", "r1, r3"),
        ("nccl-hang", "watchdog timeouts on one host, Xid 79", "nccl-xid-b", "nccl-xid-a"),  # no "a"/"b"
    ],
)
def test_status_update_names_the_implicated_members_once(
    tmp_path: Path, runbook: str, starts: str, implicated: str, others: str
) -> None:
    _, summary = rehearsed_bundle(tmp_path, runbook, starts)
    text = status_update.render(summary, now=0)
    impact = next(line for line in text.splitlines() if line.startswith("Impact:"))
    assert f" on {implicated} (" in impact and impact.endswith(f"; not implicated: {others})")
