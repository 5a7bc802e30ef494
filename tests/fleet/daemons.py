"""Start and stop real daemons on loopback for the fleet tests: free ports, readiness, clean stops.

Every daemon runs in its own session (process group), logs to a file in the test's temp dir and is
stopped with SIGTERM to the group, then SIGKILL if it lingers. Nothing listens beyond 127.0.0.1.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

LOOPBACK = "127.0.0.1"
T = TypeVar("T")


def free_port() -> int:
    """A port free right now on 127.0.0.1 (a daemon that loses the race exits early; wait_for says so)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((LOOPBACK, 0))
        return int(sock.getsockname()[1])


def http_get(url: str, timeout: float = 2.0) -> bytes:
    with urllib.request.urlopen(url, timeout=timeout) as response:  # noqa: S310 - loopback URLs only
        return bytes(response.read())


class Daemon:
    """One started process: its name, its log file, and how to stop it."""

    def __init__(self, name: str, argv: Sequence[str], log_dir: Path, env: Mapping[str, str] | None = None) -> None:
        self.name = name
        self.log = log_dir / f"{name}.log"
        with self.log.open("wb") as log:
            self.process = subprocess.Popen(
                list(argv),
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                env=dict(env) if env is not None else None,
                preexec_fn=_die_with_parent,
            )

    def tail(self, lines: int = 20) -> str:
        text = self.log.read_text(errors="replace") if self.log.exists() else ""
        return f"--- {self.name} ({self.log}):\n" + "\n".join(text.splitlines()[-lines:])

    def stop(self, timeout: float = 15.0) -> None:
        if self.process.poll() is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGTERM)
        try:
            self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(5)


def wait_for(
    what: str,
    predicate: Callable[[], T],
    timeout: float,
    daemons: Sequence[Daemon] = (),
    interval: float = 0.1,
) -> T:
    """Poll until ``predicate`` returns something truthy; fail early when a daemon has died."""
    deadline = time.monotonic() + timeout
    last: Exception | None = None
    while time.monotonic() < deadline:
        for daemon in daemons:
            if daemon.process.poll() is not None:
                raise AssertionError(
                    f"{daemon.name} exited ({daemon.process.returncode}) before {what}\n{daemon.tail()}"
                )
        try:
            value = predicate()
        except (OSError, urllib.error.URLError, ValueError, KeyError) as exc:
            last, value = exc, None  # type: ignore[assignment]
        if value:
            return value
        time.sleep(interval)
    logs = "\n".join(d.tail() for d in daemons)
    raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what} (last error: {last})\n{logs}")


def listening_addresses(pid: int) -> list[str]:
    """``ip:port`` of every TCP socket in LISTEN (and every bound UDP socket) the process holds."""
    inodes = set()
    for fd in os.listdir(f"/proc/{pid}/fd"):
        with contextlib.suppress(OSError):
            link = os.readlink(f"/proc/{pid}/fd/{fd}")
            if link.startswith("socket:["):
                inodes.add(link[8:-1])
    found = []
    for proto in ("tcp", "tcp6", "udp", "udp6"):
        for line in Path(f"/proc/net/{proto}").read_text().splitlines()[1:]:
            fields = line.split()
            local, state, inode = fields[1], fields[3], fields[9]
            if inode in inodes and (proto.startswith("udp") or state == "0A"):
                found.append(_address(local))
    return found


def _address(hex_address: str) -> str:
    address, port = hex_address.split(":")
    raw = bytes.fromhex(address)
    if len(raw) == 4:
        ip = socket.inet_ntop(socket.AF_INET, raw[::-1])
    else:
        ip = socket.inet_ntop(socket.AF_INET6, b"".join(raw[i : i + 4][::-1] for i in range(0, 16, 4)))
    return f"{ip}:{int(port, 16)}"


def assert_loopback_only(daemons: Sequence[Daemon]) -> None:
    for daemon in daemons:
        addresses = listening_addresses(daemon.process.pid)
        assert addresses, f"{daemon.name} listens nowhere"
        assert all(a.startswith(f"{LOOPBACK}:") for a in addresses), f"{daemon.name} listens on {addresses}"


def json_lines(path: Path) -> list[Any]:
    import json

    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _die_with_parent() -> None:
    """The daemon gets SIGTERM when the test process dies, however it dies: a killed pytest must not
    leave a slurmd running health checks every second, or a Prometheus stack, behind (Linux only)."""
    import contextlib
    import ctypes
    import signal

    with contextlib.suppress(OSError):
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
