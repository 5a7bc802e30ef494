"""Verdicts written for people: every rehearsal through the text renderer, with and without -v, shows no
Python internals, and a job prints its verdict once with one row per member."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from nightowl.cli.render import human, text_report
from nightowl.engine.bundle_summary import triage_summary
from nightowl.library.rehearse import rehearsal_cases, replay_case
from nightowl.library.runbooks import builtin_paths

# What leaks when a value is printed as Python or JSON instead of words.
INTERNALS = re.compile(
    r"\bNone\b|\bnull\b|(?<![:=])\bTrue\b|(?<![:=])\bFalse\b|\.split\b|\{'|\{\"|\[\{|<[a-z_.]+ object at"
)
CASES = [(rb, case) for rb in builtin_paths() for case in rehearsal_cases(rb)]


@pytest.mark.parametrize(("runbook", "case"), CASES, ids=[f"{rb}:{c['name'][:40]}" for rb, c in CASES])
def test_rehearsal_text_has_no_python_internals(runbook: str, case: dict) -> None:
    runs = replay_case(runbook, case)
    summary = triage_summary(runbook, "run", Path("bundle"), runs)
    for verbose in (False, True):
        # a `next:` line is a command to paste (its --param values may be JSON), not prose
        text = "\n".join(line for line in text_report(summary, verbose=verbose).splitlines() if "  next: " not in line)
        said = re.sub(r'"[^"\n]*"', '""', text)  # a quoted log line says what it says ("NVRM: None of ...")
        leaks = sorted({m.group(0) for m in INTERNALS.finditer(said)})
        assert not leaks, f"{leaks} in:\n{text}"
    if "job" in summary:
        text = text_report(summary)
        assert text.count("first action:") <= 1 and text.count("NO VERDICT") <= 1
        for member in summary["job"]["members"]:
            assert re.search(rf"^  {re.escape(member['host'])} +{re.escape(member['role'])}", text, re.M), text


def test_values_read_as_words() -> None:
    assert human(None) == "not read"
    assert human(True) == "yes" and human([]) == "none"
    assert human([{"message": "Unable to determine the device handle"}]).startswith("1 entry: Unable")
    assert human({"0000:a1:00": [79]}) == "0000:a1:00: 79"


def test_job_cites_differing_answers_per_host_and_names_the_host_to_pull() -> None:
    case = next(c for c in rehearsal_cases("silent-corruption") if "sdc-diverged" in c.get("hosts", []))
    summary = triage_summary("silent-corruption", "run", None, replay_case("silent-corruption", case))
    digests = [e for e in summary["job"]["verdict"]["evidence"] if e["fact"] == "known_answer.answer_digest"]
    assert {e["host"] for e in digests} == set(case["hosts"])
    assert all("," not in (e["source"] or "") for e in digests)  # one file each, never merged
    roles = {m["host"]: m["role"] for m in summary["job"]["members"]}
    assert roles["sdc-diverged"].startswith("act on") and roles["sdc-good-a"] == "not implicated"
