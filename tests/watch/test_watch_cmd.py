"""`nightowl watch` as a program: real Xid lines from the corpus appended to a followed file give one
bundle per burst, through the real xid runbook on this machine, and none again after a restart.

Each wait is a watchdog (the test gives up after a while, it never asserts how long anything took).
"""

from __future__ import annotations

import http.server
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from nightowl.watch.state import read_json

ROOT = Path(__file__).resolve().parents[2]
CORPUS = ROOT / "fixtures" / "corpus" / "gpu"
NIGHTOWL = [sys.executable, "-c", "from nightowl.cli.main import main; main()"]
WATCHDOG = 120.0  # a loaded 2-core machine takes seconds to start nightowl and load the runbook


def wait_for(predicate: Callable[[], object], what: str, proc: subprocess.Popen[bytes] | None = None) -> None:
    give_up = time.monotonic() + WATCHDOG
    while not predicate():
        if proc is not None and proc.poll() is not None:
            raise AssertionError(f"nightowl watch exited {proc.returncode} while waiting for {what}")
        assert time.monotonic() < give_up, f"gave up waiting for {what}"
        time.sleep(0.1)


def corpus_lines(name: str, needle: str) -> list[str]:
    return [line for line in (CORPUS / name).read_text().splitlines() if needle in line]


class Webhook:
    """A local notify target: keeps every JSON body POSTed to it."""

    def __init__(self) -> None:
        received: list[dict[str, Any]] = []
        self.received = received

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - the http.server protocol
                received.append(json.loads(self.rfile.read(int(self.headers["Content-Length"]))))
                self.send_response(204)
                self.end_headers()

            def log_message(self, *args: object) -> None:
                return None

        self.server = http.server.HTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hook"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()


class Watch:
    def __init__(self, tmp: Path, webhook_url: str | None = None) -> None:
        self.tmp = tmp
        self.log = tmp / "kern.log"
        self.out = tmp / "bundles"
        self.state = tmp / "state"
        self.textfile = tmp / "nightowl.prom"
        self.proc: subprocess.Popen[bytes] | None = None
        self.stderr = tmp / "watch.stderr"
        self.notify = tmp / "notify.yaml"
        if webhook_url:
            self.notify.write_text(f"notify:\n  attempts: 1\n  webhook:\n    url: {webhook_url}\n")

    def start(self) -> subprocess.Popen[bytes]:
        env = {
            **os.environ,
            "HOME": str(self.tmp),
            "XDG_STATE_HOME": str(self.tmp / "xdg-state"),
            "XDG_CONFIG_HOME": str(self.tmp / "xdg-config"),
            "NODE_NAME": "gpu-watch-test",
        }
        argv = [*NIGHTOWL, "watch", "--file", str(self.log), "--out", str(self.out)]
        argv += ["--state-dir", str(self.state), "--textfile", str(self.textfile), "--debounce", "0.3"]
        argv += ["--log-format", "json", "--command-timeout", "20"]
        argv += ["--notify-config", str(self.notify)] if self.notify.exists() else []
        with self.stderr.open("ab") as err:
            self.proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=err, env=env, cwd=self.tmp)
        proc = self.proc
        wait_for(lambda: (read_json(self.state / "health.json") or {}).get("pid") == proc.pid, "the follower", proc)
        return proc

    def stop(self) -> int:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(WATCHDOG)

    def append(self, lines: list[str]) -> None:
        with self.log.open("a") as handle:
            handle.write("".join(line + "\n" for line in lines))

    def bundles(self) -> list[Path]:
        if not self.out.is_dir():
            return []
        # A bundle is complete once renamed into place (it is written as a hidden .<run_id>.partial); in the
        # order they ran (run ids start with the second only, so two in one second sort by their suffix).
        done = [p for p in self.out.iterdir() if not p.name.startswith(".") and (p / "verdicts.json").is_file()]
        return sorted(done, key=lambda p: json.loads((p / "manifest.json").read_text())["started"])

    def judged_to_end(self) -> bool:
        cursors = list(self.state.glob("file-*.json"))
        saved = read_json(cursors[0]) if cursors else None
        return bool(saved) and saved["position"].get("offset") == self.log.stat().st_size


