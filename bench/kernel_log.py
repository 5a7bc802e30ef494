"""Benchmark: the kernel-log parser against a bare regex pass over the same large log.

Builds a kernel log of ``--size-mb`` (default 200 MB) by cycling the kernel-log lines of the
corpus (fixtures/corpus/gpu: dmesg, syslog, journald, Talos, dmesg -T, bare NVRM lines) in a
temporary directory, then times in one run:

- baseline: one per-line ``re.search`` for Xid lines (what a grep-style checker does);
- nightowl: ``kernel_log.parse_lines`` over the same file (every event kind, bursts collapsed).

Both passes get the same I/O: ``timed_pass`` opens the file the same way for each (text mode, UTF-8,
errors="replace", default buffering) and iterates it line by line, and the clock runs from open to
close on both sides. The file is synced to disk and read once before timing, so neither pass pays
for the writing, and the passes alternate ``--repeat`` times (default 3); the best time of each side
is compared (the run-to-run spread of a shared machine is printed too).

It prints both times, their ratio and the parser's peak memory (ru_maxrss of a child process that
only parses, next to the ru_maxrss of the same child that only imports). Targets: ratio <= 3x,
peak < 100 MB.

Usage: .venv/bin/python bench/kernel_log.py [--size-mb 200] [--repeat 3] [--filler 0]
"""

from __future__ import annotations

import argparse
import gc
import os
import re
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

ROOT = Path(__file__).resolve().parent.parent
CORPUS = ROOT / "fixtures" / "corpus" / "gpu"
KERNEL_LOG_SAMPLES = ("dmesg-*", "fallen-off-bus-*", "gsp-*", "xid*-*", "nvlink-postrx-*")
BASELINE = re.compile(r"NVRM: Xid \(PCI:([^)]*)\): (\d+),")

_CHILD = """
import resource, sys
sys.path.insert(0, {root!r})
from nightowl.collectors.gpu import kernel_log
if {parse}:
    with open({path!r}, encoding="utf-8", errors="replace") as handle:
        result = kernel_log.parse_lines(handle)
    print(len(result.events), end=" ")
print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)
"""


def corpus_lines() -> list[str]:
    lines: list[str] = []
    for pattern in KERNEL_LOG_SAMPLES:
        for path in sorted(CORPUS.glob(pattern)):
            lines.extend(line for line in path.read_text(encoding="utf-8").splitlines() if line.strip())
    return lines


# Ordinary kernel chatter for --filler (a real log is mostly lines like these, not GPU events).
FILLER = (
    "[ 1234.567890] usb 1-1: new high-speed USB device number 2 using xhci_hcd",
    "[ 1234.567891] EXT4-fs (nvme0n1p2): mounted filesystem with ordered data mode. Quota mode: none.",
    "[ 1234.567892] IPv6: ADDRCONF(NETDEV_CHANGE): eth0: link becomes ready",
    "[ 1234.567893] systemd[1]: Started Journal Service.",
)


def build_log(path: Path, size_mb: int, filler: int = 0) -> tuple[int, int]:
    lines = corpus_lines()
    if filler:
        lines = [line for corpus_line in lines for line in (corpus_line, *(FILLER * filler)[:filler])]
    block = "\n".join(lines) + "\n"
    target = size_mb * 1024 * 1024
    written = 0
    with path.open("w", encoding="utf-8") as handle:
        while written < target:
            handle.write(block)
            written += len(block.encode("utf-8"))
        handle.flush()
        os.fsync(handle.fileno())  # no write-back of the fresh file during either timed pass
    return written, len(lines)


def timed_pass(path: Path, consume: Callable[[IO[str]], Any]) -> tuple[float, Any]:
    """Seconds from opening ``path`` to closing it, with ``consume`` reading it; the I/O of both sides."""
    gc.collect()
    start = time.perf_counter()
    with path.open(encoding="utf-8", errors="replace") as handle:
        outcome = consume(handle)
    return time.perf_counter() - start, outcome


def count_xid_lines(handle: IO[str]) -> int:
    found = 0
    search = BASELINE.search
    for line in handle:
        if search(line):
            found += 1
    return found


def parse_log(handle: IO[str]) -> tuple[int, int]:
    from nightowl.collectors.gpu import kernel_log

    result = kernel_log.parse_lines(handle)
    return len(result.events), sum(e["count"] for e in result.events)


def read_lines(handle: IO[str]) -> int:
    return sum(1 for _ in handle)


def child_maxrss_kb(path: Path, parse: bool) -> str:
    code = _CHILD.format(root=str(ROOT), path=str(path), parse=parse)
    completed = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return completed.stdout.strip()


def main() -> None:
    options = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    options.add_argument("--size-mb", type=int, default=200)
    options.add_argument("--repeat", type=int, default=3, help="timed passes of each side, alternating (default 3)")
    options.add_argument(
        "--filler", type=int, default=0, help="ordinary kernel lines added after each corpus line (default 0)"
    )
    args = options.parse_args()
    sys.path.insert(0, str(ROOT))
    from nightowl.collectors.gpu import kernel_log  # noqa: F401  (imported before any clock runs)

    with tempfile.TemporaryDirectory(prefix="nightowl-bench-") as folder:
        path = Path(folder) / "kernel.log"
        size, distinct_lines = build_log(path, args.size_mb, args.filler)
        print(
            f"log: {size / 1e6:.0f} MB from {distinct_lines} lines ({args.filler} filler lines after each corpus line)"
        )
        io_s, line_count = timed_pass(path, read_lines)  # warms the page cache for both sides
        print(f"reading the lines alone:     {io_s:.2f} s ({line_count} lines)")
        base_runs: list[float] = []
        parse_runs: list[float] = []
        for _ in range(max(1, args.repeat)):
            base_s, xid_lines = timed_pass(path, count_xid_lines)
            parse_s, (events, occurrences) = timed_pass(path, parse_log)
            base_runs.append(base_s)
            parse_runs.append(parse_s)
        print(f"baseline per-line re.search: {min(base_runs):.2f} s ({xid_lines} Xid lines) runs: {_runs(base_runs)}")
        print(
            f"kernel_log.parse_lines:      {min(parse_runs):.2f} s ({events} events, {occurrences} occurrences) "
            f"runs: {_runs(parse_runs)}"
        )
        print(f"ratio: {min(parse_runs) / min(base_runs):.2f}x (target <= 3x; best of {len(base_runs)} each)")
        idle = int(child_maxrss_kb(path, parse=False).split()[-1])
        busy = int(child_maxrss_kb(path, parse=True).split()[-1])
        print(
            f"peak RSS of a child that parses: {busy / 1024:.1f} MB "
            f"(import only: {idle / 1024:.1f} MB; parser's own: {(busy - idle) / 1024:.1f} MB; "
            "target < 100 MB)"
        )


def _runs(seconds: list[float]) -> str:
    return " ".join(f"{s:.2f}" for s in seconds)


if __name__ == "__main__":
    main()
