"""`nightowl plan` for a person (issue 45 item 9): no 1,300-character line of sh and awk. A long script is
shown one statement a line, and those lines joined by '; ' are the script exactly as ``--format json`` has it."""

from __future__ import annotations

import json

from click.testing import CliRunner

from nightowl.cli.main import main as cli
from nightowl.cli.plan_cmd import LONG, command_lines


def plan(*args: str) -> str:
    result = CliRunner().invoke(cli, ["plan", "xid", "--host", "gpu-17", *args])
    assert result.exit_code == 0, result.output
    return result.output


def test_no_plan_line_is_a_wall_of_script() -> None:
    text = plan()
    longest = max(text.splitlines(), key=len)
    assert len(longest) <= 2 * LONG, longest  # the awk program's one statement is the longest piece left
    assert "kernel-log-boots: (timeout" in text and 'sh -c "$SCRIPT" kernel-log-boots 2' in text
    assert "      or: dmesg -T" in text  # each alternative on its own line


def test_the_script_lines_are_the_script_as_run() -> None:
    steps = json.loads(plan("--format", "json"))["hosts"][0]["steps"]
    argv = next(s["commands"][0] for s in steps if s["collector"] == "kernel-log-boots")
    lines = command_lines(argv)
    script = argv[argv.index("-c") + 1]
    assert len(script) > LONG
    assert "; ".join(line.removeprefix("  ") for line in lines[2:]) == script
    assert command_lines(["nvidia-smi", "-q", "-x"]) == ["nvidia-smi -q -x"]
