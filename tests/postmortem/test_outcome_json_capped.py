"""A received bundle's outcome.json is read within a size cap (``history.bundle_files``, as the history reads a
bundle's JSON), and one that cannot be used (too big, not JSON, nested too deep, undecodable, a FIFO, a link,
the wrong record) is a recorded problem: named in the draft's lessons ("Evidence this draft could not read
again"), in the MCP bundle tool's ``problems``, and by ``postmortem --verify``; never a traceback, never
trusted."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from nightowl.engine.bundle_verify import OUTCOME_MAX_BYTES, verify_bundle
from nightowl.history.bundle_files import MAX_JSON_BYTES
from nightowl.library import runbooks
from nightowl.mcp.bundles import read_bundle
from nightowl.outcome import read_bundle_outcome
from nightowl.postmortem import render_bundle
from nightowl.run import RunSettings, run_and_save
from nightowl.transports.replay import ReplayTransport
from tests.postmortem.bundles import HOSTS

FALLEN = "xid79-fallen-off-bus"


@pytest.fixture(scope="module")
def saved(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A bundle as `nightowl triage` saves it, with its outcome.json."""
    out = tmp_path_factory.mktemp("out")
    host = HOSTS / FALLEN
    result = run_and_save(
        runbooks.load("xid"), {FALLEN: lambda: ReplayTransport(host, FALLEN)}, out, settings=RunSettings(history=False)
    )
    assert result.bundle is not None and (result.bundle / "outcome.json").is_file()
    return result.bundle


def oversize(path: Path) -> None:
    with path.open("wb") as handle:  # a JSON string one byte over the cap: valid, but never read whole
        handle.write(b'{"origin": "hand", "x": "' + b"a" * MAX_JSON_BYTES + b'"}')


BAD = {
    "over the cap": (oversize, "larger than"),
    "not JSON": (lambda p: p.write_text("{not json"), "not JSON"),
    "nested too deep": (lambda p: p.write_text("[" * 100_000 + "]" * 100_000), "not JSON: nested too deep"),
    "undecodable": (lambda p: p.write_bytes(b'{"origin": "\xff\xfe"}'), "not JSON"),
    "a list": (lambda p: p.write_text("[]"), "not the run's outcome record"),
    "a FIFO": (lambda p: os.mkfifo(p), "not a regular file"),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_an_unusable_outcome_json_is_one_problem_line(tmp_path: Path, case: str) -> None:
    make, said = BAD[case]
    make(tmp_path / "outcome.json")
    problems: list[str] = []
    assert read_bundle_outcome(tmp_path, problems) is None
    assert len(problems) == 1 and problems[0].startswith("outcome.json not used: ") and said in problems[0]


def test_a_usable_or_absent_outcome_json_is_no_problem(tmp_path: Path) -> None:
    problems: list[str] = []
    assert read_bundle_outcome(tmp_path, problems) is None and problems == []  # a bundle from before it was kept
    (tmp_path / "outcome.json").write_text(json.dumps({"origin": "hand", "verdict": None}))
    assert read_bundle_outcome(tmp_path, problems) == {"origin": "hand", "verdict": None} and problems == []


def test_a_linked_outcome_json_is_not_followed(tmp_path: Path) -> None:
    (tmp_path / "elsewhere.json").write_text(json.dumps({"origin": "hand"}))
    (tmp_path / "outcome.json").symlink_to(tmp_path / "elsewhere.json")
    problems: list[str] = []
    assert read_bundle_outcome(tmp_path, problems) is None
    assert problems == ["outcome.json not used: a symbolic link, not followed"]


@pytest.mark.parametrize("case", ["over the cap", "nested too deep", "undecodable"])
def test_the_draft_and_the_mcp_tool_record_it(saved: Path, case: str) -> None:
    outcome = saved / "outcome.json"
    kept = outcome.read_bytes()
    try:
        BAD[case][0](outcome)
        markdown = render_bundle(saved)
        told = next(line for line in markdown.splitlines() if "Evidence this draft could not read again" in line)
        assert "outcome.json not used: " in told and BAD[case][1] in told
        assert "Postmortem: gpu-fell-off-bus on " + FALLEN in markdown  # told from the verdicts instead
        answer = read_bundle(str(saved))
        assert answer["outcome"] is None
        assert [p for p in answer["problems"] if p.startswith("outcome.json not used: ")], answer["problems"]
    finally:
        outcome.write_bytes(kept)
    assert read_bundle(str(saved))["outcome"]["origin"] == "hand"


def test_verify_reads_no_more_than_the_cap(saved: Path) -> None:
    outcome = saved / "outcome.json"
    kept = outcome.read_bytes()
    assert OUTCOME_MAX_BYTES == MAX_JSON_BYTES
    try:
        oversize(outcome)
        assert verify_bundle(saved) == [
            f"corrupt: outcome.json is larger than {OUTCOME_MAX_BYTES} bytes, not the run's outcome record"
        ]
    finally:
        outcome.write_bytes(kept)
    assert verify_bundle(saved) == []
