"""The ``--runbook-path`` folders are handed in, never kept in a module global (issue 44 item 3): a command's
folders reach what it runs and starts (rehearsal workers, the receiver's rules, the MCP server's tools), and
one invocation's folders never reach the next one in the same process."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from nightowl.cli.main import main
from nightowl.library import runbooks
from nightowl.library.runbooks import RunbookLibrary
from tests.site_runbooks import site_folder


@pytest.fixture
def site(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A site folder that only a handed-in ``dirs`` reaches (no environment or XDG folder names it)."""
    return site_folder(tmp_path, monkeypatch, "gpu-temp", "Site check of GPU temperature")


def test_the_module_keeps_no_runbook_folders() -> None:
    assert not hasattr(runbooks, "EXTRA_DIRS")


def test_a_library_reaches_its_folders_and_the_module_functions_only_those_handed_in(site: Path) -> None:
    library = RunbookLibrary((site,))
    assert library.resolve("gpu-temp") == site / "gpu-temp.yaml"
    assert library.load("gpu-temp").runbook.id == "gpu-temp"
    assert "gpu-temp" in library.all_paths() and "xid" in library.all_paths()
    with pytest.raises(FileNotFoundError, match="no runbook named 'gpu-temp'"):
        runbooks.resolve("gpu-temp")  # nothing handed in: the built-ins and the environment's folders only
    with pytest.raises(FileNotFoundError):
        RunbookLibrary().load("gpu-temp")  # the cache of the first load is not reached without the folder


def test_one_invocations_runbook_path_does_not_reach_the_next(site: Path) -> None:
    runner = CliRunner()
    shown = runner.invoke(main, ["--runbook-path", str(site), "runbook", "show", "gpu-temp"])
    assert shown.exit_code == 0 and "Site check of GPU temperature" in shown.output, shown.output
    again = runner.invoke(main, ["runbook", "show", "gpu-temp"])
    assert again.exit_code == 2, again.output  # a global set by the first would still name the site runbook
    assert "no runbook named 'gpu-temp'" in again.output


def test_the_receivers_rules_resolve_through_the_commands_folders(site: Path, tmp_path: Path) -> None:
    from nightowl.receiver.config import ConfigError, load_config

    config_file = tmp_path / "serve.yaml"
    rule = "  - match: {alertname: GpuHot}\n    runbook: gpu-temp\n    host: '{{ instance }}'\n"
    config_file.write_text("rules:\n" + rule)
    with pytest.raises(ConfigError, match="gpu-temp"):
        load_config(config_file, tmp_path / "out", for_receiver=False)
    config = load_config(config_file, tmp_path / "out", for_receiver=False, runbooks=RunbookLibrary((site,)))
    assert config.runbooks.load("gpu-temp").path == site / "gpu-temp.yaml"  # what a capture loads (capture.py)


def test_the_mcp_tools_list_the_starting_commands_runbooks(site: Path) -> None:
    from nightowl.mcp.tools import Toolbox

    def never_runs(request: object) -> dict[str, object]:
        raise AssertionError("no run")

    assert "gpu-temp" not in Toolbox(never_runs).runbooks()
    assert "gpu-temp" in Toolbox(never_runs, library=RunbookLibrary((site,))).runbooks()


def test_rehearsal_workers_resolve_through_the_folders_their_jobs_carry(site: Path, tmp_path: Path) -> None:
    """No environment names the folder: only the library each job carries can reach the site copy of
    node-health (its kernel-log guard dropped), whose ablation findings prove the workers ran it."""
    import yaml

    from nightowl.library.rehearse import ablate_cases, ablation_pool, rehearsal_cases
    from tests.runbooks.test_ablation import node_health_without_kernel_log_guard

    (site / "node-health.yaml").write_text(node_health_without_kernel_log_guard())
    case = next(c for c in rehearsal_cases("node-health") if c.get("host") == "healthy-l40s")
    cases = tmp_path / "rehearsals.yaml"
    cases.write_text(yaml.safe_dump([case]))
    library = RunbookLibrary((site,))
    with ablation_pool(1) as workers:
        _, handed = ablate_cases(["node-health"], cases, pool=workers, library=library)
        _, built_in = ablate_cases(["node-health"], cases, pool=workers)
    assert {(f.output, f.mode) for f in handed} == {("kernel-log.out", "removed"), ("kernel-log.out", "emptied")}
    assert not built_in  # the built-in keeps its guard: the site folder did not leak into the worker
