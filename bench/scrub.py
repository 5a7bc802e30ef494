"""Secret scrubbing throughput on a real-size boot log (bench/real_evidence.py), against one
case-insensitive regular-expression pass for the scrubber's trigger words over the same text; then one
real-size host's outputs (the boot log, two earlier boots as the node cuts them, nvidia-smi -q -x and -q, nvlink)
and short strings one by one, as a bundle's JSON values are scrubbed (each distinct, as across hosts).

    .venv/bin/python bench/scrub.py [--oracle]   # --oracle: the scrubber as it was (tests/redact_oracle.py)
"""

from __future__ import annotations

import argparse
import re
import sys
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.real_evidence import RECORDED, earlier_boots_sent, kernel_log  # noqa: E402
from nightowl.redact import _TRIGGERS, scrub_secrets  # noqa: E402

# Values of the kind a bundle's JSON documents hold (PCI addresses, GPU names, units, verdicts, commands).
_VALUES = (
    "0000:{n:02x}:00.0",
    "NVIDIA H100 80GB HBM3",
    "GPU {n} has {n} retired pages",
    "Enabled",
    "565.57.01",
    "nvidia-smi -q -i {n}",
    "kernel-log-boots",
    "MiB",
    "The fabric manager is active on gpu-node-{n}",
    "api_key={n}abc",
)


def best_of(runs: int, work: Callable[[], object]) -> float:
    times = []
    for _ in range(runs):
        started = time.process_time()
        work()
        times.append(time.process_time() - started)
    return min(times)


def host_outputs() -> list[str]:
    recorded = ("nvidia-smi-q-x.xml", "nvidia-smi.out", "nvlink.out")
    return [kernel_log(), earlier_boots_sent(), *((RECORDED / name).read_text() for name in recorded), "active\n"]


def short_values(count: int, run: int) -> list[str]:
    """``count`` distinct short strings, none of another run's: no kept answer for a string seen before
    serves them (real hosts' values differ)."""
    return [f"{value.format(n=number)} #{run}" for number in range(count // len(_VALUES)) for value in _VALUES]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--oracle", action="store_true", help="time the scrubber as it was before the prefilter")
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    scrub = scrub_secrets
    if args.oracle:
        from tests.redact_oracle import scrub_secrets as scrub
    text = kernel_log()
    megabytes = len(text.encode()) / 1e6
    one_pass = re.compile("|".join(map(re.escape, _TRIGGERS)), re.IGNORECASE)
    baseline = best_of(args.runs, lambda: list(one_pass.finditer(text)))
    spent = best_of(args.runs, lambda: scrub(text))
    print(f"boot log: {megabytes:.2f} MB, {text.count(chr(10))} lines (CPU seconds, best of {args.runs})")
    print(f"one case-insensitive trigger pass : {baseline:.4f} s  {megabytes / baseline:8.1f} MB/s")
    label = "scrub_secrets (as it was)" if args.oracle else "scrub_secrets"
    print(f"{label:<34}: {spent:.4f} s  {megabytes / spent:8.1f} MB/s  ({spent / baseline:.2f}x the pass)")
    outputs = host_outputs()
    host = best_of(args.runs, lambda: [scrub(output) for output in outputs])
    print(f"one real-size host's outputs      : {host:.4f} s  ({sum(map(len, outputs)) / 1e6:.2f} MB)")
    runs = [short_values(20_000, run) for run in range(args.runs)]
    short = best_of(args.runs, lambda: [scrub(value) for value in runs.pop()])
    print(f"20,000 distinct short strings     : {short:.4f} s  ({short / 20_000 * 1e6:.2f} us a string)")


if __name__ == "__main__":
    main()
