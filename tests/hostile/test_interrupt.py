"""Issue 14 item 13: SIGTERM and SIGINT during a triage stop it at once, keep the partial bundle with its
manifest, exit 143 / 130, and `bundles --prune` keeps a partial bundle that holds evidence."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from click.testing import CliRunner

from nightowl.cli.bundles_cmd import prune
from nightowl.cli.main import main as cli
from tests.hostile.watchdog import watchdog

# One local collection, then a 120 s pause before the second: the signal comes during the pause.
SLOW_RUNBOOK = """\
id: slow
title: A pause between two takes of the kernel log
entry: first
nodes:
  first:
    title: Kernel log
    collect: [kernel-log]
    next: again
  again:
    title: Kernel log again, later
    wait: 120
    collect: ["kernel-log:again"]
    next: done
  done:
    title: Done
    verdict:
      id: done
      severity: info
      action: none
      summary: done
"""


# The same as a job (scope: job): its walk runs on the members together, its pause in the job's own thread.
SLOW_JOB_RUNBOOK = SLOW_RUNBOOK.replace("entry: first", "scope: job\nentry: first")


def _start(
    tmp_path: Path, text: str = SLOW_RUNBOOK, hosts: tuple[str, ...] = ("local",)
) -> tuple[subprocess.Popen[str], Path]:
    runbook = tmp_path / "slow.yaml"
    runbook.write_text(text)
    out = tmp_path / "out"
    argv = [
        sys.executable,
        "-c",
        "from nightowl.cli.main import main; main()",
        "triage",
        str(runbook),
        *[a for h in hosts for a in ("--host", h)],
        "--out",
        str(out),
    ]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    return proc, out


def _wait_for_first_output(out: Path, proc: subprocess.Popen[str]) -> None:
    with watchdog(60):
        while not list(out.glob(".*.partial/hosts/*/kernel-log.*")) and not list(out.glob(".*.partial/manifest*")):
            assert proc.poll() is None, proc.communicate()
            time.sleep(0.05)


@pytest.mark.parametrize("scope", ["host", "job"])
@pytest.mark.parametrize(("signum", "status"), [(signal.SIGTERM, 143), (signal.SIGINT, 130)])
def test_a_signal_keeps_the_partial_bundle(tmp_path: Path, signum: int, status: int, scope: str) -> None:
    if scope == "job":
        proc, out = _start(tmp_path, SLOW_JOB_RUNBOOK, ("local", "localhost"))
    else:
        proc, out = _start(tmp_path)
    with _killed_at_exit(proc):
        _wait_for_first_output(out, proc)
        proc.send_signal(signum)
        _stdout, stderr = _exit_output(proc, 20)  # the pause is 120 s: it must not be waited out
    assert proc.returncode == status, stderr
    bundles = [p for p in out.iterdir() if not p.name.startswith(".")]
    assert len(bundles) == 1, list(out.iterdir())
    manifest = json.loads((bundles[0] / "manifest.json").read_text())
    assert manifest["partial"] is True
    assert any(c["kind"] == "kernel-log" for c in manifest["commands"])
    assert "partial bundle saved" in stderr


def test_an_interrupt_ends_a_job_pause_in_any_thread(tmp_path: Path) -> None:
    """Signals reach only the main thread; a job walked elsewhere (a webhook worker) stops by the run's event."""
    import threading

    from nightowl.collectors import get_collector
    from nightowl.engine.runner import RunOptions
    from nightowl.engine.session import Interrupted, close_live_transports, run_runbook
    from nightowl.engine.validate import load_runbook
    from nightowl.transports.local import LocalTransport

    runbook = tmp_path / "slow.yaml"
    runbook.write_text(SLOW_JOB_RUNBOOK)
    loaded = load_runbook(runbook)
    outcome: list[BaseException] = []

    def walk() -> None:
        try:
            run_runbook(
                loaded,
                {h: (lambda h=h: LocalTransport(h)) for h in ("a", "b")},
                get_collector,
                RunOptions(),
                tmp_path / "out",
            )
        except BaseException as exc:  # noqa: BLE001 - the test inspects it
            outcome.append(exc)

    thread = threading.Thread(target=walk, daemon=True)
    thread.start()
    with watchdog(60):
        while not list((tmp_path / "out").glob(".*.partial/hosts/*/kernel-log.*")):
            time.sleep(0.05)
    time.sleep(0.3)  # into the 120 s pause
    close_live_transports()
    thread.join(20)  # the pause is 120 s: it must not be waited out
    assert not thread.is_alive()
    (exc,) = outcome
    assert isinstance(exc, Interrupted)
    manifest = json.loads((exc.bundle / "manifest.json").read_text())
    assert manifest["partial"] is True and any(c["kind"] == "kernel-log" for c in manifest["commands"])


