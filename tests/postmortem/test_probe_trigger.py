"""The silent-corruption draft's Trigger is the earliest line the verdict's own evidence cites (issue 27
item 2): the known-answer probe's diverging answer, at the time the replica stamped it (``created``), so
Impact and Detection date the fault too; a probe that matches is context, never a trigger."""

from __future__ import annotations

import json
import re
from pathlib import Path

from nightowl.library.rehearse import rehearsal_cases, replay_case
from nightowl.postmortem.clocks import stamp
from nightowl.postmortem.render import render_bundle

ROOT = Path(__file__).resolve().parents[2]


def _draft(tmp_path: Path, starts: str) -> str:
    case = next(c for c in rehearsal_cases("silent-corruption") if c["name"].startswith(starts))
    replay_case("silent-corruption", case, out_dir=tmp_path)
    (bundle,) = [p for p in tmp_path.iterdir() if p.is_dir()]
    return render_bundle(bundle)


def _section(draft: str, name: str) -> str:
    return draft.split(f"## {name}\n", 1)[1].split("\n## ", 1)[0]


def _created(host: str) -> str:
    """The answer's own time, read from the recorded fixture, as the draft prints it."""
    first = (ROOT / "fixtures" / "hosts" / host / "known-answer.out").read_text().splitlines()[0]
    return stamp(float(json.loads(first)["created"]))


def test_trigger_is_the_diverging_probe_answer_with_its_time(tmp_path: Path) -> None:
    draft = _draft(tmp_path, "one replica of three answers differently")
    trigger = _section(draft, "Trigger")
    when = _created("sdc-diverged")
    assert "no fault event" not in trigger
    assert "known-answer probe: the answer differs" in trigger and f"on sdc-diverged at {when}" in trigger
    assert re.search(r"\[E\d+ known-answer\.out:L1-L1\]", trigger), trigger
    assert "sdc-good" not in trigger
    assert f"the evidence shows faults at {when}" in _section(draft, "Impact")
    detection = _section(draft, "Detection")
    assert "The first fault the evidence shows: known-answer probe: the answer differs" in detection
    assert f"at {when}" in detection
    timeline = _section(draft, "Timeline")
    good = [r for r in timeline.splitlines() if "| sdc-good-a |" in r and "known-answer probe" in r]
    assert good and all("| diagnosis |" in r for r in good)  # the matching answer is context


def test_no_divergence_keeps_no_trigger(tmp_path: Path) -> None:
    draft = _draft(tmp_path, "every replica gives the golden answer")
    assert "The host logs show no fault event" in _section(draft, "Trigger")
    assert "The first fault the evidence shows" not in _section(draft, "Detection")
    assert "| key moment | known-answer" not in _section(draft, "Timeline")


def test_a_memory_fault_verdict_keeps_the_kernel_log_as_trigger(tmp_path: Path) -> None:
    draft = _draft(tmp_path, "the diverging replica logged Xid 48")
    trigger = _section(draft, "Trigger")
    assert "known-answer" not in trigger and "Xid" in trigger


def test_the_html_draft_states_the_same_first_fault(tmp_path: Path) -> None:
    case = next(c for c in rehearsal_cases("silent-corruption") if c["name"].startswith("one replica of three"))
    replay_case("silent-corruption", case, out_dir=tmp_path)
    (bundle,) = [p for p in tmp_path.iterdir() if p.is_dir()]
    html = render_bundle(bundle, fmt="html")
    assert "<p>The first fault the evidence shows: known-answer probe: the answer differs" in html
    assert f"on sdc-diverged at {_created('sdc-diverged')}" in html
