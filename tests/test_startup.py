"""At 3 a.m. `nightowl --help` must answer at once: heavy imports stay lazy."""

from __future__ import annotations

import subprocess
import sys

HEAVY = (
    "paramiko",
    "jinja2",
    "networkx",
    "pydantic",
    "platformdirs",
    "yaml",
    "rich",
    "prometheus_client",
    "psutil",
    "defusedxml",
    "nightowl.engine",
    "nightowl.collectors.gpu.kernel_log",
    "mcp",  # the MCP SDK: `nightowl mcp` only (its import alone takes longer than --help may)
    "nightowl.mcp",
)


def test_help_imports_nothing_heavy() -> None:
    code = (
        "import sys\n"
        "from nightowl.cli.main import main\n"
        "try:\n    main(['--help'])\nexcept SystemExit:\n    pass\n"
        f"print([m for m in {HEAVY!r} if m in sys.modules])\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip().splitlines()[-1] == "[]"


def test_every_command_has_help() -> None:
    from click.testing import CliRunner

    from nightowl.cli.main import main

    runner = CliRunner()
    names = list(main.commands)
    assert {"demo", "parse", "xid", "triage", "sweep", "postmortem", "runbook", "plan"} <= set(names)
    for name in names:
        result = runner.invoke(main, [name, "--help"])
        assert result.exit_code == 0, name
        assert len(result.output.splitlines()) > 3, name
    for sub in main.commands["runbook"].commands:  # type: ignore[attr-defined]
        result = runner.invoke(main, ["runbook", sub, "--help"])
        assert result.exit_code == 0 and "Usage" in result.output


def test_readme_mentions_every_command() -> None:
    from pathlib import Path

    from nightowl.cli.main import main

    readme = (Path(__file__).resolve().parent.parent / "README.md").read_text()
    for name in main.commands:
        assert f"nightowl {name}" in readme, f"README does not show `nightowl {name}`"


def test_parse_help_lists_every_parseable_kind() -> None:
    from click.testing import CliRunner

    from nightowl.cli.main import main
    from nightowl.collectors import available_kinds

    text = " ".join(CliRunner().invoke(main, ["parse", "--help"]).output.split())
    for kind in available_kinds():  # derived kinds are named too, as runbook-only
        assert f" {kind}," in text or f" {kind}." in text or f" {kind} " in text, kind


def test_readme_example_runbook_is_valid(tmp_path) -> None:  # noqa: ANN001
    import re
    from pathlib import Path

    from nightowl.library import runbooks

    readme = (Path(__file__).resolve().parent.parent / "README.md").read_text()
    example = re.search(r"```yaml\n(.*?)```", readme, re.S)
    assert example, "README has no example runbook"
    path = tmp_path / "gpu-count.yaml"
    path.write_text(example.group(1))
    assert runbooks.load(str(path)).id == "gpu-count"


def test_readme_example_runbook_judges_a_hung_nvidia_smi(tmp_path) -> None:  # noqa: ANN001
    """The README's promise: a hung nvidia-smi is itself evidence, even when nothing else answered."""
    import json
    import re
    from pathlib import Path

    from click.testing import CliRunner

    from nightowl.cli.main import main

    root = Path(__file__).resolve().parent.parent
    example = re.search(r"```yaml\n(.*?)```", (root / "README.md").read_text(), re.S)
    assert example
    path = tmp_path / "gpu-count.yaml"
    path.write_text(example.group(1))
    hung = root / "fixtures" / "hosts" / "nvidia-smi-hung"
    result = CliRunner().invoke(
        main, ["triage", str(path), "--replay", str(hung), "--out", str(tmp_path / "b"), "--format", "json"]
    )
    assert result.exit_code == 1
    assert json.loads(result.output)["hosts"][0]["verdict"]["id"] == "nvidia-smi-hung"


def test_contract_extensions_doc_lists_every_kind() -> None:
    from pathlib import Path

    from nightowl.collectors import available_kinds

    doc = (Path(__file__).resolve().parent.parent / "docs" / "contract-extensions.md").read_text()
    contract = {"nvidia-smi", "kernel-log", "nccl-log", "nccl-tests", "metrics", "engine-log"}
    for kind in set(available_kinds()) - contract:
        assert f"`{kind}`" in doc, kind
