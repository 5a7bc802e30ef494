"""Client CPU one real-size host costs in parsing (issue "Real evidence at real size"): each collector's
parse of the outputs a real-size 8-GPU node serves (bench/real_evidence.py), timed in a loop, as the engine
runs it (nightowl/engine/runner.py ``parse_output``: escapes stripped, parsed, facts derived, the parse
memo's key), plus the pieces alone; and, apart, each collector's ``shows_nothing``, which the engine asks
of every output that exited 0 before it parses it.

    .venv/bin/python bench/parse.py [--runs N] [--profile]

Figures are CPU milliseconds per host, best of ``--runs``; ``--profile`` prints cProfile's top functions.
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.real_evidence import RECORDED, earlier_boots_sent, kernel_log  # noqa: E402
from nightowl.collectors import get_collector  # noqa: E402
from nightowl.collectors.escapes import strip_escapes  # noqa: E402
from nightowl.engine import parse_memo  # noqa: E402


def outputs() -> dict[str, str]:
    """What each collector of node-health reads from a real-size node, by kind."""
    smi = (RECORDED / "nvidia-smi.out").read_text()
    log = kernel_log()
    return {
        "nvidia-smi": (RECORDED / "nvidia-smi-q-x.xml").read_text(),  # `nvidia-smi -q -x`, its first command
        "fabric": smi,
        "nvlink": (RECORDED / "nvlink.out").read_text(),
        "kernel-log": log,
        "kernel-log-boots": earlier_boots_sent(),  # the list, and two earlier boots as the node cuts them
        "fabric-manager": "active\n",
    }


def best_of(runs: int, work: Callable[[], Any]) -> float:
    times = []
    for _ in range(runs):
        started = time.process_time()
        work()
        times.append(time.process_time() - started)
    return min(times) * 1000


def parse_once(kind: str, text: str) -> dict[str, Any]:
    collector = get_collector(kind)
    # a fresh str each time, so no parse is handed out again for the same object (base.parsed_once)
    return collector.facts(collector.parse(text[:1] + text[1:]))


def shows_nothing_best_of(runs: int, kind: str, text: str) -> float:
    """CPU ms of the collector's ``shows_nothing``, best of ``runs``, each on a fresh copy made untimed (a
    ``shows_nothing`` that parses, ``parsed_once``, must parse again; copying the text is not its cost)."""
    check = get_collector(kind).shows_nothing
    if check is None:
        return 0.0
    times = []
    for _ in range(runs):
        fresh = text[:1] + text[1:]
        started = time.process_time()
        check(fresh)
        times.append(time.process_time() - started)
    return min(times) * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--profile", action="store_true", help="print cProfile's top functions of one host")
    args = parser.parse_args()
    texts = outputs()
    print(f"one real-size host: CPU ms, best of {args.runs}")
    total = asked = 0.0
    for kind, text in texts.items():
        spent = best_of(args.runs, lambda kind=kind, text=text: parse_once(kind, text))
        looked = shows_nothing_best_of(args.runs, kind, text)
        total += spent
        asked += looked
        print(f"  {kind:<18} {len(text) / 1e3:8.0f} KB  parse+facts {spent:7.2f} ms  shows_nothing {looked:6.2f} ms")
    size = sum(map(len, texts.values())) / 1e3
    print(f"  {'all collectors':<18} {size:8.0f} KB  parse+facts {total:7.2f} ms  shows_nothing {asked:6.2f} ms")
    every = list(texts.items())
    keyed = best_of(args.runs, lambda: [(kind, parse_memo._digest(text)) for kind, text in every])
    stripped = best_of(args.runs, lambda: [strip_escapes(text) for _, text in every])
    print(f"  parse memo keys (sha256 of each text) {keyed:7.2f} ms; strip_escapes {stripped:7.2f} ms (in the above)")
    if args.profile:
        profile = cProfile.Profile()
        profile.enable()
        for kind, text in every:
            parse_once(kind, text)
        profile.disable()
        pstats.Stats(profile).sort_stats("tottime").print_stats(25)


if __name__ == "__main__":
    main()
