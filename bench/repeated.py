"""`bench/sweep.py --steady --every S`: the steady state of one `nightowl sweep --every S` process (issue 46).

Its first round runs over the sweep's worker processes (a one-shot sweep's), its second opens the connections
the sweeping process then keeps; the steady row is the median of the rounds after (``--repeat`` 4 or more gives
three of them).

`--steady` alone times a new `nightowl sweep` per round (a cron job's sweep: an interpreter started, the
runbook loaded, every host dialed again). Here one process sweeps ``repeat + 1`` rounds, keeping its
connections between them (nightowl/cli/sweep_every.py); each round's wall and CPU seconds are the ones its
JSON report gives (``round``: from the round's start to its report, this process's CPU). Between rounds,
while the sweep waits for its next start, each live host's log grows and its GPU readings change
(bench/steady.py ``grow_logs``, ``vary_readings``) and the bare pool does today's full reads, so the two never
share the CPU. ``every`` must leave room for both: a round that started while the bench was still at its own work
for the round before (``shared``: by how much, by the one clock both processes read) shared the two cores with the
bare pool's 64 full reads, and took two to three times as long at 64 hosts (4.08 s, begun 3.88 s early, against
1.56 to 1.75 s for the rounds after it, ``--every 8``); the round before it, whose bare pool ran into it, has its
ratio skewed too. The next round starts ``every`` after the last one started, or at once when that one ran past
it. Each round's line says which, and the row counts the rounds with either: a row with any is not a measurement
of the sweep alone (raise ``--every``). Beside the sweep's CPU a live host the row
gives the bare pool's, the same full reads every round: the machine's own pace, by which the same code's figure
moved 1.8-fold within two hours (12 to 22 ms a live host at 64 hosts on the 2-core machine).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from bench.fleet_run import FleetRun, median_of
from bench.steady import grow_logs, vary_readings
from tests.ssh.fleet import Fleet


def repeated_rounds(run: FleetRun, forks: int, bench: Any) -> list[str]:
    """Table rows, as bench/steady.py's: the first round (over the sweep's worker processes), the second (the
    sweeping process opens its connections) and the median of the later ones (over those connections)."""
    args, fleet, root, names, dead, inventory = run.args, run.fleet, run.root, run.names, run.dead, run.inventory
    out = root / f"every-{forks}"
    out.mkdir()
    child = _start(args, fleet, out, inventory, forks, bench)
    peak = [0.0]
    sampling = threading.Event()
    sampler = threading.Thread(target=_sample, args=(child.pid, peak, sampling, bench), daemon=True)
    sampler.start()
    rounds: list[dict[str, Any]] = []
    late = 0.0  # how far the bench's own work for the last round (its logs, its bare pool) ran into this one (s)
    assert child.stdout is not None
    for report in _reports(child.stdout):
        arrived = time.monotonic()
        number = report["round"]["number"]
        kb = _round_kb(Path(report["bundle"]), len(names))
        wrong = bench.verdict_errors(report["hosts"], set(dead))
        for line in wrong[:2]:
            print(f"  round {number} forks {forks} wrong: {line}")
        grow_logs(fleet, names, number)
        vary_readings(fleet, names, number)
        bare_wall, bare_cpu = bench.bare_pool(fleet, run.pool_hosts, forks)
        seconds, cpu = report["round"]["seconds"], report["round"]["cpu_seconds"]
        # The next round starts `every` after this one started, or at once when this one ran past that.
        next_start = max(arrived - seconds + args.every, arrived)
        overran = time.monotonic() - next_start if number <= args.repeat else 0.0  # the bare pool beside it
        batched, linked = report["round"].get("commands_batched", "-"), report["round"].get("files_linked", "-")
        shared = f", started {late:.2f} s before the bench's own work ended" if late > 0 else ""
        shared += f", its bare pool ran {overran:.2f} s into the next round" if overran > 0 else ""
        print(
            f"  round {number}: {seconds:.2f} s (bare {bare_wall:.2f} s), CPU {cpu:.2f} s, {kb:.1f} KB per live host, "
            f"{batched} commands batched, {linked} files linked{shared}"
        )
        rounds.append({"bare": bare_wall, "wall": seconds, "cpu": cpu / len(names), "wrong": len(wrong), "kb": kb})
        rounds[-1]["shared"] = max(late, overran)  # its sweep or its bare pool shared the cores with the other
        rounds[-1]["bare_cpu"] = bare_cpu / len(names)  # the machine's pace: the same reads' cost, round by round
        late = overran
        rounds[-1]["connections"] = (report["round"]["connections_reused"], report["round"]["connections_opened"])
    child.wait()
    sampling.set()
    sampler.join()
    if child.returncode not in (0, 1, 3) or len(rounds) != args.repeat + 1:  # 3: unreachable hosts
        assert child.stderr is not None
        print(f"  sweep --every exited {child.returncode} after {len(rounds)} rounds: {child.stderr.read()[-400:]}")
    labels = (("first", rounds[:1]), ("second", rounds[1:2]), ("steady", rounds[2:]))
    return [_row(label, part, run, forks, peak[0]) for label, part in labels if part]


def _start(
    args: argparse.Namespace, fleet: Fleet, out: Path, inventory: list[str], forks: int, bench: Any
) -> subprocess.Popen[str]:
    hosts = fleet.write_inventory(out / "hosts.yaml", inventory)
    argv = ["sweep", "--inventory", str(hosts), "--known-hosts", str(fleet.known_hosts)]
    argv += ["--ssh-config", str(fleet.ssh_config), "--identity", str(fleet.client_key), "--forks", str(forks)]
    argv += ["--format", "json", "--out", str(out / "bundles"), "--history", str(out / "history.db")]
    argv += ["--every", str(args.every), "--rounds", str(args.repeat + 1)]
    code = "import sys; from nightowl.cli.main import main; sys.exit(main())"
    env = {**os.environ, **bench.BYTECODE_ENV, "PYTHONPATH": str(bench.ROOT), **bench.code_env(args.code)}
    return subprocess.Popen(
        [sys.executable, "-c", code, *argv],
        cwd=bench.ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _reports(stream: Any) -> Any:
    """Each round's JSON report as the sweep prints it (one document after another, indented or not)."""
    decoder, buffer = json.JSONDecoder(), ""
    for line in stream:
        buffer += line
        try:
            report, end = decoder.raw_decode(buffer.lstrip())
        except ValueError:
            continue
        buffer = buffer.lstrip()[end:]
        yield report


