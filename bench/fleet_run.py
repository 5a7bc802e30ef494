"""What every row of bench/sweep.py runs over: the parsed arguments, the loopback fleet, a scratch folder, the
live and the refusing hosts, and the inventory order that spreads them (bench/sweep.py ``run_rounds``)."""

from __future__ import annotations

import argparse
import statistics
from dataclasses import dataclass
from pathlib import Path
from typing import Any

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

    @property
    def hosts_cell(self) -> str:
        """A table row's hosts: ``inventory (live, refused)``."""
        return f"{len(self.inventory)} ({len(self.names)}, {len(self.dead)})"


def median_of(rounds: list[dict[str, Any]], key: str) -> float:
    """The median of one measure over a row's rounds."""
    return statistics.median(r[key] for r in rounds)