def test_exit_status_help_documents_143() -> None:
    result = CliRunner().invoke(cli, ["triage", "--help"])
    assert "143" in result.output and "SIGTERM" in result.output


def test_prune_keeps_a_partial_bundle_that_holds_evidence(tmp_path: Path) -> None:
    from tests.postmortem.bundles import make_bundle

    kept = make_bundle(tmp_path, ["xid79-fallen-off-bus"], extra_manifest={"partial": True})
    gone = make_bundle(tmp_path, ["healthy-l40s"])
    unfinished = tmp_path / ".20260101T000000Z-xid-abcdef.partial"
    (unfinished / "hosts" / "gpu-01").mkdir(parents=True)
    (unfinished / "hosts" / "gpu-01" / "kernel-log.out").write_text("NVRM: Xid 79\n")
    old = time.time() - 90 * 86400
    os.utime(unfinished, (old, old))
    removed = prune(tmp_path, 86400, dry_run=False, now=time.time() + 90 * 86400)
    assert str(gone) in removed
    assert kept.exists() and unfinished.exists()


# --- issue 30 items 2-4: signals in the shared run path (nightowl/run.py) ---------------------------
# A stand-in for a hung nvidia-smi: it notes each start (pid and argv) and sleeps, in place (exec), so a
# signal sent to the noted pid reaches the sleeping process itself.
HUNG_TOOL = '#!/bin/sh\necho "$$ $*" >> "{log}"\nexec sleep 120\n'
NVIDIA_SMI_RUNBOOK = """\
id: hung
title: One nvidia-smi, which hangs
entry: gpus
nodes:
  gpus:
    collect: [nvidia-smi]
    next: done
  done:
    verdict: {id: done, severity: info, action: none, summary: done}
"""


