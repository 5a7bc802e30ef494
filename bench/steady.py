"""`bench/sweep.py --steady`: a sweep's first round against its steady state (issue 46, "read only what changed").

The fleet's `journalctl` stand-in serves a host's recorded ``kernel-log.out`` whatever it is asked; here a
`journalctl` in front of it keeps a real cursor over that file (an entry is a line, the cursor names it as
journald's ``s=;i=;b=`` does; ``--cursor`` starts at the entry it names, ``--show-cursor`` prints the last one's),
and every other call goes on to the stand-in. Between rounds each live host's log gets a few new lines. All
rounds keep one history store, so the first round reads every log whole and the later ones from the last
position. The bare pool is the same as in the other rows: today's full reads (``node_health_commands``).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import stat
from pathlib import Path
from typing import Any

from bench.fleet_run import FleetRun, median_of
from tests.ssh.fleet import Fleet

STEADY_HEADER = (
    "| round | hosts (live, refused) | forks | workers | bare pool s | sweep s | ratio | verdict errors "
    "| CPU ms / live host | KB / live host | kernel-log KB / live host | nvidia-smi KB / live host "
    "| sweep peak RSS MB |"
)
STEADY_TARGETS = (
    "targets (issue 46): steady state <= 0.5x the bare pool doing full reads, <= 15 ms CPU per live host, "
    "0 verdict errors, bytes per host <= 5% of a full read's"
)
NEW_LINES = 3  # per host between two rounds
# What `nvidia-smi --query-gpu` takes here (issue 46 item 3's cheap form). No 8-GPU timing of it was measured
# for this bench: NVML's start is most of nvidia-smi's time, so half the -q stand-in's 0.4 s is assumed.
QUERY_SECONDS = 0.2
FABRIC_QUERY_KIND = "nvidia-smi-fabric-query"  # what the fleet's stand-in serves for the fabric's cheap form
SHARED_QUERY_KIND = "nvidia-smi-shared-query"  # and for the query both cheap forms share (cheap.SHARED_ARGV)

# sh: the host's folder from $SSH_CONNECTION (as the fleet's stand-in finds it); a cursor is "s=bench;i=N;b=B":
# entry N is line N of kernel-log.out.
_JOURNAL = """#!/bin/sh
show=; from=1
for a do
  case $a in
    --show-cursor) show=1 ;;
    --cursor=*) from=${a#--cursor=}; from=${from#*;i=}; from=${from%%;*} ;;
  esac
done
[ -n "$show" ] || exec OTHER "$@"
set -- $SSH_CONNECTION
log=$NIGHTOWL_FLEET/hosts/$3/kernel-log.out
tail -n +"$from" "$log"
echo "-- cursor: s=bench;i=$(wc -l < "$log");b=bench-boot;m=0;t=0;x=0"
"""


def cursor_journal_standin(fleet: Fleet) -> None:
    """Put the cursor-keeping `journalctl` in front of whatever answers `journalctl` on the fleet now."""
    bin_dir = fleet.root / "bin"
    current, served = bin_dir / "journalctl", bin_dir / "served"
    served.mkdir(exist_ok=True)
    other = served / "journalctl-before-cursor"
    if current.is_symlink():  # the fleet's own stand-in: called by its name, it serves kernel-log
        other = served / "journalctl"
        other.unlink(missing_ok=True)
        other.symlink_to(bin_dir / ".standin")
        current.unlink()
    else:  # a front already (bench/real_evidence.py's --list-boots one)
        shutil.move(current, other)
    current.write_text(_JOURNAL.replace("OTHER", str(other)))
    current.chmod(current.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)


def serve_cheap_form(fleet: Fleet, names: list[str]) -> None:
    """Each live host answers the cheap forms (issue 46 item 3) after QUERY_SECONDS: nvidia-smi's
    `--query-gpu=... --format=csv,nounits` with the CSV its recorded ``-q -x`` says, the fabric's (its Fabric
    fields) with the CSV its recorded ``-q`` says, the query both share with the two joined
    (tests/engine/cheap_csv.py). The fleet's stand-in serves the first as the kind nvidia-smi-query (its
    `--query-gpu*` glob); a front routes the other two to their own kinds."""
    from bench.real_evidence import _front, _served

    for name in names:
        serve_queries(fleet, name)
    bin_dir = fleet.root / "bin"
    fabric, other = _served(bin_dir, FABRIC_QUERY_KIND), bin_dir / "served" / "nvidia-smi-before-fabric-query"
    shared = _served(bin_dir, SHARED_QUERY_KIND)
    current = bin_dir / "nvidia-smi"
    if current.is_symlink():  # the fleet's own stand-in: called by its name, it serves nvidia-smi's kinds
        other = _served(bin_dir, "nvidia-smi")
        current.unlink()
    else:  # a front already (bench/real_evidence.py's -x one)
        shutil.move(current, other)
    routes = f'*index,*fabric.state*) exec {shared} "$@" ;; *fabric.state*) exec {fabric} "$@" ;;'
    _front(bin_dir, "nvidia-smi", f'case "$*" in {routes} esac\nexec {other} "$@"\n')


def serve_queries(fleet: Fleet, name: str, changes: dict[int, dict[str, Any]] | None = None) -> None:
    """``name``'s three cheap queries (``changes``: per GPU, the values its nvidia-smi query says this round)."""
    from bench.real_evidence import XML_KIND
    from tests.engine.cheap_csv import cheap_csv, fabric_csv, shared_csv

    folder = fleet.host_dir(name)
    xml, text = folder / f"{XML_KIND}.out", folder / "nvidia-smi.out"
    query = cheap_csv(xml.read_text(), changes) if xml.exists() else None
    fabric = fabric_csv(text.read_text()) if text.exists() else None
    if query is not None:
        fleet.set_output(name, "nvidia-smi-query", out=query, sleep=QUERY_SECONDS)
    if fabric is not None:
        fleet.set_output(name, FABRIC_QUERY_KIND, out=fabric, sleep=QUERY_SECONDS)
    if query is not None and fabric is not None:
        fleet.set_output(name, SHARED_QUERY_KIND, out=shared_csv(query, fabric), sleep=QUERY_SECONDS)


