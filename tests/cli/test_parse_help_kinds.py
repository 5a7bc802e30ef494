"""`nightowl parse --help` lists every registered kind, from the registry, not from a hand list."""

from __future__ import annotations

import re

import pytest
from click.testing import CliRunner

from nightowl.cli import parse_cmd as parse_module
from nightowl.cli.main import main
from nightowl.collectors import MODULES


def _listed(text: str) -> set[str]:
    return set(re.findall(r"[a-z0-9]+(?:-[a-z0-9]+)*", " ".join(text.split())))


def test_every_registered_kind_is_in_parse_help() -> None:
    result = CliRunner().invoke(main, ["parse", "--help"])
    assert result.exit_code == 0
    assert set(MODULES) <= _listed(result.output), sorted(set(MODULES) - _listed(result.output))
    assert set(parse_module.CORE_KINDS) <= set(MODULES)


def test_a_kind_added_to_the_registry_appears_in_help(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(MODULES, "driver-version-test", "nightowl.collectors.gpu.nvlink")
    assert "driver-version-test" in parse_module.parse_cmd.help
    assert "driver-version-test" in CliRunner().invoke(main, ["parse", "--help"]).output


def test_the_help_is_one_kind_per_word_never_cut_at_a_hyphen() -> None:
    lines = parse_module.kinds_help().splitlines()
    assert not [line for line in lines if line.rstrip().endswith("-")]
