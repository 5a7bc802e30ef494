"""`nightowl sweep --workers N`: a recorded fleet spread over worker processes gives what one process gives.

Every host is a real recording replayed (fixtures/hosts/*/SOURCE.md names each source): healthy L40S
nodes, a GPU fallen off the bus (Xid 79), a hung nvidia-smi, a remapping pending, and a host recorded
unreachable. The report (json, table, prometheus), the textfile, the exit status and every bundle file
are compared byte for byte between `--workers 1` and `--workers 2`/`3`, after normalising only what
already differs between two `--workers 1` runs: the run id (a UTC time and 6 random hex digits, so also
the bundle's folder), the times and durations measured on this machine (``start``, ``started``,
``finished``, ``duration``, the table's SECONDS column, the textfile's duration and timestamp series, a
timed-out command's ``<kind>.timeout`` seconds over SSH), the
digests of the documents that hold those times or the bundle's path (``verdicts.json``, ``trace.json``,
``manifest.json``, ``status-update.md`` with its minute), and
the order of the manifest's commands (hosts run side by side append theirs as they end; compared sorted).
"""

from __future__ import annotations

import functools
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from nightowl.cli.exit import ExitStatus
from nightowl.cli.sweep_cmd import param_values, run_sweep
from nightowl.fleet.workers import KILL_ENV, WorkerEngine, default_workers, engine_for, split
from nightowl.library import runbooks
from nightowl.paths import data_dir
from nightowl.transports.base import Unreachable
from nightowl.transports.replay import ReplayTransport

HOSTS = data_dir("fixtures") / "hosts"
FLEET = {
    "gpu-01": HOSTS / "healthy-l40s",
    "gpu-02": HOSTS / "xid79-fallen-off-bus",
    "gpu-03": HOSTS / "nvidia-smi-hung",
    "gpu-04": None,  # recorded unreachable
    "gpu-05": HOSTS / "remap-pending-a100",
}
HEALTHY = dict.fromkeys([f"ok-{i}" for i in range(1, 7)], HOSTS / "healthy-l40s")
TIME_KEYS = re.compile(r'"(start|started|finished|duration)": -?[0-9][0-9.e+-]*')


def openers(fleet: dict[str, Path | None]) -> dict[str, Any]:
    """Picklable openers (a worker process opens its own transports)."""
    return {
        name: functools.partial(ReplayTransport, d, name)
        if d is not None
        else functools.partial(Unreachable, name, "connection refused", True)
        for name, d in fleet.items()
    }


def sweep(
    tmp_path: Path, fleet: dict[str, Path | None], workers: int, fmt: str, forks: int = 4
) -> tuple[ExitStatus, str, Path]:
    """One sweep into its own folder: (exit status, report, bundle folder); the textfile beside it."""
    out = tmp_path / f"w{workers}-{fmt}-{len(list(tmp_path.iterdir()))}"
    loaded = runbooks.load("node-health")
    transports = openers(fleet)
    values = param_values((), None)
    engine = engine_for(loaded, transports, workers, values)
    assert (engine is None) == (workers == 1)
    capture = _Capture()
    with capture:
        status = run_sweep(
            loaded,
            transports,
            values,
            {"command_timeout": None, "host_timeout": None},
            fmt=fmt,
            textfile=out / "nightowl.prom",
            log_format=None,
            out_dir=out / "bundles",
            forks=forks,
            engine=engine,
        )
    (bundle,) = (out / "bundles").iterdir()
    return status, capture.text, bundle


class _Capture:
    """stdout of one sweep (click.echo writes to sys.stdout)."""

    def __enter__(self) -> _Capture:
        import contextlib
        import io

        self._buffer = io.StringIO()
        self._redirect = contextlib.redirect_stdout(self._buffer)
        self._redirect.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self._redirect.__exit__(*exc)
        self.text = self._buffer.getvalue()


def normalised(text: str, bundle: Path) -> str:
    """``text`` with only what differs between two one-process runs replaced (see the module's docstring)."""
    text = text.replace(str(bundle.parent), "OUT").replace(bundle.name, "RUN_ID")
    text = TIME_KEYS.sub(r'"\1": 0', text)
    text = re.sub(r"^(nightowl_sweep_(?:duration|timestamp)_seconds\{.*\}) \S+$", r"\1 0", text, flags=re.M)
    return text


