"""Benchmark: wall seconds of one `nightowl triage first-look --replica NAME=URL` at the default window.

Three loopback stand-in replicas (tests/runbooks/firstlook_standins.py: vLLM /metrics with the bucket
bounds and counts of recorded scrapes) are read by URL from this process (the real CLI, in-process), with
the runbook's default ``window_seconds``, after one untimed warm-up look (imports, runbook loading). Cases:

- ``plain``: no stream probe (the default);
- ``probed``: ``stream_probe=true``, every stream ends with ``[DONE]``;
- ``slow-stream``: ``stream_probe=true``, r1's stream sends one chunk, then holds the connection for
  ``--hold`` seconds (default 3) and closes it without ``[DONE]`` (a gateway that buffers SSE).

Figures (2026-12-02, a 2-core VM shared with six other engineers' jobs, load average 5-7; 3 replicas,
default window 5 s, two rounds each, wall seconds of the CLI call after the warm-up; "before" is main's
nightowl/ and runbooks/ with this bench):

    before (three scrapes window_seconds apart, health/models/probe with the first one, then two waits):
        plain 10.79 10.63   probed 10.69 10.60   slow-stream 13.71 13.53
    after (scrapes at 0, W/2 and W; health, models, version, container, engine log, GPUs and the stream
    probe in a background node, nightowl/engine/background.py):
        plain  5.62  5.63   probed  6.12  5.70   slow-stream  5.61  5.39

Usage: .venv/bin/python bench/first_look.py [--repeat 1] [--hold 3] [--case plain,probed,slow-stream]
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time

from tests.runbooks.firstlook_standins import Replica, replicas

CASES = ("plain", "probed", "slow-stream")


def one_look(case: str, hold: float, window: str | None = None) -> tuple[float, str]:
    """Wall seconds of one first look and its verdict id (``window``: a window_seconds other than the default)."""
    from click.testing import CliRunner

    from nightowl.cli.main import main

    specs = {n: Replica() for n in ("r1", "r2", "r3")}
    if case == "slow-stream":
        specs["r1"].stream_done, specs["r1"].stream_hold = False, hold
    extra = ["--param", "stream_probe=true"] if case != "plain" else []
    extra += ["--param", f"window_seconds={window}"] if window is not None else []
    with replicas(specs), tempfile.TemporaryDirectory() as out:
        argv = ["triage", "first-look", *[a for n, r in specs.items() for a in ("--replica", f"{n}={r.url}")]]
        t0 = time.monotonic()
        result = CliRunner().invoke(main, [*argv, *extra, "--out", out, "--format", "json"])
        seconds = time.monotonic() - t0
    document = json.loads(result.output[: result.output.rindex("}") + 1])
    return seconds, str((document["hosts"][0]["verdict"] or {}).get("id"))


def main_() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--hold", type=float, default=3.0)
    parser.add_argument("--case", default=",".join(CASES))
    args = parser.parse_args()
    one_look("plain", 0, window="0")  # warm-up: the first look in a process pays the imports and runbook loading
    for case in args.case.split(","):
        for _ in range(args.repeat):
            seconds, verdict = one_look(case, args.hold)
            print(f"{case:12s} {seconds:6.2f} s  verdict {verdict}", flush=True)


if __name__ == "__main__":
    main_()
