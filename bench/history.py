"""History store benchmark: size and write cost per run for N hosts checked hourly for D days.

What each run pays when its bundle completes (``nightowl.history.record_bundle``): reading the bundle's
recorded outputs again with the run's parsers, then one ``BEGIN IMMEDIATE`` transaction. Measured in
three steps, each printed:

1. ``record_bundle`` on a real bundle (``triage xid --replay`` of fixtures/hosts/xid79-previous-boot-same-gpu),
   repeated: the whole per-run cost, parsing included.
2. A sample fleet (``--sample-hosts``, default 20) written through ``store.write`` for every hourly run
   of ``--days`` (default 30): 8 GPUs per host (a row only when a GPU's state changes), a boot every
   ``--boot-days`` (7) days, and an Xid on ``--incident-rate`` (2%) of a host's hours; every run of a
   boot sees that boot's events again (upserts, as a live log does). Wall time per write and file size.
3. The sample copied in SQL until it is ``--hosts`` (1,000) hosts, then more writes timed on that
   full-size store: the size is measured at full scale, not extrapolated.

    .venv/bin/python bench/history.py [--hosts 1000] [--days 30] [--sample-hosts 20]
"""

from __future__ import annotations

import argparse
import json
import random
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

GPUS = 8
COUNTERS = {
    "ecc": {
        "volatile": {"dram_correctable": 0, "dram_uncorrectable": 0, "sram_correctable": 0, "sram_uncorrectable": 0},
        "aggregate": {"dram_correctable": 0, "dram_uncorrectable": 0, "sram_correctable": 0, "sram_uncorrectable": 0},
    },
    "remapped_rows": {"correctable": 0, "uncorrectable": 0, "pending": False, "failure": False},
    "retired_pages": None,
}


def real_bundle(folder: Path) -> Path:
    hosts = ROOT / "fixtures" / "hosts" / "xid79-previous-boot-same-gpu"
    out = subprocess.run(
        [
            str(Path(sys.executable).parent / "nightowl"),
            "triage",
            "xid",
            "--replay",
            str(hosts),
            "--history",
            "off",
            "--out",
            str(folder),
            "--format",
            "json",
        ],  # fmt: skip
        capture_output=True,
        text=True,
        check=False,
    )
    return Path(json.loads(out.stdout)["bundle"])


def step_real(repeat: int) -> float:
    from nightowl import history

    with tempfile.TemporaryDirectory() as tmp:
        bundle = real_bundle(Path(tmp))
        db = Path(tmp) / "h.sqlite3"
        history.record_bundle(bundle, db)  # schema and first rows
        times = []
        for _ in range(repeat):
            started = time.perf_counter()
            history.record_bundle(bundle, db)
            times.append(time.perf_counter() - started)
    return statistics.median(times)


def node_name(number: int) -> str:
    """The sample fleet's host names (``fleet_records`` writes them, ``read_cost`` reads them back)."""
    return f"node-{number:04d}"


def fleet_records(hosts: int, days: int, boot_days: int, incident_rate: float, seed: int = 29) -> Any:
    """Every hourly record of the sample fleet, in time order."""
    from nightowl.collectors.gpu.history_rows import event_row

    rng = random.Random(seed)
    start = 1_780_000_000.0
    boot_events: dict[int, list[dict[str, Any]]] = {h: [] for h in range(hosts)}
    boot_of = dict.fromkeys(range(hosts), 0)
    for hour in range(days * 24):
        now = start + hour * 3600
        for h in range(hosts):
            name = node_name(h)
            if hour and hour % (boot_days * 24) == (h * 7) % (boot_days * 24):  # reboots spread over the fleet
                boot_of[h] += 1
                boot_events[h] = []
            if rng.random() < incident_rate:
                gpu = rng.randrange(GPUS)
                moment = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(now - rng.randrange(3600)))
                code = rng.choice([13, 31, 43, 48, 63, 79, 94, 119])
                pci = f"0000:{0x18 + gpu * 16:02x}:00"
                event = {"kind": "xid", "code": code, "pci": pci, "time": moment, "first_time": moment,
                         "last_time": moment, "count": 1, "text": f"Xid {code} on GPU {gpu}"}  # fmt: skip
                boot_events[h].append(event_row(name, event, f"boot-{h}-{boot_of[h]}"))
            action = "none" if not boot_events[h] else "reset-gpu"
            gpus = [
                {
                    "pci": f"0000:{0x18 + g * 16:02x}:00",
                    "uuid": f"GPU-{h:04d}-{g}",
                    "serial": f"{h:06d}{g}",
                    "name": "NVIDIA H100 80GB HBM3",
                    "counters": COUNTERS,
                }  # fmt: skip
                for g in range(GPUS)
            ]
            yield {
                "bundle_id": f"{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime(now))}-node-health-{h:06x}",
                "bundle_sha256": f"{rng.getrandbits(256):064x}",
                "runbook": "node-health",
                "started": now,
                "runs": [
                    {
                        "host": name,
                        "status": "ok",
                        "verdict_id": "healthy" if action == "none" else "xid-reset-gpu",
                        "severity": "ok" if action == "none" else "critical",
                        "action": action,
                        "gpus": [],
                        "boot_id": f"boot-{h}-{boot_of[h]}",
                        "boots": [],
                        "events": list(boot_events[h]),
                        "gpu_list": gpus,
                    }  # fmt: skip
                ],
            }


