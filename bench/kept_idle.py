"""Idle kept connections: the sweeping process's CPU while `sweep --every` waits between rounds.

Opens N real SSH connections (tests/ssh/fleet.py: OpenSSH on loopback) as nightowl's SSHTransport opens them,
hands each to ``keep_alive`` as the sweep's keeper does (transports/kept.py), or not (`--paramiko-default`: the
reader thread looking up every 0.1 s, as before), waits, and prints the CPU this process used while every
connection sat idle.

    .venv/bin/python bench/kept_idle.py [--hosts 32] [--seconds 10] [--paramiko-default]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from nightowl.transports.hostspec import parse_host_spec  # noqa: E402
from nightowl.transports.kept import KEEPALIVE_SECONDS  # noqa: E402
from nightowl.transports.ssh import SSHTransport  # noqa: E402
from tests.ssh.fleet import Fleet  # noqa: E402


def idle_cpu(hosts: int, seconds: float, kept: bool) -> float:
    """CPU seconds this process used over ``seconds`` with ``hosts`` open, idle connections."""
    names = [f"idle-{n:04d}" for n in range(hosts)]
    recorded = ROOT / "fixtures" / "hosts" / "healthy-l40s"
    with tempfile.TemporaryDirectory() as folder, Fleet(Path(folder), dict.fromkeys(names, recorded)) as fleet:
        transports = [SSHTransport(parse_host_spec(fleet.spec(n), fleet.ssh_config), fleet.options()) for n in names]
        for transport in transports:
            transport.connect()
            if kept:
                transport.keep_alive(KEEPALIVE_SECONDS)
        time.sleep(1.5)  # past every handshake's last packets
        started = time.process_time()
        time.sleep(seconds)
        used = time.process_time() - started
        for transport in transports:
            transport.close()
    return used


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hosts", type=int, default=32)
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--paramiko-default", action="store_true", help="no keep_alive: paramiko's 0.1 s looks")
    args = parser.parse_args()
    used = idle_cpu(args.hosts, args.seconds, not args.paramiko_default)
    per = used / args.seconds / args.hosts * 1000
    form = "paramiko's default" if args.paramiko_default else "kept (keep_alive)"
    print(f"{args.hosts} idle connections, {form}: {used * 1000:.0f} ms CPU in {args.seconds:g} s", end=" ")
    print(f"({per:.2f} ms a second each)")


if __name__ == "__main__":
    main()