def grow_logs(fleet: Fleet, names: list[str], round_: int) -> None:
    """NEW_LINES quiet kernel messages at the end of each live host's log, in its own time format."""
    for name in names:
        log = fleet.host_dir(name) / "kernel-log.out"
        text = log.read_text(encoding="utf-8", errors="surrogateescape")
        lines = []
        for n in range(NEW_LINES):
            message = f"usb 1-{n + 1}: new high-speed USB device number {round_ * NEW_LINES + n} using xhci_hcd"
            if text.startswith("["):
                lines.append(f"[{90000 + round_ * 10 + n:6d}.000001] {message}")
            else:
                lines.append(f"2024-11-14T07:{round_ % 60:02d}:{n:02d}+0000 gpu-node kernel: {message}")
        with log.open("a", encoding="utf-8") as out:
            out.write("\n".join(lines) + "\n")
    move_last_entry(fleet, round_)


def move_last_entry(fleet: Fleet, round_: int) -> None:
    """The boot list's current boot (bench/real_evidence.py's ``LIST_BOOTS``) ends at this round's newest entry:
    a real node's `journalctl --list-boots` shows the last entry of the boot it is in, which moves as its log
    grows (journalctl(1)), so its text is not last round's."""
    listing = fleet.root / "bin" / "list-boots.txt"
    if not listing.is_file():
        return
    rows = listing.read_text().splitlines(keepends=True)
    minutes = 7 * 60 + 30 + round_  # the list's 07:30:00, a minute on each round
    newest = f"{minutes // 60 % 24:02d}:{minutes % 60:02d}:00 UTC\n"
    for number, row in enumerate(rows):
        if row.split()[:1] == ["0"]:
            rows[number] = re.sub(r"\d\d:\d\d:\d\d UTC\s*$", newest, row)
    listing.write_text("".join(rows))


