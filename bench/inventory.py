"""Inventory loading benchmark: `load_inventory` on an N-host nightowl YAML with an empty ssh_config.

What `nightowl sweep --inventory hosts.yaml --ssh-config CONFIG` pays before it connects anywhere:
the YAML read (with the line of every key, for error messages), each host mapping checked and each
address resolved through the (empty) ssh config. Hosts are written one flow mapping a line,
`  - {name: node-0001, address: 127.0.1.3, port: 22, user: root}`. Times are CPU seconds
(time.process_time), the best of --repeat runs, so other load on the machine barely moves them.
Targets: 1,000 hosts well under 0.1 s, 10,000 under 1 s.

    .venv/bin/python bench/inventory.py [--hosts 1000 10000] [--repeat 5]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def write_inventory(folder: Path, hosts: int) -> tuple[Path, Path]:
    config = folder / "ssh_config"
    config.write_text("")
    inventory = folder / "hosts.yaml"
    lines = [
        f"  - {{name: node-{n:04d}, address: 127.{n // 65536 + 1}.{n // 256 % 256}.{n % 256}, port: 22, user: root}}\n"
        for n in range(hosts)
    ]
    inventory.write_text("hosts:\n" + "".join(lines))
    return config, inventory


def cpu_seconds(config: Path, inventory: Path, repeat: int) -> tuple[float, int]:
    """Best CPU time of ``repeat`` loads, and how many hosts came back."""
    from nightowl.fleet.inventory import load_inventory

    best, count = float("inf"), 0
    for _ in range(repeat):
        started = time.process_time()
        count = len(load_inventory(inventory, config))
        best = min(best, time.process_time() - started)
    return best, count


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--hosts", type=int, nargs="+", default=[1000, 10000])
    parser.add_argument("--repeat", type=int, default=5, help="runs per size; the best is printed")
    args = parser.parse_args()
    for count in args.hosts:
        with tempfile.TemporaryDirectory() as tmp:
            config, inventory = write_inventory(Path(tmp), count)
            seconds, loaded = cpu_seconds(config, inventory, args.repeat)
            print(f"{count:>6} hosts: loaded {loaded} in {seconds:.3f} s CPU ({seconds / count * 1e6:.0f} us/host)")


if __name__ == "__main__":
    main()
