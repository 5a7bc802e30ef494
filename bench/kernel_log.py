"""Benchmark: the kernel-log parser against a bare regex pass over the same large log.

Builds a kernel log of ``--size-mb`` (default 200 MB) by cycling the kernel-log lines of the
corpus (fixtures/corpus/gpu: dmesg, syslog, journald, Talos, dmesg -T, bare NVRM lines) in a
temporary directory, then times in one run:

- baseline: one per-line ``re.search`` for Xid lines (what a grep-style checker does);
- nightowl: ``kernel_log.parse_lines`` over the same file (every event kind, bursts collapsed).

It prints both times, their ratio and the parser's peak memory (ru_maxrss of a child process that
only parses, next to the ru_maxrss of the same child that only imports). Targets: ratio <= 3x,
peak < 100 MB.

Usage: .venv/bin/python bench/kernel_log.py [--size-mb 200]
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CORPUS = ROOT / "fixtures" / "corpus" / "gpu"
KERNEL_LOG_SAMPLES = ("dmesg-*", "fallen-off-bus-*", "gsp-*", "xid*-*", "nvlink-postrx-*")
BASELINE = re.compile(r"NVRM: Xid \(PCI:([^)]*)\): (\d+),")

_CHILD = """
import resource, sys
sys.path.insert(0, {root!r})
from nightowl.collectors import kernel_log
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
    return written, len(lines)


def time_baseline(path: Path) -> tuple[float, int]:
    start = time.perf_counter()
    found = 0
    search = BASELINE.search
    with path.open(encoding="utf-8", errors="replace") as handle:
        for line in handle:
            if search(line):
                found += 1
    return time.perf_counter() - start, found


def time_parser(path: Path) -> tuple[float, int, int]:
    sys.path.insert(0, str(ROOT))
    from nightowl.collectors import kernel_log

    start = time.perf_counter()
    with path.open(encoding="utf-8", errors="replace") as handle:
        result = kernel_log.parse_lines(handle)
    elapsed = time.perf_counter() - start
    return elapsed, len(result.events), sum(e["count"] for e in result.events)


def child_maxrss_kb(path: Path, parse: bool) -> str:
    code = _CHILD.format(root=str(ROOT), path=str(path), parse=parse)
    completed = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return completed.stdout.strip()


def main() -> None:
    options = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    options.add_argument("--size-mb", type=int, default=200)
    options.add_argument(
        "--filler", type=int, default=0, help="ordinary kernel lines added after each corpus line (default 0)"
    )
    args = options.parse_args()
    with tempfile.TemporaryDirectory(prefix="nightowl-bench-") as folder:
        path = Path(folder) / "kernel.log"
        size, distinct_lines = build_log(path, args.size_mb, args.filler)
        print(
            f"log: {size / 1e6:.0f} MB from {distinct_lines} lines ({args.filler} filler lines after each corpus line)"
        )
        base_s, xid_lines = time_baseline(path)
        print(f"baseline per-line re.search: {base_s:.2f} s ({xid_lines} Xid lines)")
        parse_s, events, occurrences = time_parser(path)
        print(f"kernel_log.parse_lines:      {parse_s:.2f} s ({events} events, {occurrences} occurrences)")
        print(f"ratio: {parse_s / base_s:.2f}x (target <= 3x)")
        idle = int(child_maxrss_kb(path, parse=False).split()[-1])
        busy = int(child_maxrss_kb(path, parse=True).split()[-1])
        print(
            f"peak RSS of a child that parses: {busy / 1024:.1f} MB "
            f"(import only: {idle / 1024:.1f} MB; parser's own: {(busy - idle) / 1024:.1f} MB; "
            "target < 100 MB)"
        )


if __name__ == "__main__":
    main()
