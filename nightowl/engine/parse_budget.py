"""A deadline and a size bound for parsing one output (issue: huge outputs parsed with no deadline).

A 42 MB ``/metrics`` or a document of 300,000 nested tags must not turn a host's 5-second deadline into
half a minute and a gigabyte. Two bounds, both recorded rather than raised:

* size: a parser sees at most ``PARSE_INPUT_CAP`` bytes, the head and tail of a bigger output on line
  boundaries (as a transport's cap keeps them), and the cut is counted like any other truncation;
* time: a watchdog thread raises ``ParseBudgetExceeded`` inside the parsing thread once its budget is
  spent (CPython's per-thread asynchronous exception, checked between bytecodes; sent again until the
  parse ends), so the parse ends as a recorded parse error, never a hang.
"""

from __future__ import annotations

import ctypes
import heapq
import itertools
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TypeVar

from nightowl.transports.capped import CappedOutput

T = TypeVar("T")

# What one parser may be handed: the SSH transport's own cap, so a local 64 MiB output costs no more.
PARSE_INPUT_CAP = 8 * 1024 * 1024
RESEND_SECONDS = 0.2


class ParseBudgetExceeded(BaseException):
    """Raised inside a parse that outlived its budget. A BaseException, as KeyboardInterrupt is: parsers
    catch Exception around odd lines to record them as warnings, and must not swallow this."""


def bounded_input(text: str, cap: int = PARSE_INPUT_CAP) -> tuple[str, int]:
    """``text`` itself when it fits in ``cap`` bytes, else its head and tail: (text, bytes cut)."""
    if len(text) * 4 <= cap:  # at most 4 bytes a character: fits without encoding it
        return text, 0
    data = text.encode("utf-8", errors="surrogateescape")
    if len(data) <= cap:
        return text, 0
    kept = CappedOutput(cap)
    kept.add(data)
    body, cut, _ = kept.value()
    return body.decode("utf-8", errors="replace"), cut


def within(seconds: float, parse: Callable[[], T]) -> T:
    """``parse()``, stopped with ParseBudgetExceeded once it has run ``seconds``."""
    if seconds <= 0:
        raise ParseBudgetExceeded("no time left in the host's deadline to parse")
    ticket = _WATCHDOG.arm(threading.get_ident(), time.monotonic() + seconds)
    try:
        return parse()
    except ParseBudgetExceeded:
        raise ParseBudgetExceeded(f"parsing took more than {seconds:.1f} s (the host's deadline)") from None
    finally:
        _WATCHDOG.disarm(ticket)


@dataclass(order=True)
class _Ticket:
    deadline: float
    number: int
    thread: int = field(compare=False)
    done: bool = field(default=False, compare=False)
    fired: bool = field(default=False, compare=False)


class _Watchdog:
    """One daemon thread for every parse in the process, started on first use."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._wake = threading.Condition(self._lock)
        self._heap: list[_Ticket] = []
        self._numbers = itertools.count()
        self._thread: threading.Thread | None = None

    def arm(self, thread: int, deadline: float) -> _Ticket:
        ticket = _Ticket(deadline, next(self._numbers), thread)
        with self._lock:
            heapq.heappush(self._heap, ticket)
            if self._thread is None:
                self._thread = threading.Thread(target=self._watch, name="parse-watchdog", daemon=True)
                self._thread.start()
            if self._heap[0] is ticket:  # the watchdog sleeps until the first deadline: wake it only for an earlier one
                self._wake.notify()
        return ticket

    def disarm(self, ticket: _Ticket) -> None:
        with self._lock:
            ticket.done = True
            if ticket.fired:  # an exception sent but not raised yet must not surface after the parse
                _send(ticket.thread, None)

    def _watch(self) -> None:
        with self._lock:
            while True:
                while self._heap and self._heap[0].done:
                    heapq.heappop(self._heap)
                if not self._heap:
                    self._wake.wait()
                    continue
                first = self._heap[0]
                left = first.deadline - time.monotonic()
                if left > 0:
                    self._wake.wait(left)
                    continue
                heapq.heappop(self._heap)
                first.fired = True
                _send(first.thread, ParseBudgetExceeded)
                # Sent again until the parse ends: a bare ``except`` in a parser may have swallowed it.
                first.deadline = time.monotonic() + RESEND_SECONDS
                heapq.heappush(self._heap, first)


def _send(thread: int, exception: type[BaseException] | None) -> None:
    """Raise ``exception`` in ``thread`` at its next bytecode (None, sent as NULL, withdraws one not raised
    yet)."""
    target = ctypes.py_object(exception) if exception is not None else None
    ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(thread), target)


_WATCHDOG = _Watchdog()
