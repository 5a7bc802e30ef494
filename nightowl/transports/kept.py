"""Connections kept between the rounds of a repeated sweep (`nightowl sweep --every`).

A one-shot sweep pays, for every host and every round, the SSH handshake (key exchange, host-key check,
authentication) on both ends: most of a steady round's client CPU once only new log lines are read
(docs/reference.md#incremental-reads). A sweep that repeats keeps each host's connection open instead, as
node-problem-detector keeps its log open: the engine's walk ends with ``close()``, which here only hands the
connection back to the keeper; the next round's ``connect()`` takes it again when it is still alive, and
opens a new one (through that round's opener, so through its dialer) when it is not. ``close_all`` ends
them when the sweep stops.

The keeper knows nothing of SSH: a transport whose connection can tell that it is gone (``alive``) is
asked; any other (local, replay) is simply opened anew every round.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from nightowl.transports.base import CommandResult, Transport


class KeptConnections:
    """Each host's open transport between rounds, by host name; thread-safe (a round runs hosts at once)."""

    def __init__(self) -> None:
        self._open: dict[str, Any] = {}
        self._lock = threading.Lock()
        self.reused = 0  # connections taken again, over the keeper's life
        self.opened = 0  # connections opened (first rounds, and a host whose connection was lost)

    def alive(self, name: str) -> bool:
        """Whether ``name`` has a connection kept that still answers (a lost one is dropped here)."""
        with self._lock:
            transport = self._open.get(name)
        if transport is None:
            return False
        if _alive(transport):
            return True
        self._drop(name, transport)
        return False

    def openers(self, transports: Mapping[str, Callable[[], Any]]) -> dict[str, Callable[[], Any]]:
        """``transports`` (name -> opener) with each opener handing out a kept connection when one is alive."""
        return {name: _KeptOpener(self, name, opener) for name, opener in transports.items()}

    def take(self, name: str, opener: Callable[[], Any]) -> Any:
        """The kept transport of ``name`` when alive (counted as reused), else a fresh one from ``opener``
        (counted when it connects)."""
        if self.alive(name):
            with self._lock:
                self.reused += 1
                return self._open[name]
        return opener()

    def keep(self, name: str, transport: Any) -> None:
        """``transport`` is ``name``'s connection from now on (a new one replaces and closes an older one)."""
        with self._lock:
            older = self._open.get(name)
            self._open[name] = transport
            self.opened += 1
        if older is not None and older is not transport:
            _close(older)

    def _drop(self, name: str, transport: Any) -> None:
        with self._lock:
            if self._open.get(name) is transport:
                del self._open[name]
        _close(transport)

    def count(self) -> int:
        with self._lock:
            return len(self._open)

    def close_all(self) -> None:
        """End every kept connection (the sweep stops)."""
        with self._lock:
            kept, self._open = list(self._open.values()), {}
        for transport in kept:
            _close(transport)


class _KeptOpener:
    """An opener whose transport is the kept one (see ``KeptTransport``)."""

    def __init__(self, keeper: KeptConnections, name: str, opener: Callable[[], Any]) -> None:
        self.keeper, self.name, self.opener = keeper, name, opener

    def __call__(self) -> Transport:
        return KeptTransport(self.keeper, self.name, self.keeper.take(self.name, self.opener))


class KeptTransport:
    """A host's transport for one round: the connection is the keeper's, so ``close`` hands it back instead of
    ending it (``end`` ends it: an interrupt, a transport that broke). Everything else is the transport's own."""

    def __init__(self, keeper: KeptConnections, name: str, inner: Any) -> None:
        self._keeper, self._name, self.inner = keeper, name, inner
        self.host = getattr(inner, "host", name)
        self._unanswered = False  # a command got no exit status back: the connection itself may be stuck

    def __getattr__(self, attribute: str) -> Any:  # recorded, spec, options...: the transport's own
        return getattr(self.inner, attribute)

    def connect(self) -> None:
        if _alive(self.inner):
            return
        self.inner.connect()  # raises TransportError: the host is unreachable this round, nothing is kept
        if callable(getattr(self.inner, "alive", None)):  # only a connection that can tell it is gone is kept
            self._keeper.keep(self._name, self.inner)

    def run(self, argv: Sequence[str], timeout: float, kind: str | None = None) -> CommandResult:
        result: CommandResult = self.inner.run(argv, timeout, kind)
        self._unanswered = self._unanswered or result.rc is None
        return result

    def close(self) -> None:
        """The round is done with the host: a connection still alive stays for the next round, unless a command
        got no exit status back over it (nightowl's own deadline, a channel that failed): a connection that
        still looks open but stopped answering (a silent network) is dialed anew next round, not trusted again."""
        if self._unanswered or not _alive(self.inner):
            self._keeper._drop(self._name, self.inner)  # noqa: SLF001 - the keeper's own bookkeeping

    def end(self) -> None:
        self._keeper._drop(self._name, self.inner)  # noqa: SLF001


def _alive(transport: Any) -> bool:
    alive = getattr(transport, "alive", None)
    return bool(alive()) if callable(alive) else False


def _close(transport: Any) -> None:
    with contextlib.suppress(Exception):  # a connection already gone has nothing to close
        transport.close()