def _hung_tool(tmp_path: Path) -> tuple[dict[str, str], Path]:
    """An environment whose PATH finds the hung nvidia-smi first, and the file it notes its starts in."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    log = tmp_path / "started.log"
    tool = bin_dir / "nvidia-smi"
    tool.write_text(HUNG_TOOL.format(log=log))
    tool.chmod(0o755)
    return {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}"}, log


def _starts(log: Path) -> list[list[str]]:
    return [line.split() for line in log.read_text().splitlines()] if log.exists() else []


def _wait_for_start(log: Path, proc: subprocess.Popen[str]) -> list[str]:
    with watchdog(60):
        while not _starts(log):
            assert proc.poll() is None, proc.communicate()
            time.sleep(0.02)
    return _starts(log)[0]


@contextmanager
def _killed_at_exit(proc: subprocess.Popen[str]) -> Iterator[subprocess.Popen[str]]:
    """``proc`` killed if it still runs when the block ends, so that a failed step leaves no process behind."""
    try:
        yield proc
    finally:
        if proc.poll() is None:
            proc.kill()


def _exit_output(proc: subprocess.Popen[str], seconds: int) -> tuple[str, str]:
    """stdout and stderr once ``proc`` has exited; the test fails if that takes more than ``seconds``."""
    with watchdog(seconds):
        return proc.communicate()


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


@pytest.mark.parametrize(
    ("first", "second", "status", "delay"),
    [
        (signal.SIGINT, signal.SIGINT, 130, 0.02),  # a double Ctrl-C
        (signal.SIGINT, signal.SIGINT, 130, 0.06),
        (signal.SIGTERM, signal.SIGTERM, 143, 0.02),  # coreutils timeout: TERM twice
        (signal.SIGTERM, signal.SIGTERM, 143, 0.1),
        (signal.SIGTERM, signal.SIGINT, 143, 0.05),
    ],
)
def test_a_second_signal_never_loses_the_bundle(
    tmp_path: Path, first: int, second: int, status: int, delay: float
) -> None:
    proc, out = _start(tmp_path)
    with _killed_at_exit(proc):
        _wait_for_first_output(out, proc)
        proc.send_signal(first)
        time.sleep(delay)  # the second comes while the first is being handled (not an assertion on time)
        if proc.poll() is None:
            proc.send_signal(second)
        _stdout, stderr = _exit_output(proc, 30)
    assert proc.returncode == status, stderr
    assert "Aborted" not in stderr
    assert not [p for p in out.iterdir() if p.name.endswith(".partial")], list(out.iterdir())
    [bundle] = [p for p in out.iterdir() if not p.name.startswith(".")]
    manifest = json.loads((bundle / "manifest.json").read_text())
    assert manifest["partial"] is True and any(c["kind"] == "kernel-log" for c in manifest["commands"])


def test_ctrl_c_while_a_command_hangs_records_it_and_starts_no_fallback(tmp_path: Path) -> None:
    env, log = _hung_tool(tmp_path)
    runbook = tmp_path / "hung.yaml"
    runbook.write_text(NVIDIA_SMI_RUNBOOK)
    out = tmp_path / "out"
    argv = [sys.executable, "-c", "from nightowl.cli.main import main; main()", "triage", str(runbook)]
    proc = subprocess.Popen(
        [*argv, "--host", "local", "--out", str(out)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    with _killed_at_exit(proc):
        pid, *args = _wait_for_start(log, proc)
        assert args == ["-q", "-x"]
        proc.send_signal(signal.SIGINT)
        _stdout, stderr = _exit_output(proc, 15)  # nvidia-smi's own timeout is 20 s: the interrupt must not wait for it
    assert proc.returncode == 130, stderr
    assert len(_starts(log)) == 1, _starts(log)  # the fallback `nvidia-smi -q` never started
    assert not _pid_alive(int(pid))
    [bundle] = [p for p in out.iterdir() if not p.name.startswith(".")]
    manifest = json.loads((bundle / "manifest.json").read_text())
    [command] = [c for c in manifest["commands"] if c["kind"] == "nvidia-smi"]
    assert command["argv"] == ["nvidia-smi", "-q", "-x"] and command["exit_code"] != 0
    assert command["duration"] > 0 and "interrupted" in command["error"]
    assert manifest["partial"] is True
    [host] = json.loads((bundle / "verdicts.json").read_text())["hosts"]
    assert host["verdict"] is None and "interrupted" in host["error"]


def _serve_config(tmp_path: Path) -> Path:
    from tests.receiver.test_serve import local_rule_config

    return local_rule_config(tmp_path, "hung", "hung.yaml", NVIDIA_SMI_RUNBOOK, "listen: 127.0.0.1:0\n")


def _post_alert(port: int) -> None:
    import urllib.request

    from tests.receiver.test_serve import payload

    body = payload("alertmanager-xid-firing.json")
    body["alerts"] = body["alerts"][:1]
    request = urllib.request.Request(f"http://127.0.0.1:{port}/alertmanager", data=json.dumps(body).encode())
    request.add_header("Authorization", "Bearer t0k3n-for-tests-only")
    with urllib.request.urlopen(request, timeout=20) as response:
        assert response.status in (200, 202)


def _listening_port(proc: subprocess.Popen[str]) -> int:
    import re

    assert proc.stderr is not None
    with watchdog(60):
        for line in proc.stderr:
            found = re.search(r"listening on http://127\.0\.0\.1:(\d+)/", line)
            if found:
                return int(found.group(1))
    raise AssertionError("serve never said where it listens")


def test_a_collector_killed_with_serve_by_systemd_leaves_the_capture_partial_and_resumed(tmp_path: Path) -> None:
    """systemd stops a unit with TERM to every process of its cgroup at once: serve and the collector."""
    from nightowl.receiver.config import load_config
    from nightowl.receiver.queue import JOURNAL, Receiver

    env, log = _hung_tool(tmp_path)
    config = _serve_config(tmp_path)
    argv = [sys.executable, "-c", "from nightowl.cli.main import main; main()", "serve", "--config", str(config)]
    proc = subprocess.Popen(
        [*argv, "--log-format", "json"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env
    )
    with _killed_at_exit(proc):
        _post_alert(_listening_port(proc))
        pid, *_args = _wait_for_start(log, proc)
        os.kill(int(pid), signal.SIGTERM)
        proc.send_signal(signal.SIGTERM)
        _exit_output(proc, 30)
    entries = [json.loads(line) for line in (tmp_path / "bundles" / JOURNAL).read_text().splitlines()]
    last = entries[-1]
    assert last["status"] == "interrupted", entries
    assert last["verdict"] is None and last["bundle"]
    manifest = json.loads((Path(last["bundle"]) / "manifest.json").read_text())
    assert manifest["partial"] is True
    [command] = [c for c in manifest["commands"] if c["kind"] == "nvidia-smi"]
    assert command["exit_code"] == -signal.SIGTERM and "signal 15" in command["error"]
    assert len(_starts(log)) == 1  # no fallback was started on the way down
    # the next receiver on the same out resumes it
    resumed: list[str] = []
    receiver = Receiver(load_config(config), run=lambda capture, _config: resumed.append(capture.id) or capture)
    receiver.start()
    receiver.stop(timeout=5)
    assert resumed == [last["id"]]


def test_a_collector_killed_by_a_signal_while_nothing_stops_is_an_ordinary_failure(tmp_path: Path) -> None:
    """The control: a command dying of a signal nightowl did not get is the host's evidence, judged as such."""
    import threading

    from nightowl.engine.context import RunContext
    from nightowl.engine.validate import load_runbook
    from nightowl.run import run_and_save
    from nightowl.transports.local import LocalTransport

    env, log = _hung_tool(tmp_path)
    os.environ["PATH"], saved = env["PATH"], os.environ["PATH"]
    runbook = tmp_path / "hung.yaml"
    runbook.write_text(NVIDIA_SMI_RUNBOOK)

    def kill_when_started() -> None:
        while not _starts(log):
            time.sleep(0.02)
        os.kill(int(_starts(log)[-1][0]), signal.SIGTERM)
        while len(_starts(log)) < 2:
            time.sleep(0.02)
        os.kill(int(_starts(log)[-1][0]), signal.SIGTERM)

    killer = threading.Thread(target=kill_when_started, daemon=True)
    killer.start()
    try:
        with watchdog(60):
            result = run_and_save(
                load_runbook(runbook),
                {"local": LocalTransport},
                tmp_path / "out",
                context=RunContext(stop=threading.Event()),
            )
    finally:
        os.environ["PATH"] = saved
    assert result.bundle is not None and result.bundle.name[0] != "."
    assert json.loads((result.bundle / "manifest.json").read_text())["partial"] is False
    assert [args for _pid, *args in _starts(log)] == [["-q", "-x"], ["-q"]]  # the fallback was tried
    assert result.runs[0].collections["nvidia-smi"].status == "error"


