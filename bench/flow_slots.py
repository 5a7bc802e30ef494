"""The flow control's slots (nightowl/engine/flow.py ``AdaptiveLimit``): the CPU 1,000 hosts cost to pass through
them, 32 host threads asking, at a limit of 4, 8, 16 and 32 hosts in flight.

A steady round of a 1,000-host sweep (64 live, 936 refused at once) runs its hosts through the slots while
flow control holds the limit under the 32 threads: each host's wait and hand-over is the cost measured here
(a host's own work is a sleep of 0.2 ms, or 1 ms for every fifteenth, as a refused and a live host's start).

    .venv/bin/python bench/flow_slots.py [--hosts 1000] [--threads 32]
"""

from __future__ import annotations

import argparse
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from nightowl.engine.flow import AdaptiveLimit  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hosts", type=int, default=1000)
    parser.add_argument("--threads", type=int, default=32)
    args = parser.parse_args()
    stop = threading.Event()
    with ThreadPoolExecutor(args.threads) as pool:
        list(pool.map(lambda _: None, range(2 * args.threads)))  # the threads started before the clock
        for limit in (4, 8, 16, 32):
            flow = AdaptiveLimit(args.threads, start=limit)

            def one(number: int, flow: AdaptiveLimit = flow) -> None:
                with flow.slot(stop):
                    time.sleep(0.001 if number % 15 == 0 else 0.0002)

            cpu, wall = time.process_time(), time.perf_counter()
            list(pool.map(one, range(args.hosts)))
            cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
            each = cpu / args.hosts * 1e6
            print(f"limit {limit:2d}: {args.hosts} hosts in {wall:.3f} s, CPU {cpu:.3f} s ({each:.0f} us a host)")


if __name__ == "__main__":
    main()
