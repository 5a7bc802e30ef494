"""`check` and `sweep` share one plain run (`run_sweep`): check hands it this node only, with no SSH
settings and no click command in between; the run itself needs no click context."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from nightowl.cli import check_cmd
from nightowl.cli.common import param_values
from nightowl.cli.exit import ExitStatus
from nightowl.cli.main import main as cli
from nightowl.cli.sweep_cmd import sweep
from nightowl.cli.sweep_report import run_sweep
from nightowl.library import runbooks
from nightowl.paths import data_dir
from nightowl.transports.local import LocalTransport
from nightowl.transports.replay import ReplayTransport

XID79 = data_dir("fixtures") / "hosts" / "xid79-fallen-off-bus"


def test_check_runs_this_node_alone_without_ssh_or_the_sweep_command(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[tuple[tuple[Any, ...], dict[str, Any]]] = []

    def fake_run_sweep(*args: Any, **kwargs: Any) -> ExitStatus:
        calls.append((args, kwargs))
        return ExitStatus.NO_VERDICT

    def no_sweep(**_: Any) -> None:
        raise AssertionError("check went through the sweep command")

    monkeypatch.setenv("NODE_NAME", "gpu-17")
    monkeypatch.setattr(check_cmd, "run_sweep", fake_run_sweep)
    monkeypatch.setattr(sweep, "callback", no_sweep)
    argv = ["check", "--param", "a=1", "--since", "-2h", "--command-timeout", "5", "--format", "json"]
    argv += ["--textfile", str(tmp_path / "n.prom"), "--out", str(tmp_path / "b"), "--log-format", "text"]
    result = CliRunner().invoke(cli, argv)

    assert result.exit_code == int(ExitStatus.NO_VERDICT), result.output
    ((loaded, transports, params, limits), kwargs) = calls[0]
    assert loaded.runbook.id == "node-health"
    assert list(transports) == ["gpu-17"] and isinstance(transports["gpu-17"](), LocalTransport)
    assert params == {"a": "1", "since": "-2h"}
    assert limits == {"command_timeout": 5.0, "host_timeout": None}
    assert kwargs == {
        "fmt": "json",
        "textfile": tmp_path / "n.prom",
        "log_format": "text",
        "out_dir": tmp_path / "b",
        "forks": 1,
        "full_read": False,  # the kernel log from the saved cursor on (docs/reference.md#incremental-reads)
        "full_every": 24.0,  # hours a host's cheap nvidia-smi read may rest on its last full read
    }  # no dialer, never invasive


def test_run_sweep_is_a_plain_function(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    textfile = tmp_path / "n.prom"
    status = run_sweep(
        runbooks.load("node-health"),
        {"gpu-17": lambda: ReplayTransport(XID79, "gpu-17")},
        param_values((), None),
        {"command_timeout": None, "host_timeout": None},
        fmt="json",
        textfile=textfile,
        log_format="json",
        out_dir=tmp_path / "b",
        forks=1,
    )
    assert status == ExitStatus.ACTION_NEEDED
    out, err = capsys.readouterr()
    (host,) = json.loads(out)["hosts"]
    assert (host["host"], host["verdict"]["id"]) == ("gpu-17", "gpu-fell-off-bus")
    assert json.loads(err)["node"] == "gpu-17"  # check's log line
    assert 'host="gpu-17"' in textfile.read_text()


def test_param_values_since_wins() -> None:
    assert param_values(("since=yesterday", "gpu=0"), "-1h") == {"since": "-1h", "gpu": "0"}
    assert param_values(("since=yesterday",), None) == {"since": "yesterday"}
