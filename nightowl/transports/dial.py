"""Open the TCP connections of a whole sweep from one thread, and start the hosts that answered first.

A sweep hands hosts to a bounded pool of workers in inventory order. When most of a large inventory
is down, the workers spend their time passing refused hosts from thread to thread (each hand-off waits
for the GIL while SSH key exchanges hold it), and a live host near the end of the inventory starts its
session only after every dead host before it. The dialer instead opens every host's TCP connection
with non-blocking ``connect()`` calls watched by one selector, and yields the host names in the order
they are worth starting: each host as soon as its connection is open, then the hosts whose connection
failed (refused, timed out, not resolvable), which end at once with the dial's own error. The sockets
are handed to the hosts' SSH transports (``SSHTransport(dial=...)``); a host the dialer was not given
(a jump host's targets, ``local``) connects as it always does.

At most ``window`` connections are open and not yet taken by a worker, so a 10,000-host sweep holds
neither 10,000 descriptors nor connections idling past sshd's ``LoginGraceTime``.
"""

from __future__ import annotations

import collections
import errno
import os
import selectors
import socket
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

# Resolving names is blocking (getaddrinfo): a few threads resolve ahead of the dialer so that one slow
# DNS answer does not hold every connection behind it.
RESOLVERS = 8
LOOKAHEAD = 64  # names handed to the resolvers ahead of the dialer
BURST_SECONDS = 0.1  # how long an open connection may wait for the rest of its burst
POLL_SECONDS = 0.05  # how often a dialer waiting for workers to take sockets looks again
# A connection open this long and not yet taken (flow control holding its host back) is closed and the host
# connects anew: sshd drops a connection that has not logged in after LoginGraceTime (120 s by default,
# sshd_config(5)), which must never read as the host being unreachable.
STALE_SECONDS = 60.0

Address = tuple[int, int, int, tuple[object, ...]]  # family, type, proto, sockaddr (as getaddrinfo gives)


class _Dial:
    """One host's connection attempt: its addresses in order, the socket in flight, the outcome."""

    def __init__(self, name: str, addresses: list[Address]) -> None:
        self.name = name
        self.addresses = collections.deque(addresses)
        self.sock: socket.socket | None = None
        self.deadline = 0.0
        self.error: Exception | None = None  # OSError, or what resolving raised (socket.gaierror, UnicodeError)


