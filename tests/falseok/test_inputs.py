"""Inputs that steer the decision are checked before the run: exit 2 with the reason, no PASS/OK line."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from nightowl.cli.main import main
from tests.helpers import ROOT

HOSTS = ROOT / "fixtures" / "hosts"
BENCH = ROOT / "fixtures" / "corpus" / "serving" / "vllm_bench_serve_sharegpt_llama31_8b_pr18566.txt"


def invoke(*args: str):  # noqa: ANN201
    return CliRunner().invoke(main, list(args))


def assert_refused(result, *words: str) -> None:  # noqa: ANN001
    assert result.exit_code == 2, result.output
    assert "PASS" not in result.output and "OK " not in result.output
    for word in words:
        assert word in result.output


@pytest.mark.parametrize("content", [None, "overrides: [", "overrides: {63: {action: fly}}"])
def test_missing_or_invalid_xid_policy_is_a_usage_error(tmp_path: Path, content: str | None) -> None:
    policy = tmp_path / "policy.yaml"
    if content is not None:
        policy.write_text(content)
    host = str(HOSTS / "xid48-xid64-dbe")
    result = invoke("triage", "xid", "--replay", host, "--param", f"xid_policy={policy}", "--out", str(tmp_path))
    assert_refused(result, "xid_policy")
    assert not any(p.is_dir() for p in tmp_path.iterdir())  # nothing ran


def test_unknown_param_lists_the_valid_ones(tmp_path: Path) -> None:
    result = invoke("triage", "xid", "--replay", str(HOSTS / "healthy-l40s"), "--param", "xid_polcy=x")
    assert_refused(result, "xid_polcy", "xid_policy", "expected_gpus")


def test_runbook_test_of_an_unknown_runbook() -> None:
    assert_refused(invoke("runbook", "test", "no-such-runbook"), "no-such-runbook", "node-health")


def test_demo_unknown_case_lists_cases() -> None:
    assert_refused(invoke("demo", "--case", "no-such-case"), "no-such-case", "xid79-fallen-off-bus")


@pytest.mark.parametrize("side", ["baseline", "current"])
def test_bench_compare_with_an_unreadable_side(tmp_path: Path, side: str) -> None:
    garbage = tmp_path / "empty.txt"
    garbage.write_text("")
    args = [str(BENCH), str(garbage)] if side == "current" else [str(garbage), str(BENCH)]
    assert_refused(invoke("bench", "compare", *args), side)