def _round_kb(bundle: Path, live: int) -> float:
    """KB per live host this round's bundle says its commands read (a shared answer once: steady.reads)."""
    from bench.steady import reads

    return sum((entry.get("bytes") or 0) for entry in reads(bundle / "manifest.json")) / 1024 / max(1, live)


def _sample(pid: int, peak: list[float], stop: threading.Event, bench: Any) -> None:
    while not stop.wait(0.2):
        peak[0] = max(peak[0], bench.tree_rss_mb(pid))


def _row(label: str, rounds: list[dict[str, Any]], run: FleetRun, forks: int, peak: float) -> str:
    bare, wall = median_of(rounds, "bare"), median_of(rounds, "wall")
    connections = ", ".join(f"{reused}/{opened}" for reused, opened in (r["connections"] for r in rounds))
    shared = sum(1 for r in rounds if r["shared"] > 0)
    return (
        f"| {label} | {run.hosts_cell} | {forks} | {bare:.2f} | {wall:.2f} "
        f"| {wall / bare:.2f}x | {', '.join(str(r['wrong']) for r in rounds)} | {median_of(rounds, 'cpu') * 1000:.0f} "
        f"| {median_of(rounds, 'bare_cpu') * 1000:.0f} | {median_of(rounds, 'kb'):.1f} | {connections} | {peak:.0f} "
        f"| {shared} of {len(rounds)} |"
    )


HEADER = (
    "| round | hosts (live, refused) | forks | bare pool s | sweep s | ratio | verdict errors | CPU ms / live host "
    "| bare pool CPU ms / live host | KB / live host | connections reused/opened | sweep peak RSS MB "
    "| rounds sharing the cores with the bench's work |"
)