def scale_up(db: Path, factor: int) -> None:
    """Copy every host's rows ``factor - 1`` more times under new host names (SQL, one transaction)."""
    conn = sqlite3.connect(db)
    with conn:
        for k in range(1, factor):
            conn.execute(
                "INSERT INTO runs SELECT bundle_id || ?1, host || ?1, bundle_sha256, runbook, started, boot_id, status,"
                " verdict_id, severity, action, gpus, recorded FROM runs WHERE host NOT LIKE '%~%'",
                (f"~{k}",),
            )
            conn.execute(
                "INSERT INTO gpus SELECT host || ?1, pci, state, uuid, serial, name, counters, first_bundle,"
                " last_bundle, first_seen, last_seen FROM gpus WHERE host NOT LIKE '%~%'",
                (f"~{k}",),
            )
            conn.execute(
                "INSERT INTO events SELECT key || ?1, host || ?1, pci, uuid, kind, code, boot_id, first_time,"
                " last_time, first_ts, last_ts, count, text, bundle_id, bundle_sha256, monotonic FROM events"
                " WHERE host NOT LIKE '%~%'",
                (f"~{k}",),
            )
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()


def write_cost(db: Path, args: argparse.Namespace, runs: int = 40) -> float:
    """Median ms of ``store.write`` (the run path: its own connection) for one more hour of the sample."""
    from nightowl.history import store

    times = []
    for i, record in enumerate(fleet_records(args.sample_hosts, 1, args.boot_days, args.incident_rate, seed=30)):
        if i == runs:
            break
        record["started"] += args.days * 86400
        record["bundle_id"] += f"-late{time.monotonic_ns()}"
        started = time.perf_counter()
        store.write(db, record)
        times.append(time.perf_counter() - started)
    return statistics.median(times) * 1000


def read_cost(db: Path, hosts: int) -> float:
    """Median ms of what each run of a host reads of its past (``history.host_history``: its events, its last five
    runs and the count of those that needed action), on the kept read connections a sweep uses."""
    from nightowl.history import host_history

    names = [node_name(number) for number in range(hosts)]
    if not host_history(names[0], db)["runs"]:  # the kept connection opened, and a host that is there read
        raise SystemExit(f"read_cost: {names[0]} has no runs in {db}: the names are not the fleet's")
    times = []
    for name in names:
        started = time.perf_counter()
        host_history(name, db)
        times.append(time.perf_counter() - started)
    return statistics.median(times) * 1000


def size_of(db: Path) -> int:
    return sum(p.stat().st_size for p in db.parent.glob(db.name + "*"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hosts", type=int, default=1000)
    parser.add_argument("--days", type=int, default=30)
    parser.add_argument("--sample-hosts", type=int, default=20)
    parser.add_argument("--boot-days", type=int, default=7)
    parser.add_argument("--incident-rate", type=float, default=0.02)
    parser.add_argument("--repeat", type=int, default=50)
    args = parser.parse_args()
    from nightowl.history import store

    per_bundle = step_real(args.repeat)
    print(f"record_bundle on a real bundle (parse + write), median of {args.repeat}: {per_bundle * 1000:.1f} ms")

    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "h.sqlite3"
        conn = store.connect(db)  # the fill: one long-lived writer (write_on), timed per run all the same
        times: list[float] = []
        for record in fleet_records(args.sample_hosts, args.days, args.boot_days, args.incident_rate):
            started = time.perf_counter()
            store.write_on(conn, record)
            times.append(time.perf_counter() - started)
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        counts = {t: conn.execute(f"SELECT count(*) FROM {t}").fetchone()[0] for t in ("runs", "gpus", "events")}
        conn.close()
        sample_size = size_of(db)
        runs = len(times)
        print(f"sample: {args.sample_hosts} hosts x {args.days} days hourly = {runs} runs; rows {counts}")
        first, last = times[: runs // 10], times[-runs // 10 :]
        print(
            f"  transaction per run (open connection): median {statistics.median(times) * 1000:.2f} ms, p99 "
            f"{sorted(times)[int(runs * 0.99)] * 1000:.2f} ms (first tenth {statistics.median(first) * 1000:.2f} ms, "
            f"last tenth {statistics.median(last) * 1000:.2f} ms)"
        )
        print(f"  store.write per run (open, write, close, as a run does): {write_cost(db, args):.2f} ms")
        print(f"  size {sample_size / 1e6:.1f} MB = {sample_size / runs:.0f} bytes per run")

        factor = max(1, args.hosts // args.sample_hosts)
        scale_up(db, factor)
        full_size = size_of(db)
        full_runs = runs * factor
        per_write = write_cost(db, args)
        print(f"full: {args.sample_hosts * factor} hosts x {args.days} days = {full_runs} runs (sample copied in SQL)")
        print(f"  size {full_size / 1e6:.0f} MB = {full_size / full_runs:.0f} bytes per run")
        print(f"  store.write per run into the full store (open, write, close): {per_write:.2f} ms")
        per_read = read_cost(db, args.sample_hosts)
        print(f"  a host's past as each of its runs reads it (history.host_history): {per_read:.2f} ms")
        print(
            f"  a central store for the fleet: {full_runs / (args.days * 86400):.2f} writes/s needed, "
            f"{full_runs * per_write / 1000 / (args.days * 86400) * 100:.2f}% of one writer's time"
        )


if __name__ == "__main__":
    main()
