"""Issue 14 item 13: SIGTERM and SIGINT during a triage stop it at once, keep the partial bundle with its
manifest, exit 143 / 130, and `bundles --prune` keeps a partial bundle that holds evidence."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
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
    try:
        _wait_for_first_output(out, proc)
        proc.send_signal(signum)
        with watchdog(20):  # the pause is 120 s: it must not be waited out
            _stdout, stderr = proc.communicate()
    finally:
        if proc.poll() is None:
            proc.kill()
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
