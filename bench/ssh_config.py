"""ssh_config resolution benchmark: an inventory of N hosts resolved through an N-block ~/.ssh/config.

Writes a config shaped like a real fleet's (one `Host` block per node with HostName, User, Port and
IdentityFile, a few wildcard blocks, an `Include` of a conf.d folder, and `Host *` last) and an
inventory naming every node by its alias, then times `load_inventory` (every host spec resolved,
jump hosts included) from a cold cache. Targets: 1,000 hosts under 1 s, 10,000 under 5 s.
`--paramiko` also times paramiko's SSHConfig.lookup per host (what nightowl used before) for comparison.

    .venv/bin/python bench/ssh_config.py [--hosts 1000 10000] [--paramiko]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def write_fleet(folder: Path, hosts: int) -> tuple[Path, Path]:
    (folder / "conf.d").mkdir()
    (folder / "conf.d" / "10-bastion.conf").write_text("Host bastion\n  HostName 10.255.0.1\n  User jump\n")
    lines = [f"Include {folder}/conf.d/*.conf", "Host *.mgmt", "  User admin"]
    for n in range(hosts):
        lines += [
            f"Host gpu-{n:05d}",
            f"  HostName 10.{n // 65536}.{n // 256 % 256}.{n % 256}",
            "  User root",
            f"  Port {22 if n % 2 else 2222}",
            "  IdentityFile ~/.ssh/fleet_ed25519",
        ]
        if n % 100 == 0:
            lines.append("  ProxyJump bastion")
    lines += ["Host gpu-0000?", "  LogLevel ERROR", "Host *", "  ServerAliveInterval 30", "  User nobody"]
    config = folder / "config"
    config.write_text("\n".join(lines) + "\n")
    inventory = folder / "inventory.yaml"
    inventory.write_text("hosts:\n" + "".join(f"  - gpu-{n:05d}\n" for n in range(hosts)))
    return config, inventory


def time_nightowl(config: Path, inventory: Path) -> tuple[float, int]:
    from nightowl.fleet.inventory import load_inventory
    from nightowl.transports import ssh_config

    ssh_config.clear_cache()
    started = time.perf_counter()
    hosts = load_inventory(inventory, config)
    return time.perf_counter() - started, len(hosts)


def time_paramiko(config: Path, hosts: int) -> float:
    import paramiko

    started = time.perf_counter()
    parsed = paramiko.SSHConfig.from_path(str(config))
    for n in range(hosts):
        parsed.lookup(f"gpu-{n:05d}")
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--hosts", type=int, nargs="+", default=[1000, 10000])
    parser.add_argument("--paramiko", action="store_true", help="also time paramiko's lookup (slow past 1,000)")
    args = parser.parse_args()
    for count in args.hosts:
        with tempfile.TemporaryDirectory() as tmp:
            config, inventory = write_fleet(Path(tmp), count)
            seconds, resolved = time_nightowl(config, inventory)
            line = f"{count:>6} hosts, {count + 5}-block config: resolved {resolved} in {seconds:.3f} s"
            line += f" ({seconds / count * 1e6:.0f} us/host)"
            if args.paramiko:
                line += f"; paramiko SSHConfig.lookup: {time_paramiko(config, count):.3f} s"
            print(line)


if __name__ == "__main__":
    main()
