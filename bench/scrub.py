"""Secret scrubbing throughput on a real-size boot log (bench/real_evidence.py), against one
case-insensitive regular-expression pass for the scrubber's trigger words over the same text.

    .venv/bin/python bench/scrub.py [--oracle]   # --oracle: the scrubber as it was (tests/redact_oracle.py)
"""

from __future__ import annotations

import argparse
import re
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.real_evidence import kernel_log  # noqa: E402
from nightowl.redact import _TRIGGERS, scrub_secrets  # noqa: E402


def best_of(runs: int, work: object) -> float:
    times = []
    for _ in range(runs):
        started = time.process_time()
        work()  # type: ignore[operator]
        times.append(time.process_time() - started)
    return min(times)


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


if __name__ == "__main__":
    main()
