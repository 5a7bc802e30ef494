"""The status update of every first-look rehearsal reads as a person would write it: no Python or JSON
leaking through (None, null, True, False, brackets, braces), short host names, an honest "since"."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from nightowl.engine.bundle_summary import triage_summary
from nightowl.library.rehearse import rehearsal_cases, replay_case
from nightowl.reports import status_update

LEAKS = re.compile(r"None|null|True|False|\[|\{")
CASES = rehearsal_cases("first-look")


@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
def test_status_update_of_each_rehearsal_reads_plainly(case: dict, tmp_path: Path) -> None:  # type: ignore[type-arg]
    runs = replay_case("first-look", case, out_dir=tmp_path)
    text = status_update.render(triage_summary("first-look", "run-1", tmp_path / "run-1", runs), now=0)
    assert not LEAKS.search(text), LEAKS.findall(text)
    body = text.split("\n", 1)[1].split("\n(nightowl")[0]  # the header names the service once
    assert "first-look-" not in body  # short names: r1, not the recorded folder's name
    # when the evidence dates the trouble (start times, the first failing answer) it says so and why
    assert "Since: not known: first seen by this check at 00:00 UTC" in text or re.search(
        r"Since: (at or before )?\d{4}-\d\d-\d\d \d\d:\d\d UTC; source: \w", text
    )
    assert "(s)" not in text


def test_short_names() -> None:
    assert status_update.short_names(["first-look-down-r1", "first-look-down-r2"]) == {
        "first-look-down-r1": "r1",
        "first-look-down-r2": "r2",
    }
    assert status_update.short_names(["gpu-17.prod.example.com", "gpu-18.prod.example.com"]) == {
        "gpu-17.prod.example.com": "gpu-17",
        "gpu-18.prod.example.com": "gpu-18",
    }
    assert status_update.short_names(["10.0.0.5", "10.0.0.6"]) == {"10.0.0.5": "10.0.0.5", "10.0.0.6": "10.0.0.6"}
