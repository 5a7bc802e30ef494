"""A sweep reads each host's kernel log from where the last sweep stopped (issue 46), over worker processes
as in one: the workers start from the sweeping machine's history store, the parent writes ``carried.json`` and
saves the positions with the bundle's id and sha256 once the bundle is written."""

from __future__ import annotations

import contextlib
import functools
import io
import json
from pathlib import Path
from typing import Any

import click
import pytest

from nightowl.cli.common import CommandChoices, param_values
from nightowl.cli.sweep_report import run_sweep
from nightowl.engine.incremental import CARRIED
from nightowl.fleet.workers import engine_for
from nightowl.history import cursors
from nightowl.library import runbooks
from nightowl.transports.local import LocalTransport
from tests.engine.test_cheap_forms import install_node
from tests.history.cursor_standins import Journal, install
from tests.history.test_cursor_read import BOOT, XID79

HOSTS = ["gpu-01", "gpu-02", "gpu-03"]


@pytest.fixture
def journal(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Journal:
    for name, value in install(tmp_path).items():
        monkeypatch.setenv(name, value)  # the worker processes inherit it
    log = Journal(tmp_path / "journal.json")
    log.add(*BOOT)
    return log


def sweep(tmp_path: Path, workers: int, full_read: bool = False) -> tuple[dict[str, Any], Path]:
    loaded = runbooks.load("xid")
    transports = {name: functools.partial(LocalTransport, name) for name in HOSTS}  # picklable
    values = param_values((), None)
    out = tmp_path / f"bundles-{len(list(tmp_path.glob('bundles-*')))}"
    chose = CommandChoices(history=tmp_path / "history.sqlite3", history_chosen=True)  # as `--history` would
    with contextlib.redirect_stdout(io.StringIO()) as printed, click.Context(click.Command("sweep"), obj=chose):
        run_sweep(
            loaded,
            transports,
            values,
            {"command_timeout": None, "host_timeout": None},
            fmt="json",
            textfile=None,
            log_format=None,
            out_dir=out,
            forks=4,
            engine=engine_for(loaded, transports, workers, values),
            full_read=full_read,
        )
    (bundle,) = out.iterdir()
    return json.loads(printed.getvalue()), bundle


def reads(bundle: Path) -> dict[str, str]:
    document = json.loads((bundle / CARRIED).read_text())["hosts"]
    return {host: entry["kernel-log"]["read"] for host, entry in document.items()}


@pytest.mark.parametrize("workers", [1, 2])
def test_the_second_sweep_reads_only_what_followed_and_sees_the_new_xid(
    tmp_path: Path, journal: Journal, workers: int
) -> None:
    _, first = sweep(tmp_path, workers)
    assert reads(first) == dict.fromkeys(HOSTS, "full")
    path = tmp_path / "history.sqlite3"
    saved = cursors.load(path, "gpu-02", "kernel-log")
    assert saved is not None and saved.bundle_id == first.name
    journal.add(XID79)
    report, second = sweep(tmp_path, workers)
    assert reads(second) == dict.fromkeys(HOSTS, "incremental")
    assert [host["verdict"]["id"] for host in report["hosts"]] == ["gpu-fell-off-bus"] * len(HOSTS)
    for host in HOSTS:
        assert (second / "hosts" / host / "kernel-log.out").read_text().count("\n") == 3  # last entry, new, cursor
    _, forced = sweep(tmp_path, workers, full_read=True)
    assert reads(forced) == dict.fromkeys(HOSTS, "full")


def test_full_every_reaches_the_workers_and_reads_nvidia_smi_whole_once_the_last_full_read_is_older(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`--full-every` (hours) over worker processes: a second sweep reads nvidia-smi cheap, one with 0 whole."""
    node = install_node(tmp_path, monkeypatch)
    loaded = runbooks.load("node-health")
    transports = {name: functools.partial(LocalTransport, name) for name in HOSTS[:2]}
    values = param_values((), None)

    def read_of(full_every: float) -> list[tuple[str, str | None]]:
        out = node / f"bundles-{len(list(node.glob('bundles-*')))}"
        chose = CommandChoices(history=node / "history.sqlite3", history_chosen=True)
        with contextlib.redirect_stdout(io.StringIO()), click.Context(click.Command("sweep"), obj=chose):
            run_sweep(
                loaded, transports, values, {"command_timeout": None, "host_timeout": None}, fmt="json",
                textfile=None, log_format=None, out_dir=out, forks=2,
                engine=engine_for(loaded, transports, 2, values), full_every=full_every,
            )  # fmt: skip
        (bundle,) = out.iterdir()
        hosts = json.loads((bundle / CARRIED).read_text())["hosts"]
        return [(hosts[h]["nvidia-smi"]["read"], hosts[h]["nvidia-smi"]["why_full"]) for h in HOSTS[:2]]

    assert [read for read, _ in read_of(24.0)] == ["full", "full"]
    assert read_of(24.0) == [("cheap", None), ("cheap", None)]
    assert all(read == "full" and "--full-every 0 h" in str(why) for read, why in read_of(0.0))
