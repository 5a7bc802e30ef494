"""Watchdogs for hostile-input tests: a quadratic path fails the test instead of hanging the suite.

``watchdog`` (SIGALRM) stops Python code; ``finishes_within`` runs the call in a forked child and kills it
at the deadline, so it also stops a regular expression backtracking inside the C engine, where no signal
handler runs until the search returns. Limits are far above the linear cost (seconds against minutes or
hours), so they assert termination in linear time, not speed on a loaded machine.
"""

from __future__ import annotations

import multiprocessing
import signal
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from types import FrameType
from typing import Any

LIMIT_SECONDS = 60
# A linear read of the hostile lines below takes milliseconds; a quadratic one, minutes.
LINEAR_SECONDS = 10.0


class Hung(AssertionError):
    pass


@contextmanager
def watchdog(seconds: int = LIMIT_SECONDS) -> Iterator[None]:
    def expire(signum: int, frame: FrameType | None) -> None:
        raise Hung(f"still running after {seconds} s: not linear or not bounded")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


def finishes_within(seconds: float, function: Callable[..., Any], *args: Any) -> None:
    """Call ``function(*args)`` in a forked child; raise Hung if it is still running after ``seconds``
    (the child is killed), AssertionError with the child's error if it raised."""
    context = multiprocessing.get_context("fork")
    receive, send = context.Pipe(duplex=False)

    def run() -> None:
        try:
            function(*args)
        except BaseException as exc:  # noqa: BLE001 - reported to the parent, which fails the test
            send.send(f"{type(exc).__name__}: {exc}")
        else:
            send.send(None)

    child = context.Process(target=run, daemon=True)
    child.start()
    child.join(seconds)
    if child.is_alive():
        child.kill()
        child.join()
        raise Hung(f"still running after {seconds} s: not linear or not bounded")
    error = receive.recv() if receive.poll() else f"the child ended without a result (exit {child.exitcode})"
    if error is not None:
        raise AssertionError(error)
