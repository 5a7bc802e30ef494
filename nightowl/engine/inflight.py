"""Work in progress an interrupt waits for (moved out of nightowl/engine/runner.py, which may not grow)."""

from __future__ import annotations

import threading


class InFlight:
    """A count of work in progress that an interrupt waits to drain, so the partial bundle's manifest
    lists the command a signal cut (with its elapsed time) instead of losing it to the race."""

    def __init__(self) -> None:
        self._count = 0
        self._idle = threading.Condition()

    def __enter__(self) -> InFlight:
        with self._idle:
            self._count += 1
        return self

    def __exit__(self, *_exc: object) -> None:
        with self._idle:
            self._count -= 1
            if self._count <= 0:
                self._idle.notify_all()

    def wait_idle(self, timeout: float) -> bool:
        """Wait until nothing is in flight or ``timeout`` passes; True when idle."""
        with self._idle:
            return self._idle.wait_for(lambda: self._count <= 0, timeout)
