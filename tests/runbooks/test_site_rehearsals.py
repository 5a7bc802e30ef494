"""`nightowl runbook test NAME` for a site runbook: rehearsals beside it, or given with --rehearsals."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from nightowl.cli.main import main
from tests.site_runbooks import site_folder

CASES = """\
- name: a healthy L40S node
  host: healthy-l40s
  expect: {verdict: ok, action: none, path: [collect, judge, ok]}
"""


@pytest.fixture
def site(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = site_folder(tmp_path, monkeypatch, "gpu-count", "Site check that nvidia-smi lists GPUs")
    (folder / "rehearsals").mkdir()
    return folder


def _test(*args: str):
    return CliRunner().invoke(main, list(args), catch_exceptions=False)


def test_rehearsals_beside_a_site_runbook_are_found_by_name(site: Path) -> None:
    (site / "rehearsals" / "gpu-count.yaml").write_text(CASES)
    result = _test("--runbook-path", str(site), "runbook", "test", "gpu-count")
    assert result.exit_code == 0, result.output
    assert "PASS  gpu-count: a healthy L40S node -> ok" in result.output and "1 passed, 0 failed" in result.output


def test_a_wrong_expectation_fails(site: Path) -> None:
    (site / "rehearsals" / "gpu-count.yaml").write_text(CASES.replace("verdict: ok", "verdict: too-hot"))
    result = _test("--runbook-path", str(site), "runbook", "test", "gpu-count")
    assert result.exit_code == 1 and "verdict 'ok' != expected 'too-hot'" in result.output


def test_rehearsals_given_by_path(site: Path, tmp_path: Path) -> None:
    elsewhere = tmp_path / "cases.yaml"
    elsewhere.write_text(CASES)
    result = _test("--runbook-path", str(site), "runbook", "test", "gpu-count", "--rehearsals", str(elsewhere))
    assert result.exit_code == 0 and "1 passed, 0 failed" in result.output, result.output
    folder = tmp_path / "cases"
    folder.mkdir()
    (folder / "gpu-count.yaml").write_text(CASES)
    result = _test("--runbook-path", str(site), "runbook", "test", "gpu-count", "--rehearsals", str(folder))
    assert result.exit_code == 0 and "1 passed, 0 failed" in result.output, result.output


def test_a_site_runbook_without_rehearsals_is_named(site: Path) -> None:
    result = _test("--runbook-path", str(site), "runbook", "test", "gpu-count")
    assert result.exit_code != 0 and "no rehearsals for gpu-count" in result.output
