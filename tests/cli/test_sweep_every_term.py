"""SIGTERM between a round's run and the next round ends `sweep --every` with 143, even where it lands in code that
turns its own failures into warnings (a report's writer: ``except Exception``)."""

from __future__ import annotations

import contextlib
import os
import signal
from typing import Any

from nightowl.cli import sweep_every
from nightowl.cli.exit import ExitStatus


def test_a_stop_while_a_report_is_written_ends_the_sweep() -> None:
    rounds: list[int] = []

    def sweep_round(*_args: Any) -> ExitStatus:
        rounds.append(1)
        with contextlib.suppress(Exception):  # a report's writer, after the round's run, that warns of its failures
            os.kill(os.getpid(), signal.SIGTERM)
        return ExitStatus.OK

    status = sweep_every.sweep_every(sweep_every.Rounds(30.0, 3), lambda keeper: ({}, None, {}), sweep_round)
    assert status == ExitStatus.TERMINATED and rounds == [1]
