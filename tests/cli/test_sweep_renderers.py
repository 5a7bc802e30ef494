"""Each sweep output format is declared once (sweep_report.RENDERERS): the --format choices, the renderer and
whether it is a file format all come from that table."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from nightowl.cli import sweep_cmd, sweep_report
from nightowl.cli.main import main

SUMMARY = {
    "runbook": "node-health",
    "run_id": "r1",
    "bundle": "/tmp/b",
    "hosts": [{"host": "gpu-1", "status": "unreachable", "verdict": None, "path": [], "duration": 0.5, "error": "x"}],
    "fleet": {},
}


def test_the_format_choices_are_the_renderers() -> None:
    option = next(p for p in sweep_cmd.sweep.params if p.name == "fmt")
    assert list(option.type.choices) == list(sweep_report.RENDERERS)  # type: ignore[attr-defined]
    assert option.default == next(iter(sweep_report.RENDERERS))


@pytest.mark.parametrize("fmt", sorted(sweep_report.RENDERERS))
def test_every_format_renders_a_summary(fmt: str) -> None:
    text = sweep_report.renderer(fmt)(SUMMARY)
    assert isinstance(text, str) and "gpu-1" in text


def test_a_sweep_prints_in_the_chosen_format(tmp_path: Path) -> None:
    inventory = tmp_path / "hosts.yaml"
    inventory.write_text('hosts:\n  - "gpu 17!!"\n')
    out = str(tmp_path / "out")
    result = CliRunner().invoke(main, ["sweep", "--inventory", str(inventory), "--format", "json", "--out", out])
    assert result.exit_code == 3 and result.stdout.lstrip().startswith("{"), result.output