def normalised_table(text: str, bundle: Path) -> str:
    """The table's SECONDS column (last cell of each host row) as 0."""
    lines = normalised(text, bundle).splitlines()
    return "\n".join(re.sub(r"\s+\d+\.\d$", " 0", line) for line in lines)


def bundle_files(bundle: Path, names: list[str]) -> dict[str, bytes | str]:
    """Every file of the bundle by path: raw outputs as bytes, the JSON documents normalised."""
    order = {name: i for i, name in enumerate(names)}
    files: dict[str, bytes | str] = {}
    for path in sorted(p for p in bundle.rglob("*") if p.is_file()):
        rel = path.relative_to(bundle).as_posix()
        if rel == "manifest.sha256":
            files[rel] = "digest of manifest.json"  # that document holds the times: checked below
            continue
        if rel == "sweep.html":  # the fleet page names the bundle it was written into
            files[rel] = normalised(path.read_text(), bundle)
            continue
        if rel == "status-update.md":  # says when (to the minute) and where the bundle is
            files[rel] = re.sub(r"(\d{4}-\d\d-\d\d )?\d\d:\d\d UTC", "WHEN", normalised(path.read_text(), bundle))
            continue
        if rel.endswith(".timeout"):  # how long the timed-out command ran, measured
            files[rel] = re.sub(r"^\d+\.\d+\n$", "SECONDS", path.read_text())
            continue
        if not rel.endswith(".json"):
            files[rel] = path.read_bytes()
            continue
        doc = json.loads(normalised(path.read_text(), bundle))
        if rel == "carried.json":  # when a host's full nvidia-smi read was taken (nvidia_smi/cheap.py)
            text = re.sub(r'"full_at": [0-9.e+]+', '"full_at": "WHEN"', json.dumps(doc, sort_keys=True))
            files[rel] = text
            continue
        if rel == "outcome.json":  # names the manifest's sha256, which holds the times: checked below
            doc["sha256"] = "digest of manifest.json"
        if rel == "manifest.json":
            doc["commands"].sort(key=lambda c: (order[c["host"]], c["kind"], c["argv"]))
            for entry in doc["files"]:
                if entry["path"] in ("verdicts.json", "trace.json", "status-update.md", "carried.json") or entry[
                    "path"
                ].endswith(".timeout"):
                    entry["sha256"] = entry["bytes"] = "timed"
        files[rel] = json.dumps(doc, sort_keys=True)
    return files


def assert_manifest_digests_hold(bundle: Path) -> None:
    """Each bundle is whole on its own: manifest.sha256 and every listed file's digest match the disk."""
    import hashlib

    digest = hashlib.sha256((bundle / "manifest.json").read_bytes()).hexdigest()
    assert (bundle / "manifest.sha256").read_text() == f"{digest}  manifest.json\n"
    manifest = json.loads((bundle / "manifest.json").read_text())
    for entry in manifest["files"]:
        assert hashlib.sha256((bundle / entry["path"]).read_bytes()).hexdigest() == entry["sha256"], entry["path"]


def test_workers_default_to_the_cores_and_one_per_16_hosts(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1, 2, 3})
    assert default_workers() == 4
    assert [default_workers(n) for n in (0, 1, 15, 16, 31, 32, 47, 48, 64, 1000)] == [1, 1, 1, 1, 1, 2, 2, 3, 4, 4]


def test_forks_are_shared_and_workers_default_to_the_cores() -> None:
    assert split(8, 2) == [4, 4] and split(9, 2) == [5, 4] and split(1, 3) == [1, 1, 1]
    assert sum(split(64, 3)) == 64
    assert default_workers() == len(os.sched_getaffinity(0))
    loaded = runbooks.load("node-health")
    assert engine_for(loaded, openers(FLEET), 1, {}) is None
    assert engine_for(loaded, openers({"one": HOSTS / "healthy-l40s"}), 4, {}) is None  # one host: in-process
    lambdas = {name: (lambda d=d, n=name: ReplayTransport(d, n)) for name, d in HEALTHY.items()}
    assert engine_for(loaded, lambdas, 2, {}) is None  # a worker could not be sent them: in-process
    engine = engine_for(loaded, openers(FLEET), 2, {})
    assert isinstance(engine, WorkerEngine)
    options = SimpleNamespace(allow_invasive=False, command_timeout=None, host_timeout=None)
    writer = SimpleNamespace(tmp_path=Path("/nonexistent"), run_id="r")
    jobs = engine._jobs(loaded, openers(FLEET), options, writer, 32, 2, True)
    assert [j.settings.forks for j in jobs] == [16, 16]  # --forks is the total across workers
    assert [list(j.openers) for j in jobs] == [["gpu-01", "gpu-03", "gpu-05"], ["gpu-02", "gpu-04"]]
    assert [j.settings.forks for j in engine._jobs(loaded, openers(FLEET), options, writer, 2, 3, True)] == [1, 1]