def vary_readings(fleet: Fleet, names: list[str], round_: int) -> None:
    """Each live host's cheap nvidia-smi reads say this round's utilization and temperature, as a working node's
    do (no judged value changes, so the read stays cheap): a sweep cannot reuse last round's parse of it, as it
    can of outputs that did not change (NVLink status, the list of boots)."""
    for number, name in enumerate(names):
        changes = {
            gpu: {"utilization.gpu": (round_ * 7 + number + gpu) % 100, "temperature.gpu": 40 + (round_ + gpu) % 9}
            for gpu in range(8)
        }
        serve_queries(fleet, name, changes)


def reads(manifest: Path) -> list[dict[str, Any]]:
    """A bundle's command entries that read something: not one with ``answer_of`` (another kind's read, given to
    this one too: nothing more was read)."""
    return [entry for entry in json.loads(manifest.read_text()).get("commands", []) if not entry.get("answer_of")]


def sent_bytes(bundles: Path, live: int) -> dict[str, float]:
    """KB per live host the sweep read, by collector kind (every command's output, from the manifest)."""
    kinds: dict[str, float] = {}
    for manifest in bundles.glob("*/manifest.json"):
        for entry in reads(manifest):
            kind = str(entry.get("kind"))
            kinds[kind] = kinds.get(kind, 0.0) + (entry.get("bytes") or 0) / 1024 / max(1, live)
    return kinds


def steady_rounds(run: FleetRun, forks: int, workers: int | None, bench: Any) -> list[str]:
    """Two table rows: the first round (a fresh store: every log read whole) and the steady state (the median
    of ``repeat`` later rounds, each after NEW_LINES new lines per host). ``bench``: bench/sweep.py as it runs
    (its ``__main__``, whose child processes read the compiled modules), for its pool, sweep and checks."""
    args, fleet, root, names, dead, inventory = run.args, run.fleet, run.root, run.names, run.dead, run.inventory
    history = root / f"history-{forks}-{workers}.db"
    history.unlink(missing_ok=True)
    rounds: list[dict[str, Any]] = []
    for round_ in range(args.repeat + 1):
        bare_wall, _ = bench.bare_pool(fleet, run.pool_hosts, forks)
        out = root / f"steady-{forks}-{workers}-{round_}"
        out.mkdir()
        wall, cpu, rss, swept = bench.nightowl_sweep(fleet, inventory, forks, out, workers, args.code, history)
        kinds = sent_bytes(out / "bundles", len(names))
        kb, kernel_kb = sum(kinds.values()), kinds.get("kernel-log", 0.0)
        print(
            f"  round {round_ + 1}: KB per live host by kind: "
            + ", ".join(f"{k} {v:.1f}" for k, v in sorted(kinds.items()))
        )
        wrong = bench.verdict_errors(swept, set(dead))
        for line in wrong[:2]:
            print(f"  round {round_ + 1} forks {forks} wrong: {line}")
        rounds.append(
            {"bare": bare_wall, "wall": wall, "cpu": cpu / len(names), "rss": rss, "wrong": len(wrong)}
            | {"kb": kb, "kernel_kb": kernel_kb, "smi_kb": kinds.get("nvidia-smi", 0.0)}
        )
        shutil.rmtree(out, ignore_errors=True)
        grow_logs(fleet, names, round_ + 1)
        vary_readings(fleet, names, round_ + 1)
    return [_row("first", rounds[:1], run, forks, workers)] + (
        [_row("steady", rounds[1:], run, forks, workers)] if len(rounds) > 1 else []
    )


def _row(label: str, rounds: list[dict[str, Any]], run: FleetRun, forks: int, workers: int | None) -> str:
    def median(key: str) -> float:
        return median_of(rounds, key)

    bare, wall = median("bare"), median("wall")
    return (
        f"| {label} | {run.hosts_cell} | {forks} | {workers or 'default'} | {bare:.2f} "
        f"| {wall:.2f} | {wall / bare:.2f}x | {', '.join(str(r['wrong']) for r in rounds)} "
        f"| {median('cpu') * 1000:.0f} | {median('kb'):.1f} | {median('kernel_kb'):.1f} | {median('smi_kb'):.1f} "
        f"| {max(r['rss'] for r in rounds):.0f} |"
    )


if __name__ == "__main__":  # pragma: no cover - run through bench/sweep.py --steady
    raise SystemExit(os.EX_USAGE)