def kernel_log_of(bundle: Path) -> str:
    return next((bundle / "hosts").glob("*/kernel-log.out")).read_text()


@pytest.fixture
def webhook() -> Iterator[Webhook]:
    hook = Webhook()
    yield hook
    hook.server.shutdown()


@pytest.fixture
def watch(tmp_path: Path, webhook: Webhook) -> Iterator[Watch]:
    watch = Watch(tmp_path, webhook.url)
    watch.log.touch()
    yield watch
    if watch.proc is not None and watch.proc.poll() is None:
        watch.proc.kill()
        watch.proc.wait()


def test_one_bundle_per_burst_of_corpus_xids_and_none_again_after_a_restart(watch: Watch, webhook: Webhook) -> None:
    fell_off = corpus_lines("xid79-after-pcie-aer-surprise-down-dmesg-gpuburn1.txt", "")
    contained = corpus_lines("xid43-xid31-xid94-contained-sm-dmesg-T-535-akash244.txt", "NVRM: Xid")
    nvswitch = corpus_lines("xid79-sxid20034-dmesg-nvswitch-gpud-readme.txt", "SXid")
    assert fell_off and contained and nvswitch

    proc = watch.start()
    watch.append(fell_off)
    wait_for(lambda: len(watch.bundles()) == 1, "the first burst's bundle", proc)
    watch.append(contained)
    wait_for(lambda: len(watch.bundles()) == 2, "the second burst's bundle", proc)
    wait_for(watch.judged_to_end, "the position saved past both bursts", proc)
    assert watch.stop() == 143

    first, second = watch.bundles()
    assert "79, GPU has fallen off the bus" in kernel_log_of(first)
    assert json.loads((first / "verdicts.json").read_text())["hosts"][0]["verdict"]["id"] == "gpu-fell-off-bus"
    assert "Contained: SM" in kernel_log_of(second) and "fallen off the bus" not in kernel_log_of(second)
    assert 'host="gpu-watch-test"' in watch.textfile.read_text()

    # A restart judges nothing it judged: the next bundle is the new line's alone.
    proc = watch.start()
    watch.append(nvswitch)
    wait_for(lambda: len(watch.bundles()) == 3, "the bundle of the line written after the restart", proc)
    third = watch.bundles()[-1]
    assert "SXid" in kernel_log_of(third)
    assert "Xid (PCI:0000:02:00): 79" not in kernel_log_of(third) and "Contained: SM" not in kernel_log_of(third)
    wait_for(watch.judged_to_end, "the position saved past the third burst", proc)
    assert watch.stop() == 143
    assert len(watch.bundles()) == 3
    logged = [json.loads(line) for line in watch.stderr.read_text().splitlines() if line.startswith("{")]
    verdicts = [line for line in logged if line.get("bundle")]
    assert len(verdicts) == 3 and all(line["node"] == "gpu-watch-test" for line in verdicts)
    # the notify target heard of each verdict (posted from a queue: the first two before the first stop)
    told = [body["capture"] for body in webhook.received]
    assert [c["run_id"] for c in told] == [b.name for b in watch.bundles()]
    # the verdict as serve's notes carry it (issue 45 item 5): an object with its GPUs and first action
    assert told[0]["verdict"]["id"] == "gpu-fell-off-bus" and told[0]["verdict"]["action"] == "reboot-node"
    assert told[0]["verdict"]["gpus"] and told[2]["triggers"] == {"sxid": len(nvswitch)}
    # from the run's Outcome, as serve's: the status update too (watch's posts lacked it), and the record itself
    assert all(body["status_update_text"].startswith("STATUS UPDATE") for body in webhook.received)
    assert [body["outcome"]["origin"] for body in webhook.received] == ["watch"] * 3
    assert webhook.received[0]["finding"][-1] == "First action: reboot-node"
    # each bundle says what started it: a watch burst, its first trigger line and when watch read it
    trigger = json.loads((watch.bundles()[0] / "manifest.json").read_text())["trigger"]
    assert trigger["origin"] == "watch" and trigger["first_seen"] > 0
    assert trigger["first_line"] and trigger["first_line"] in kernel_log_of(watch.bundles()[0])