@pytest.mark.parametrize(("workers", "fmt"), [(2, "json"), (2, "table"), (2, "prometheus"), (3, "json")])
def test_report_textfile_exit_status_and_bundle_are_what_one_process_gives(
    tmp_path: Path, workers: int, fmt: str
) -> None:
    names = list(FLEET)
    one_status, one_report, one_bundle = sweep(tmp_path, FLEET, 1, fmt)
    many_status, many_report, many_bundle = sweep(tmp_path, FLEET, workers, fmt)
    assert one_status == many_status == ExitStatus.ACTION_NEEDED
    norm = normalised_table if fmt == "table" else normalised
    assert norm(many_report, many_bundle) == norm(one_report, one_bundle), fmt
    one_textfile = (one_bundle.parent.parent / "nightowl.prom").read_text()
    many_textfile = (many_bundle.parent.parent / "nightowl.prom").read_text()
    assert normalised(many_textfile, many_bundle) == normalised(one_textfile, one_bundle)
    assert bundle_files(many_bundle, names) == bundle_files(one_bundle, names)
    assert_manifest_digests_hold(many_bundle)
    if fmt != "json":
        return
    report = json.loads(many_report)
    assert [h["host"] for h in report["hosts"]] == names  # inventory order
    verdicts = {h["host"]: (h["verdict"] or {}).get("id") for h in report["hosts"]}
    assert verdicts["gpu-01"] == "healthy" and verdicts["gpu-02"] == "gpu-fell-off-bus"
    assert verdicts["gpu-04"] is None and report["hosts"][3]["status"] == "unreachable"


def test_normalising_hides_no_difference_in_verdicts(tmp_path: Path) -> None:
    """The comparison can fail: a fleet with one host changed is told apart after normalising."""
    changed = {**FLEET, "gpu-01": HOSTS / "xid79-fallen-off-bus"}
    _, one_report, one_bundle = sweep(tmp_path, FLEET, 1, "json")
    _, many_report, many_bundle = sweep(tmp_path, changed, 2, "json")
    assert normalised(many_report, many_bundle) != normalised(one_report, one_bundle)
    assert bundle_files(many_bundle, list(FLEET)) != bundle_files(one_bundle, list(FLEET))


