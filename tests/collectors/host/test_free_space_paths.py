"""free-space over several paths in one run: the collector's own command run for real on this machine (one df
with every path that exists, a line for each that does not, stat -f where that df fails), its facts per path,
the old single ``space_path`` still resolving to the single-path command, and engine-start judging them."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from nightowl.collectors.host import free_space
from nightowl.engine.runner import resolve_argv
from tests.helpers import ROOT
from tests.runbook_helpers import make_host, run_on

DF = shutil.which("df")
RECORDED = ROOT / "fixtures/corpus/host/free-space-paths-gnu-df-9.1-recorded.txt"
ENOSPC_LOG = (ROOT / "fixtures/hosts/engine-start-disk-full/engine-log.out").read_text()


def run_collector(params: dict[str, str], env: dict[str, str] | None = None) -> tuple[tuple[str, ...], str, int]:
    """The first of the collector's commands these parameters fill, run as the engine runs it (no shell of
    ours: the argv as declared), with its stdout and exit status."""
    argv = next(a for c in free_space.COLLECTOR.commands if (a := resolve_argv(c, params)) is not None)
    done = subprocess.run(argv, capture_output=True, text=True, timeout=30, env=env or dict(os.environ), check=False)
    return argv, done.stdout, done.returncode


@pytest.mark.skipif(DF is None, reason="needs df")
def test_one_run_reads_every_path_and_names_the_missing_ones(tmp_path: Path) -> None:
    cache, bundles = tmp_path / "hf", tmp_path / "bundles dir"
    cache.mkdir()
    bundles.mkdir()
    gone = tmp_path / "no-docker"
    argv, out, rc = run_collector({"space_paths": f"{cache}:{gone}::{bundles}"})
    assert argv[:2] == ("sh", "-c") and rc == 0
    facts = free_space.facts(free_space.parse(out))
    assert facts["missing_paths"] == [str(gone)] and facts["paths"][str(gone)] == {"found": False}
    found = facts["paths"][str(cache)]
    assert found["found"] is True and found["mounted_on"] and found["bytes_free_pct"] is not None
    assert found["full"] in (True, False) and facts["warnings"] == []
    # both paths sit on one filesystem: two rows, not merged into one; a space in a path is part of it
    assert [f["path"] for f in facts["filesystems"]] == [str(cache), str(bundles)]
    assert facts["paths"][str(bundles)] == found
    assert str(gone) not in facts["full_paths"] + facts["unjudged_paths"]  # missing is neither full nor judged


@pytest.mark.skipif(DF is None, reason="needs df")
def test_home_is_the_users_and_every_path_missing_is_no_room_claimed(tmp_path: Path) -> None:
    (tmp_path / ".cache" / "huggingface").mkdir(parents=True)
    env = {**os.environ, "HOME": str(tmp_path)}
    _, out, rc = run_collector({"space_path": "/", "space_paths": "~/.cache/huggingface:/nonexistent/x"}, env)
    facts = free_space.facts(free_space.parse(out))
    assert rc == 0 and set(facts["paths"]) == {"/", f"{tmp_path}/.cache/huggingface", "/nonexistent/x"}
    _, out, rc = run_collector({"space_paths": "/nonexistent/a:/nonexistent/b"})
    facts = free_space.facts(free_space.parse(out))
    assert rc == 0 and facts["filesystems"] == [] and facts["bytes_free_pct_min"] is None
    assert facts["missing_paths"] == ["/nonexistent/a", "/nonexistent/b"]


@pytest.mark.skipif(shutil.which("stat") is None, reason="needs stat")
def test_stat_f_where_df_has_no_output_option(tmp_path: Path) -> None:
    """BusyBox df rejects --output and prints nothing: the script asks stat -f for the same paths."""
    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "df").write_text("#!/bin/sh\necho \"df: unrecognized option '--output'\" >&2\nexit 1\n")
    (fake / "df").chmod(0o755)
    env = {**os.environ, "PATH": f"{fake}:{os.environ.get('PATH', '/usr/bin:/bin')}"}
    _, out, rc = run_collector({"space_paths": f"{tmp_path}:/nonexistent/y"}, env)
    facts = free_space.facts(free_space.parse(out))
    assert rc == 0 and facts["missing_paths"] == ["/nonexistent/y"]
    (fs,) = facts["filesystems"]
    assert fs["path"] == str(tmp_path) and fs["inodes"] is not None and fs["bytes_free_pct"] is not None


def test_the_old_single_path_parameter_still_runs_the_single_path_command() -> None:
    only_old = [a for c in free_space.COLLECTOR.commands if (a := resolve_argv(c, {"space_path": "/data"}))]
    assert only_old[0] == ("df", "-B1", "--output=size,used,avail,itotal,iused,iavail,target", "--", "/data")
    both = next(
        a for c in free_space.COLLECTOR.commands if (a := resolve_argv(c, {"space_path": "/d", "space_paths": "/m"}))
    )
    assert both[-2:] == ("/d", "/m")


def test_two_paths_on_one_filesystem_stay_two_rows() -> None:
    facts = free_space.facts(free_space.parse(RECORDED.read_text()))
    assert [f["path"] for f in facts["filesystems"]] == ["/", "/dev/shm", "/tmp"]
    assert facts["paths"]["/tmp"]["mounted_on"] == "/"


def test_engine_start_names_what_it_checked_and_what_it_could_not(tmp_path: Path) -> None:
    host = make_host(tmp_path, "was-full", {"engine-log.out": ENOSPC_LOG, "free-space.out": RECORDED.read_text()})
    verdict, path = run_on("engine-start", host)
    assert verdict["id"] == "disk-was-full" and path[-2:] == ["free-space-judge", "disk-was-full"]
    assert "the filesystems of /, /dev/shm, /tmp have room now" in verdict["summary"]
    assert "Not found on the host, so not checked: /root/.cache/huggingface, /var/lib/docker" in verdict["summary"]
    # a full model cache (composed: the recorded format, moby#37077's inode counts on the cache's filesystem)
    recorded = RECORDED.read_text().splitlines()
    assert recorded[-1].startswith("/tmp ")
    full = "\n".join([*recorded[:-1], "/models  270553174016 26341523456 82602770432 30736384 30484641 251743 /models"])
    host = make_host(tmp_path, "full", {"engine-log.out": ENOSPC_LOG, "free-space.out": full})
    verdict, _ = run_on("engine-start", host)
    assert verdict["id"] == "disk-full" and verdict["action"] == "free-disk-space"
    assert "/models is full" in verdict["summary"] and "0.82% of inodes free" in verdict["summary"]
    assert "Not found on the host: /root/.cache/huggingface, /var/lib/docker." in verdict["summary"]
    # every path missing: nothing measured, never "has room"
    gone = "nightowl-free-space: not found: /a\nnightowl-free-space: not found: /b\n"
    host = make_host(tmp_path, "gone", {"engine-log.out": ENOSPC_LOG, "free-space.out": gone})
    verdict, _ = run_on("engine-start", host)
    assert verdict["id"] == "disk-full-unmeasured" and "not found on the host: /a, /b" in verdict["summary"]