class Dialer:
    """TCP connections for many ``(hostname, port)`` targets, opened ahead of the hosts' SSH sessions."""

    def __init__(self, targets: Mapping[str, tuple[str, int]], timeout: float, window: int = 128) -> None:
        self.targets = dict(targets)
        self.timeout = timeout
        self.window = max(1, window)
        self._ready: dict[str, socket.socket] = {}  # connected, not yet taken
        self._ready_since: dict[str, float] = {}
        self._failed: dict[str, Exception] = {}
        self._taken: set[str] = set()
        self._lock = threading.Lock()
        self._closed = False

    # -- what workers call ----------------------------------------------------------
    def take(self, name: str) -> socket.socket | None:
        """The host's open connection (blocking, with the connect timeout), once; ``None`` when the dialer
        has nothing for it (not a target, or not dialed yet): the transport then connects by itself.
        Raises what the dial met when the connection could not be opened: an ``OSError``
        (``ConnectionRefusedError``, ``TimeoutError``, ``socket.gaierror`` ...) or a ``UnicodeError`` or
        ``ValueError`` from resolving a malformed name, as ``socket.getaddrinfo`` would have."""
        with self._lock:
            self._taken.add(name)
            sock = self._ready.pop(name, None)
            since = self._ready_since.pop(name, None)
            error = self._failed.pop(name, None)
        if error is not None:
            raise error
        if sock is not None and since is not None and time.monotonic() - since > STALE_SECONDS:
            sock.close()  # too old to trust: the transport connects by itself
            return None
        if sock is not None:
            sock.settimeout(self.timeout)
        return sock

    def taker(self, name: str) -> Callable[[], socket.socket | None] | None:
        """What a transport calls to get this host's connection; ``None`` for a host that is not a target."""
        return (lambda: self.take(name)) if name in self.targets else None

    def close(self) -> None:
        """Close every connection no worker took (an interrupted sweep); further dials stop."""
        with self._lock:
            self._closed = True
            left = list(self._ready.values())
            self._ready.clear()
        for sock in left:
            sock.close()

    # -- the order of the sweep -------------------------------------------------------
    def start_order(self, names: Iterable[str]) -> Iterator[str]:
        """Every name once: first the ones that are not targets, then each target as its connection
        opens, then the targets whose connection failed. Dials while it is iterated."""
        names = list(dict.fromkeys(names))
        yield from (n for n in names if n not in self.targets)
        targets = [n for n in names if n in self.targets]
        failed: list[str] = []
        with ThreadPoolExecutor(max_workers=RESOLVERS, thread_name_prefix="resolve") as resolvers:
            yield from self._dial_all(self._resolved(targets, resolvers), failed)
        yield from failed

    def _resolved(self, names: list[str], resolvers: ThreadPoolExecutor) -> Iterator[tuple[str, Future[list[Address]]]]:
        """Each name with its addresses to come: an address literal at once, a name by a resolver thread,
        at most LOOKAHEAD names ahead of the one being dialed."""
        ahead: collections.deque[tuple[str, Future[list[Address]]]] = collections.deque()
        for name in names:
            ahead.append((name, self._resolve_soon(name, resolvers)))
            if len(ahead) > LOOKAHEAD:
                yield ahead.popleft()
        yield from ahead

    def _resolve_soon(self, name: str, resolvers: ThreadPoolExecutor) -> Future[list[Address]]:
        hostname, port = self.targets[name]
        try:  # an address literal needs no lookup: AI_NUMERICHOST never asks DNS
            infos = socket.getaddrinfo(hostname, port, type=socket.SOCK_STREAM, flags=socket.AI_NUMERICHOST)
        except (OSError, UnicodeError, ValueError):
            return resolvers.submit(self._resolve, name)
        done: Future[list[Address]] = Future()
        done.set_result(_addresses(infos))
        return done

    def _resolve(self, name: str) -> list[Address]:
        hostname, port = self.targets[name]
        return _addresses(socket.getaddrinfo(hostname, port, type=socket.SOCK_STREAM))

    def _dial_all(self, resolving: Iterator[tuple[str, Future[list[Address]]]], failed: list[str]) -> Iterator[str]:
        """Dial, and yield the hosts whose connection opened, in bursts: connections that open are held
        until every host is dialed and settled, or the window is all open connections, or for
        BURST_SECONDS at most. Dialing while sessions run is slow (every connect() waits for the GIL behind the SSH key
        exchanges), so the first burst sweeps as much of the inventory as the window allows."""
        selector = selectors.DefaultSelector()
        in_flight: dict[int, _Dial] = {}
        held: list[_Dial] = []
        held_since = 0.0
        upcoming = next(resolving, None)
        try:
            while upcoming is not None or in_flight or held:
                if self._closed:
                    return
                while upcoming is not None and len(in_flight) + len(held) + self._untaken() < self.window:
                    dial = self._start(*upcoming)
                    upcoming = next(resolving, None)
                    if dial.sock is not None:
                        in_flight[dial.sock.fileno()] = dial
                        selector.register(dial.sock, selectors.EVENT_WRITE)
                    else:
                        failed.append(self._fail(dial))
                # Nothing left to dial and settle, or the window is all open connections: no reason to wait.
                stuck = (upcoming is None and not in_flight) or len(held) + self._untaken() >= self.window
                if held and (stuck or time.monotonic() - held_since >= BURST_SECONDS):
                    ready, held = held, []
                    yield from (dial.name for dial in ready if self._hand_over(dial))
                    continue
                if not in_flight:
                    if upcoming is not None:  # every slot of the window holds a connection no worker took yet
                        time.sleep(POLL_SECONDS)
                    continue
                opened = self._settle(selector, in_flight, failed, BURST_SECONDS if held else POLL_SECONDS * 20)
                if opened and not held:
                    held_since = time.monotonic()
                held += opened
        finally:
            for dial in [*in_flight.values(), *held]:
                if dial.sock is not None:
                    dial.sock.close()
            selector.close()

    def _start(self, name: str, future: Future[list[Address]]) -> _Dial:
        """Resolve (wait for the resolver) and start the connection to the host's first address."""
        try:
            dial = _Dial(name, future.result())
        except (OSError, UnicodeError, ValueError) as exc:
            dial = _Dial(name, [])
            dial.error = exc
            return dial
        self._next_address(dial)
        return dial

    def _next_address(self, dial: _Dial) -> None:
        """Start connecting to the dial's next address; with none left, the last error stands."""
        while dial.addresses:
            family, kind, proto, address = dial.addresses.popleft()
            sock = socket.socket(family, kind, proto)
            sock.setblocking(False)
            code = sock.connect_ex(address)
            if code in (0, errno.EINPROGRESS):
                dial.sock, dial.deadline = sock, time.monotonic() + self.timeout
                return
            sock.close()
            dial.error = OSError(code, os.strerror(code))  # OSError(errno, ...) is ConnectionRefusedError etc.
        dial.sock = None
        dial.error = dial.error or OSError("no address")

    def _settle(
        self, selector: selectors.BaseSelector, in_flight: dict[int, _Dial], failed: list[str], most: float
    ) -> list[_Dial]:
        """Wait (``most`` seconds at most) for connections to open, fail or time out; the ones that opened."""
        wait = max(0.0, min(d.deadline for d in in_flight.values()) - time.monotonic())
        events = selector.select(min(wait, most))
        done: dict[int, int | None] = {}  # fd -> SO_ERROR (0: connected), None: timed out
        for key, _ in events:
            sock = in_flight[key.fd].sock
            assert sock is not None
            done[key.fd] = sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
        now = time.monotonic()
        done.update({fd: None for fd, d in in_flight.items() if fd not in done and d.deadline <= now})
        opened: list[_Dial] = []
        for fd, code in done.items():
            dial = in_flight.pop(fd)
            assert dial.sock is not None
            selector.unregister(dial.sock)
            if code == 0:
                opened.append(dial)
                continue
            dial.sock.close()
            dial.error = (
                OSError(code, os.strerror(code)) if code else TimeoutError(f"timed out after {self.timeout:g}s")
            )
            self._next_address(dial)
            if dial.sock is not None:
                in_flight[dial.sock.fileno()] = dial
                selector.register(dial.sock, selectors.EVENT_WRITE)
            else:
                failed.append(self._fail(dial))
        return opened

    def _hand_over(self, dial: _Dial) -> bool:
        """Keep an open connection for its host's worker; close it if the worker already gave up on it."""
        assert dial.sock is not None
        with self._lock:
            if dial.name in self._taken or self._closed:
                dial.sock.close()
                return False
            self._ready[dial.name] = dial.sock
            self._ready_since[dial.name] = time.monotonic()
            dial.sock = None  # the worker's now
            return True

    def _fail(self, dial: _Dial) -> str:
        with self._lock:
            if dial.name not in self._taken:
                self._failed[dial.name] = dial.error or OSError("cannot connect")
        return dial.name

    def _untaken(self) -> int:
        with self._lock:
            return len(self._ready)


def _addresses(infos: list[tuple[Any, ...]]) -> list[Address]:
    """family, type, proto and sockaddr of each getaddrinfo answer (the canonical name dropped)."""
    return [(family, kind, proto, address) for family, kind, proto, _, address in infos]