def test_a_killed_worker_leaves_its_unfinished_hosts_cannot_judge_and_keeps_what_it_finished(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    names = list(HEALTHY)
    monkeypatch.setenv(KILL_ENV, "2:2")  # worker 2 (ok-2, ok-4, ok-6) dies as it opens its 2nd host
    status, report_text, bundle = sweep(tmp_path, HEALTHY, 2, "json", forks=2)  # one host at a time each
    assert status == ExitStatus.NO_VERDICT
    hosts = {h["host"]: h for h in json.loads(report_text)["hosts"]}
    assert list(hosts) == names
    for name in ("ok-1", "ok-3", "ok-5", "ok-2"):  # worker 1's, and the one worker 2 finished
        assert hosts[name]["status"] == "ok" and hosts[name]["verdict"]["id"] == "healthy", hosts[name]
        assert (bundle / "hosts" / name / "nvidia-smi.out").is_file()
    for name in ("ok-4", "ok-6"):
        assert hosts[name]["verdict"] is None and hosts[name]["status"] == "incomplete"
        assert re.fullmatch(
            rf"cannot judge: worker process 2 \(pid \d+\) exited with signal {int(signal.SIGKILL)} "
            "before judging this host",
            hosts[name]["error"],
        ), hosts[name]["error"]
    manifest = json.loads((bundle / "manifest.json").read_text())
    assert {c["host"] for c in manifest["commands"]} == {"ok-1", "ok-2", "ok-3", "ok-5"}
    assert manifest["partial"] is False  # the sweep ran to its end; two hosts got no verdict, as said
    verdicts = json.loads((bundle / "verdicts.json").read_text())
    assert [h["status"] for h in verdicts["hosts"]] == ["ok", "ok", "ok", "incomplete", "ok", "incomplete"]
    assert_manifest_digests_hold(bundle)


class SlowReplay(ReplayTransport):
    """A recorded host whose every command hangs until the transport is closed (an interrupt closes it)."""

    def __init__(self, directory: Path, host: str) -> None:
        super().__init__(directory, host)
        self._closed = threading.Event()

    def run(self, argv: Any, timeout: float, kind: str | None = None) -> Any:
        self._closed.wait(120)
        return super().run(argv, timeout, kind)

    def close(self) -> None:
        self._closed.set()
        super().close()


def terminated_sweep(out: str, workers: int) -> None:
    """Run in a child process by the SIGTERM test: four quick hosts and one that hangs."""
    from nightowl.cli.running import exit_now

    transports = openers(dict.fromkeys(["ok-1", "ok-2", "ok-3", "ok-4"], HOSTS / "healthy-l40s"))
    transports["slow"] = functools.partial(SlowReplay, HOSTS / "healthy-l40s", "slow")
    loaded = runbooks.load("node-health")
    values = param_values((), None)
    status = run_sweep(
        loaded,
        transports,
        values,
        {"command_timeout": None, "host_timeout": None},
        fmt="json",
        textfile=None,
        log_format=None,
        out_dir=Path(out),
        forks=4,
        engine=engine_for(loaded, transports, workers, values),
    )
    exit_now(status)


@pytest.mark.parametrize("workers", [1, 2])
def test_sigterm_stops_the_workers_and_saves_what_they_finished_as_one_process_does(
    tmp_path: Path, workers: int
) -> None:
    root = Path(__file__).resolve().parents[2]
    env = {**os.environ, "PYTHONPATH": str(root)}
    code = f"from tests.fleet.test_sweep_workers import terminated_sweep as t; t({str(tmp_path)!r}, {workers})"
    child = subprocess.Popen([sys.executable, "-c", code], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    quick = ["ok-1", "ok-2", "ok-3", "ok-4"]
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:  # the quick hosts' outputs are written, the slow host hangs
        written = list(tmp_path.glob(".*.partial/hosts/*/kernel-log.out"))
        if {p.parent.name for p in written} >= set(quick):
            break
        time.sleep(0.2)
    time.sleep(2)  # their verdicts reach the parent
    child.send_signal(signal.SIGTERM)
    stdout, stderr = child.communicate(timeout=60)
    assert child.returncode == ExitStatus.TERMINATED, stderr
    assert b"terminated; partial bundle saved at" in stderr
    (bundle,) = [p for p in tmp_path.iterdir() if not p.name.startswith(".")]
    assert json.loads((bundle / "manifest.json").read_text())["partial"] is True
    hosts = {h["host"]: h for h in json.loads((bundle / "verdicts.json").read_text())["hosts"]}
    for name in quick:
        assert hosts[name]["verdict"]["id"] == "healthy", hosts[name]
    assert hosts["slow"]["verdict"] is None and hosts["slow"]["error"].startswith("interrupted before a verdict")
    assert list(hosts) == [*quick, "slow"]
    assert not list(tmp_path.glob(".*")), "nothing half written left behind"


@pytest.fixture(scope="module")
def ssh_fleet(tmp_path_factory: pytest.TempPathFactory) -> Any:
    from tests.ssh.fleet import SSHD, Fault, Fleet

    if not SSHD.exists():
        pytest.skip(f"{SSHD} is not installed (Debian package openssh-server)")
    hosts: dict[str, Any] = {f"gpu-{n:02d}": HOSTS / "healthy-l40s" for n in range(1, 5)}
    hosts.update({"xid79": HOSTS / "xid79-fallen-off-bus", "nvsmi-hung": HOSTS / "nvidia-smi-hung"})
    hosts["refused"] = Fault.REFUSED
    with Fleet(tmp_path_factory.mktemp("ssh-fleet"), hosts) as running:
        yield running


@pytest.mark.integration
def test_workers_over_real_openssh_servers_give_what_one_process_gives(
    ssh_fleet: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from click.testing import CliRunner

    from nightowl.cli.main import main

    home = tmp_path / "home"  # no test reads the developer's ~/.ssh or agent
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("SSH_AUTH_SOCK", raising=False)
    names = ["gpu-01", "xid79", "gpu-02", "refused", "gpu-03", "nvsmi-hung", "gpu-04"]
    inventory = ssh_fleet.write_inventory(tmp_path / "hosts.yaml", names)
    fleet_args = ["--known-hosts", str(ssh_fleet.known_hosts), "--ssh-config", str(ssh_fleet.ssh_config)]
    fleet_args += ["--identity", str(ssh_fleet.client_key), "--connect-timeout", "3", "--command-timeout", "5"]
    reports = {}
    for workers in (1, 2):
        out = tmp_path / f"w{workers}"
        # a store each: a second sweep in the same store reads only what followed the first (issue 46)
        monkeypatch.setenv("NIGHTOWL_HISTORY", str(tmp_path / f"history-{workers}.sqlite3"))
        args = ["sweep", "--inventory", str(inventory), *fleet_args, "--format", "json", "--out", str(out)]
        result = CliRunner().invoke(main, [*args, "--workers", str(workers)], catch_exceptions=False)
        assert result.exit_code == ExitStatus.ACTION_NEEDED, result.output
        (bundle,) = out.iterdir()
        reports[workers] = (normalised(result.output, bundle), bundle_files(bundle, names))
        assert_manifest_digests_hold(bundle)
    assert reports[2] == reports[1]
    report = json.loads(reports[2][0])
    verdicts = {h["host"]: (h["status"], (h["verdict"] or {}).get("id")) for h in report["hosts"]}
    assert list(verdicts) == names
    assert verdicts["xid79"] == ("ok", "gpu-fell-off-bus") and verdicts["gpu-04"] == ("ok", "healthy")
    assert verdicts["refused"] == ("unreachable", None) and verdicts["nvsmi-hung"][1] == "nvidia-smi-hung"


def test_progress_is_told_per_host_as_the_workers_report_them(tmp_path: Path) -> None:
    from nightowl.run import RunHooks, RunSettings, run_and_save

    loaded = runbooks.load("node-health")
    seen: list[str] = []
    result = run_and_save(
        loaded,
        openers(FLEET),
        tmp_path,
        settings=RunSettings(forks=4, drafts=False, history=False),
        hooks=RunHooks(
            on_host_done=lambda run: seen.append(run.host), engine=engine_for(loaded, openers(FLEET), 2, {})
        ),
    )
    assert sorted(seen) == sorted(FLEET)  # each host once, in the order they ended
    assert [h["host"] for h in result.hosts] == list(FLEET)  # the result itself in inventory order
    assert result.bundle is not None and (result.bundle / "verdicts.json").is_file()


def test_what_a_worker_parsed_of_a_scrubbed_output_reaches_the_parents_history_and_bundle(tmp_path: Path) -> None:
    """Parse once across processes: the worker's parse of an output it stored scrubbed (a secret inside a
    judged line) is the one the parent records in the history and keeps in the bundle's ``parsed/``."""
    from nightowl import history
    from nightowl.engine.context import RunContext
    from nightowl.history import store
    from nightowl.run import RunHooks, RunSettings, run_and_save
    from tests.engine.test_parse_once import LINE, SAW, SECRET

    host = tmp_path / "recorded"
    host.mkdir()
    (host / "kernel-log.out").write_text(LINE)
    fleet = {"gpu-01": HOSTS / "healthy-l40s", "gpu-02": host}
    loaded = runbooks.load("xid")
    engine = engine_for(loaded, openers(fleet), 2, {})
    assert isinstance(engine, WorkerEngine)
    db = tmp_path / "history.sqlite3"
    result = run_and_save(
        loaded,
        openers(fleet),
        tmp_path / "out",
        settings=RunSettings(forks=2, status_update=False),
        hooks=RunHooks(engine=engine),
        context=RunContext(history=db, readers=history.readers(db)),
    )
    assert result.bundle is not None and result.hosts[1]["verdict"]["id"] == "recovery-node-reboot"
    rows = store.read(db, "SELECT code, text FROM events WHERE host = ?", ("gpu-02",))
    assert [(row["code"], row["text"]) for row in rows] == [(154, SAW)]
    kept = result.bundle / "parsed" / "hosts" / "gpu-02" / "kernel-log.out.json"
    assert kept.is_file() and SECRET not in kept.read_text()
