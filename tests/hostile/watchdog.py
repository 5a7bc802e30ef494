"""A watchdog for hostile-input tests: a quadratic path fails the test instead of hanging the suite.

The limit is far above the linear cost (seconds against hours), so it asserts termination, not speed.
"""

from __future__ import annotations

import signal
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType

LIMIT_SECONDS = 60


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
