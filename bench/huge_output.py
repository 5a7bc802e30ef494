"""A huge output under a short host deadline, end to end (issue 42 item 12).

Builds a recorded host whose kernel log is ``--mb`` megabytes of NVRM lines followed by a real Xid 13
(fixtures/hosts/xid13-app-fault), then times ``nightowl triage xid --replay HOST --host-timeout 5`` from
start to exit: the run, the bundle, the history record and both postmortem drafts. ``--load N`` starts N
busy processes beside it (a saturated node's worst case). It prints the wall time, the run's own time
(the manifest's started to finished) and the verdict.

    .venv/bin/python bench/huge_output.py [--mb 90] [--load 0] [--host-timeout 5]
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SOURCE = ROOT / "fixtures" / "hosts" / "xid13-app-fault"


def _busy() -> None:
    while True:
        pass


def build_host(folder: Path, megabytes: int) -> Path:
    host = folder / "huge-host"
    shutil.copytree(SOURCE, host)
    real = (SOURCE / "kernel-log.out").read_text()
    line = "[{:12.6f}] NVRM: GPU at PCI:0000:{:02x}:00: GPU-{:08x} usb 1-1: new USB device number {} using xhci\n"
    with (host / "kernel-log.out").open("w") as out:
        written, n = 0, 0
        while written < megabytes << 20:
            text = line.format(n / 10, n % 256, n, n)
            out.write(text)
            written, n = written + len(text), n + 1
        out.write(real)
    return host


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--mb", type=int, default=90)
    parser.add_argument("--load", type=int, default=0, help="busy processes beside the run")
    parser.add_argument("--host-timeout", type=float, default=5.0)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        host = build_host(Path(tmp), args.mb)
        busy = [multiprocessing.Process(target=_busy, daemon=True) for _ in range(args.load)]
        for process in busy:
            process.start()
        try:
            started = time.monotonic()
            argv = [sys.executable, "-m", "nightowl.cli.main", "triage", "xid", "--replay", str(host)]
            argv += ["--host-timeout", str(args.host_timeout), "--out", str(Path(tmp) / "out"), "--format", "json"]
            done = subprocess.run(argv, capture_output=True, text=True, check=False)
            wall = time.monotonic() - started
        finally:
            for process in busy:
                process.terminate()
        bundle = next((Path(tmp) / "out").iterdir())
        manifest = json.loads((bundle / "manifest.json").read_text())
        verdicts = json.loads((bundle / "verdicts.json").read_text())
        verdict = (verdicts["hosts"][0].get("verdict") or {}).get("id") or verdicts["hosts"][0].get("status")
        print(
            f"{args.mb} MB kernel log, --host-timeout {args.host_timeout:g}, load {args.load}: "
            f"wall {wall:.1f} s, run {manifest['finished'] - manifest['started']:.1f} s, "
            f"postmortem.html {(bundle / 'postmortem.html').stat().st_size / 1e6:.1f} MB, verdict {verdict}, "
            f"exit {done.returncode}"
        )


if __name__ == "__main__":
    main()
