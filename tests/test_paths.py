"""Where an operator puts things: XDG directories, $NIGHTOWL_OUT, and site runbook folders."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from nightowl import paths
from nightowl.cli.main import main
from nightowl.library import runbooks

SITE_RUNBOOK = """\
id: gpu-temp
title: Site check of GPU temperature
entry: collect
nodes:
  collect:
    collect: [nvidia-smi]
    next:
      - verdict: {id: ok, severity: ok, action: none, summary: fine}
"""


@pytest.fixture
def xdg(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    monkeypatch.delenv("NIGHTOWL_OUT", raising=False)
    monkeypatch.delenv("NIGHTOWL_RUNBOOK_PATH", raising=False)
    monkeypatch.setattr(paths, "SITE_CONFIG_DIR", tmp_path / "etc")
    return tmp_path


def test_bundles_go_to_the_xdg_state_dir_unless_nightowl_out(xdg: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert paths.default_out_dir() == xdg / "state" / "nightowl" / "bundles"
    monkeypatch.setenv("NIGHTOWL_OUT", str(xdg / "elsewhere"))
    assert paths.default_out_dir() == xdg / "elsewhere"


def test_site_runbooks_are_found_by_name_in_search_order(xdg: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    user = xdg / "config" / "nightowl" / "runbooks"
    system = xdg / "etc" / "runbooks"
    given = xdg / "given"
    for folder in (user, system, given):
        folder.mkdir(parents=True)
    (system / "gpu-temp.yaml").write_text(SITE_RUNBOOK)
    assert runbooks.resolve("gpu-temp") == system / "gpu-temp.yaml"
    (user / "gpu-temp.yaml").write_text(SITE_RUNBOOK)
    assert runbooks.resolve("gpu-temp") == user / "gpu-temp.yaml"
    (given / "gpu-temp.yaml").write_text(SITE_RUNBOOK)
    assert runbooks.resolve("gpu-temp", [given]) == given / "gpu-temp.yaml"
    assert runbooks.resolve("xid") == runbooks.builtin_paths()["xid"]  # built-ins still reachable
    with pytest.raises(FileNotFoundError, match="site folders searched"):
        runbooks.resolve("no-such-runbook")


def test_runbook_path_option_reaches_list_and_show(xdg: Path) -> None:
    folder = xdg / "team"
    folder.mkdir()
    (folder / "gpu-temp.yaml").write_text(SITE_RUNBOOK)
    runner = CliRunner()
    listed = runner.invoke(main, ["--runbook-path", str(folder), "runbook", "list"])
    assert "gpu-temp" in listed.output and "xid" in listed.output, listed.output
    shown = runner.invoke(main, ["--runbook-path", str(folder), "runbook", "show", "gpu-temp"])
    assert "Site check of GPU temperature" in shown.output, shown.output


# --- issue 30, item 18: a site path others may write is refused, with the reason --------------------
@pytest.mark.parametrize(("what", "mode"), [("folder", 0o777), ("folder", 0o1777), ("file", 0o666)])
def test_a_world_writable_site_runbook_is_refused_with_the_reason(xdg: Path, what: str, mode: int) -> None:
    import os

    folder = xdg / "config" / "nightowl" / "runbooks"
    folder.mkdir(parents=True)
    path = folder / "xid.yaml"  # a site copy of a built-in's name: it would replace the built-in
    path.write_text(SITE_RUNBOOK.replace("gpu-temp", "xid"))
    os.chmod(folder if what == "folder" else path, mode)
    with pytest.raises(runbooks.UnsafeSitePath, match="writable by every user"):
        runbooks.resolve("xid")
    runner = CliRunner()
    run = runner.invoke(main, ["triage", "xid", "--replay", str(runbooks.builtin_dir())])
    assert run.exit_code == 2 and "refused" in run.output and "writable by every user" in run.output
    listed = runner.invoke(main, ["runbook", "list"])
    assert "refused" in listed.output
    os.chmod(folder if what == "folder" else path, 0o755 if what == "folder" else 0o644)
    assert runbooks.resolve("xid") == path  # once fixed, the site copy is what `xid` names


def test_a_site_runbook_owned_by_another_user_is_refused(xdg: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import os

    folder = xdg / "config" / "nightowl" / "runbooks"
    folder.mkdir(parents=True)
    (folder / "gpu-temp.yaml").write_text(SITE_RUNBOOK)
    monkeypatch.setattr(os, "getuid", lambda: 4242)  # as if the runner were another, non-root user
    real_stat = Path.stat
    owner_uid = real_stat(folder).st_uid
    if owner_uid != 0:
        pytest.skip("needs files owned by root to pose as another user's")
    monkeypatch.setattr(
        Path, "stat", lambda self, **kw: os.stat_result((*real_stat(self, **kw)[:4], 1001, *real_stat(self, **kw)[5:]))
    )
    with pytest.raises(runbooks.UnsafeSitePath, match="owned by uid 1001"):
        runbooks.resolve("gpu-temp")