@pytest.mark.parametrize(("signum", "status"), [(signal.SIGTERM, 143), (signal.SIGINT, 130)])
def test_triage_alert_stops_on_a_signal_with_the_partial_bundle(tmp_path: Path, signum: int, status: int) -> None:
    from tests.receiver.test_serve import payload

    env, log = _hung_tool(tmp_path)
    alert = tmp_path / "alert.json"
    body = payload("alertmanager-xid-firing.json")
    body["alerts"] = [body["alerts"][0], {**body["alerts"][0], "fingerprint": "second"}]
    alert.write_text(json.dumps(body))
    argv = [sys.executable, "-c", "from nightowl.cli.main import main; main()", "triage", "--alert", str(alert)]
    argv += ["--config", str(_serve_config(tmp_path)), "--out", str(tmp_path / "out"), "--format", "json"]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    with _killed_at_exit(proc):
        _wait_for_start(log, proc)
        proc.send_signal(signum)
        stdout, stderr = _exit_output(proc, 30)
    assert proc.returncode == status, stderr
    [capture] = json.loads(stdout)["captures"]  # the second alert never started
    assert capture["status"] == "interrupted" and capture["bundle"]
    assert json.loads((Path(capture["bundle"]) / "manifest.json").read_text())["partial"] is True
    assert len(_starts(log)) == 1
