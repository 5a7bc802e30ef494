"""Sweep benchmark: nightowl's node-health sweep against a bare paramiko thread pool.

Starts a 64-host loopback fleet of real OpenSSH servers (tests/ssh/fleet.py) whose `nvidia-smi`
stand-in takes 0.4 s, then times, in one run:
  (a) a bare paramiko thread pool: per host one connection, the node-health commands on
      concurrent channels, outputs read and dropped;
  (b) `nightowl sweep --runbook node-health` over the same fleet (parsing, deciding, bundle).
Prints both wall times, the ratio (target: nightowl within 1.2x) and nightowl's CPU time per host.
On a 2-core machine sshd's crypto shares the cores with the client, so the ratio is what counts.

    .venv/bin/python bench/sweep.py [--hosts 64] [--forks 64] [--repeat 3]
"""

from __future__ import annotations

import argparse
import shlex
import statistics
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.ssh.fleet import Fleet  # noqa: E402

COMMANDS = [  # what node-health runs on a healthy node (first alternative of each collector)
    ("nvidia-smi", "-q", "-x"),
    ("journalctl", "-k", "-b", "--no-pager", "-o", "short-iso"),
    ("nvidia-smi", "nvlink", "-s"),
]


def bare_pool(fleet: Fleet, names: list[str], forks: int) -> float:
    import paramiko

    def one(name: str) -> None:
        ip, port = fleet.addresses[name]
        client = paramiko.SSHClient()
        client.load_host_keys(str(fleet.known_hosts))
        client.set_missing_host_key_policy(paramiko.RejectPolicy())
        client.connect(
            ip,
            port=port,
            username=fleet.user,
            key_filename=str(fleet.client_key),
            allow_agent=False,
            look_for_keys=False,
            timeout=10,
        )

        def run(argv: tuple[str, ...]) -> None:
            _, stdout, stderr = client.exec_command(shlex.join(argv), timeout=20)
            stdout.read()
            stderr.read()
            stdout.channel.recv_exit_status()

        with ThreadPoolExecutor(max_workers=len(COMMANDS)) as pool:
            list(pool.map(run, COMMANDS))
        client.close()

    started = time.monotonic()
    with ThreadPoolExecutor(max_workers=forks) as pool:
        list(pool.map(one, names))
    return time.monotonic() - started


def nightowl_sweep(fleet: Fleet, names: list[str], forks: int, out: Path) -> tuple[float, float, int]:
    from click.testing import CliRunner

    from nightowl.cli.main import main

    inventory = fleet.write_inventory(out / "hosts.yaml", names)
    args = [
        "sweep",
        "--inventory",
        str(inventory),
        "--known-hosts",
        str(fleet.known_hosts),
        "--ssh-config",
        str(fleet.ssh_config),
        "--identity",
        str(fleet.client_key),
        "--forks",
        str(forks),
        "--format",
        "json",
        "--out",
        str(out / "bundles"),
    ]
    cpu0, started = time.process_time(), time.monotonic()
    result = CliRunner().invoke(main, args)
    wall, cpu = time.monotonic() - started, time.process_time() - cpu0
    import json

    hosts = json.loads(result.output)["hosts"]
    healthy = sum(1 for h in hosts if (h.get("verdict") or {}).get("id") == "healthy")
    return wall, cpu, healthy


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hosts", type=int, default=64)
    parser.add_argument("--forks", type=int, default=64)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    recorded = ROOT / "fixtures" / "hosts" / "healthy-l40s"
    names = [f"node-{i:03d}" for i in range(args.hosts)]
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        with Fleet(root / "fleet", dict.fromkeys(names, recorded)) as fleet:
            for name in names:
                fleet.set_output(name, "nvidia-smi", sleep=0.4)
            bare_times, sweep_times, cpu_per_host = [], [], []
            for round_ in range(args.repeat):
                bare_times.append(bare_pool(fleet, names, args.forks))
                out = root / f"run-{round_}"
                out.mkdir()
                wall, cpu, healthy = nightowl_sweep(fleet, names, args.forks, out)
                assert healthy == len(names), f"only {healthy}/{len(names)} hosts healthy"
                sweep_times.append(wall)
                cpu_per_host.append(cpu / len(names))
    bare, swept = statistics.median(bare_times), statistics.median(sweep_times)
    print(f"hosts={args.hosts} forks={args.forks} repeat={args.repeat} (medians)")
    print(f"bare paramiko pool : {bare:.2f} s  (runs: {', '.join(f'{t:.2f}' for t in bare_times)})")
    print(f"nightowl sweep     : {swept:.2f} s  (runs: {', '.join(f'{t:.2f}' for t in sweep_times)})")
    print(f"ratio              : {swept / bare:.2f}x  (target <= 1.2x)")
    print(f"nightowl CPU / host: {statistics.median(cpu_per_host) * 1000:.1f} ms")


if __name__ == "__main__":
    main()
