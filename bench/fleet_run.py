"""What every row of bench/sweep.py runs over: the parsed arguments, the loopback fleet, a scratch folder, the
live and the refusing hosts, and the inventory order that spreads them (bench/sweep.py ``run_rounds``)."""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path

from tests.ssh.fleet import Fleet


@dataclass(frozen=True)
class FleetRun:
    args: argparse.Namespace
    fleet: Fleet
    root: Path
    names: list[str]  # the live hosts
    dead: list[str]  # addresses that refuse the connection
    inventory: list[str]  # both, spread through one another

    @property
    def pool_hosts(self) -> list[str]:
        """What the bare pool dials: every inventory host where some are dead (it cannot know which before
        dialing), else the live ones."""
        return self.inventory if self.dead else self.names