def test_the_probe_reads_the_health_file(watch: Watch, tmp_path: Path) -> None:
    health = tmp_path / "health.json"
    probe = [*NIGHTOWL, "watch", "--probe", "--health-file", str(health)]
    assert subprocess.run(probe, capture_output=True).returncode == 1  # no file yet
    health.write_text(json.dumps({"updated": time.time(), "state": "following", "runner_alive": True}))
    assert subprocess.run(probe, capture_output=True).returncode == 0
    health.write_text(json.dumps({"updated": time.time() - 600, "state": "following", "runner_alive": True}))
    stale = subprocess.run(probe, capture_output=True, text=True)
    assert stale.returncode == 1 and "unhealthy" in stale.stderr


def test_an_xid_79_after_2100_nvrm_lines_is_judged_not_the_xid_13_before_them(watch: Watch) -> None:
    xid13 = "[ 10.0] NVRM: Xid (PCI:0000:3b:00): 13, pid=4321, name=python, Graphics SM Warp Exception"
    xid79 = "[ 12.0] NVRM: Xid (PCI:0000:3b:00): 79, pid=4321, name=python, GPU has fallen off the bus."
    context = [
        f"[ 11.{n:04d}] NVRM: GPU at PCI:0000:3b:00: GPU-6b3c8a3e-1111-2222-3333-44445555{n:04d}" for n in range(2100)
    ]
    proc = watch.start()
    watch.append([xid13, *context, xid79])  # one write: one burst
    wait_for(lambda: len(watch.bundles()) == 1, "the burst's bundle", proc)
    assert watch.stop() == 143
    (bundle,) = watch.bundles()
    assert xid79 in kernel_log_of(bundle).splitlines()
    assert json.loads((bundle / "verdicts.json").read_text())["hosts"][0]["verdict"]["id"] == "gpu-fell-off-bus"
    err = next((bundle / "hosts").glob("*/kernel-log.err")).read_text()
    assert "lines of the burst were not kept" in err and "0 trigger lines" in err


def test_lines_written_before_a_rotation_while_stopped_are_judged_after_the_restart(watch: Watch) -> None:
    judged = "[ 10.0] NVRM: Xid (PCI:0000:3b:00): 13, pid=4321, name=python, Graphics SM Warp Exception"
    unseen = "[ 20.0] NVRM: Xid (PCI:0000:3b:00): 79, pid=4321, name=python, GPU has fallen off the bus."
    after = "[ 30.0] NVRM: Xid (PCI:0000:5e:00): 48, pid=4321, name=python, DBE (double bit error)"
    proc = watch.start()
    watch.append([judged])
    wait_for(lambda: len(watch.bundles()) == 1, "the first burst's bundle", proc)
    wait_for(watch.judged_to_end, "the position saved past the first burst", proc)
    assert watch.stop() == 143
    watch.append([unseen])  # written while the watch is stopped, then rotated away (logrotate's create)
    watch.log.rename(watch.log.with_name(watch.log.name + ".1"))
    watch.append([after])
    proc = watch.start()
    wait_for(lambda: any(after in kernel_log_of(b) for b in watch.bundles()[1:]), "the new file's burst", proc)
    assert watch.stop() == 143
    later = "".join(kernel_log_of(bundle) for bundle in watch.bundles()[1:])
    assert unseen in later and after in later and judged not in later
    logged = watch.stderr.read_text()
    assert "kern.log.1 from the saved offset" in logged
