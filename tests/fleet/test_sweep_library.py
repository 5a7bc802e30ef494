"""A sweep is a library call (nightowl/fleet/sweep.py): a Python caller gets a SweepResult without the CLI,
with the fleet's view the CLI prints, the textfile, and what could not be written; refusals are raised, not
exits; and the CLI's JSON is the result's summary as it is."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from nightowl.fleet.sweep import SweepResult, sweep
from nightowl.library import runbooks
from nightowl.paths import data_dir
from nightowl.run import RunRefused
from nightowl.transports.replay import ReplayTransport

HOSTS = data_dir("fixtures") / "hosts"
XID79 = HOSTS / "xid79-fallen-off-bus"
HEALTHY = HOSTS / "healthy-l40s"


def replays(**hosts: Path) -> dict[str, object]:
    return {name: (lambda n=name, d=folder: ReplayTransport(d, n)) for name, folder in hosts.items()}


def test_a_sweep_returns_its_result_with_the_fleet_view_and_the_textfile(tmp_path: Path) -> None:
    done: list[str] = []
    textfile = tmp_path / "n.prom"
    result = sweep(
        runbooks.load("node-health"),
        replays(**{"gpu-17": XID79, "gpu-18": HEALTHY}),
        tmp_path / "out",
        textfile=textfile,
        on_host_done=lambda run: done.append(run.host),
    )
    assert isinstance(result, SweepResult)
    verdicts = {host["host"]: (host["verdict"] or {}).get("id") for host in result.hosts}
    assert verdicts["gpu-17"] == "gpu-fell-off-bus"
    assert verdicts["gpu-18"] != "gpu-fell-off-bus"
    assert result.needs_action and result.problems == ()
    assert {"fleet", "domains"} <= set(result.summary) and sorted(done) == ["gpu-17", "gpu-18"]
    assert Path(result.summary["bundle"]).is_dir() and result.run.bundle == Path(result.summary["bundle"])
    assert 'host="gpu-17"' in textfile.read_text()


def test_a_textfile_that_cannot_be_written_is_a_problem_not_an_exception(tmp_path: Path) -> None:
    blocked = tmp_path / "a-file"
    blocked.write_text("")
    result = sweep(
        runbooks.load("node-health"), replays(**{"gpu-18": HEALTHY}), tmp_path / "out", textfile=blocked / "n.prom"
    )
    assert len(result.problems) == 1 and result.problems[0].startswith(f"cannot write the textfile {blocked}")
    assert result.hosts[0]["host"] == "gpu-18"  # the run itself stands


def test_a_refused_parameter_is_raised_to_a_python_caller(tmp_path: Path) -> None:
    with pytest.raises(RunRefused):
        sweep(
            runbooks.load("node-health"),
            replays(**{"gpu-17": XID79}),
            tmp_path / "out",
            params={"expected_gpus": "many"},
        )


def test_the_cli_prints_the_result_the_library_returns(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`sweep` and `check` render the summary a Python caller gets (its timings and bundle aside)."""
    from nightowl.cli.exit import ExitStatus
    from nightowl.cli.sweep_report import run_sweep

    loaded = runbooks.load("node-health")
    hosts = {"gpu-17": XID79, "gpu-18": HEALTHY}
    limits: dict[str, float | None] = {"command_timeout": None, "host_timeout": None}
    status = run_sweep(
        loaded,
        replays(**hosts),
        {},
        limits,
        fmt="json",
        textfile=None,
        log_format=None,
        out_dir=tmp_path / "cli",
        forks=2,
    )
    printed = json.loads(capsys.readouterr().out)
    returned = sweep(loaded, replays(**hosts), tmp_path / "lib").summary

    def judged(summary: dict[str, Any]) -> list[tuple[Any, ...]]:
        return [(h["host"], h["status"], (h["verdict"] or {}).get("id"), h["path"]) for h in summary["hosts"]]

    assert status == ExitStatus.ACTION_NEEDED
    assert judged(printed) == judged(returned) and set(printed) == set(returned)
    assert printed["fleet"] == returned["fleet"] and printed["domains"] == returned["domains"]


def test_the_library_sweep_needs_no_click() -> None:
    code = (
        "import sys, tempfile, pathlib\n"
        "from nightowl.fleet.sweep import sweep\n"
        "from nightowl.library import runbooks\n"
        "from nightowl.transports.replay import ReplayTransport\n"
        f"r = sweep(runbooks.load('node-health'), {{'gpu-17': lambda: ReplayTransport(pathlib.Path({str(XID79)!r}), "
        "'gpu-17')}, pathlib.Path(tempfile.mkdtemp()))\n"
        "cli = sorted(m for m in sys.modules if m == 'click' or m.startswith('nightowl.cli'))\n"
        "print(r.hosts[0]['verdict']['id'], cli)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.stdout.split(None, 1) == ["gpu-fell-off-bus", "[]\n"], done.stderr
