"""Run commands on this machine, with a deadline that kills the whole process tree."""

from __future__ import annotations

import contextlib
import fcntl
import os
import selectors
import signal
import struct
import subprocess
import termios
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from nightowl.transports.base import CommandResult, late_note
from nightowl.transports.capped import CappedOutput, cut_extra


def _kill_tree(pid: int) -> None:
    import psutil  # lazy: only needed when something hangs

    try:
        parent = psutil.Process(pid)
    except psutil.NoSuchProcess:
        return
    for proc in [*parent.children(recursive=True), parent]:
        with contextlib.suppress(psutil.NoSuchProcess):
            proc.kill()


# After a kill, how long the pipes may still deliver what was written before they are closed. A grandchild
# that left the process tree (setsid, daemonised) can hold them open for ever; it is not waited for.
KILL_GRACE_SECONDS = 0.5
# When the deadline finds output waiting unread (nightowl was behind), how long to go on reading it to tell
# a command that ended by itself from one that still runs.
LATE_GRACE_SECONDS = 2.0


@dataclass
class _Collected:
    out: CappedOutput
    err: CappedOutput
    timed_out: bool = False
    late: str | None = None


class _Pipes:
    """The command's stdout and stderr, read as they come into capped buffers."""

    def __init__(self, proc: subprocess.Popen[bytes], cap: int) -> None:
        assert proc.stdout is not None and proc.stderr is not None
        self.out_fd, self.err_fd = proc.stdout.fileno(), proc.stderr.fileno()
        self.buffers = {self.out_fd: CappedOutput(cap), self.err_fd: CappedOutput(cap)}
        self.selector = selectors.DefaultSelector()
        for fd in self.buffers:
            os.set_blocking(fd, False)
            self.selector.register(fd, selectors.EVENT_READ)

    @property
    def open(self) -> bool:
        return bool(self.selector.get_map())

    @property
    def read(self) -> int:
        return sum(buffer.total for buffer in self.buffers.values())

    def read_ready(self, timeout: float) -> None:
        for key in _wait_readable(self.selector, timeout):
            try:
                chunk = os.read(key.fd, 1 << 16)
            except BlockingIOError:
                continue
            if chunk:
                self.buffers[key.fd].add(chunk)
            else:
                self.selector.unregister(key.fd)

    def read_until(self, deadline: float, stop: Callable[[], bool] = lambda: False) -> None:
        while self.open and not stop() and (remaining := deadline - time.monotonic()) > 0:
            self.read_ready(remaining)

    def pending(self) -> int:
        """Bytes written by the command and not read yet (FIONREAD on each pipe still open)."""
        waiting = 0
        for fd in list(self.selector.get_map()):
            with contextlib.suppress(OSError):
                waiting += struct.unpack("i", fcntl.ioctl(fd, termios.FIONREAD, b"\0\0\0\0"))[0]
        return waiting

    def close(self) -> None:
        self.selector.close()


def _wait_readable(selector: selectors.BaseSelector, timeout: float) -> list[selectors.SelectorKey]:
    """One wait for output (a seam: a test holds the reader back here as a saturated process would be)."""
    return [key for key, _events in selector.select(timeout)]


def _collect(proc: subprocess.Popen[bytes], t0: float, timeout: float, cap: int) -> _Collected:
    """Read stdout and stderr as they come, each into a buffer that keeps its head and tail, until both
    close and the process exits, or the deadline. A deadline that finds the command ended by itself, or
    its output waiting unread, is nightowl's lateness (``late``); one that finds it running kills it."""
    assert proc.stdout is not None and proc.stderr is not None
    pipes = _Pipes(proc, cap)
    deadline = t0 + timeout
    try:
        pipes.read_until(deadline)
        if not pipes.open:
            return _Collected(*_buffers(pipes), timed_out=_wait(proc, deadline, False))
        late = _late(proc, pipes, timeout)
        if late is None:
            _kill(proc.pid)
            pipes.read_until(time.monotonic() + KILL_GRACE_SECONDS)
            return _Collected(*_buffers(pipes), timed_out=_wait(proc, time.monotonic() + KILL_GRACE_SECONDS, True))
        return _Collected(*_buffers(pipes), late=late)
    finally:
        pipes.close()
        proc.stdout.close()
        proc.stderr.close()


def _late(proc: subprocess.Popen[bytes], pipes: _Pipes, timeout: float) -> str | None:
    """At the deadline: the lateness note when the command had ended or left output unread, else None.

    A command that had ended by itself did not run past its deadline; output waiting in the pipes was
    written and not read. Either way nightowl, not the host, was behind: read on for a grace period to
    count what it had sent."""
    read_by_deadline = pipes.read
    if proc.poll() is None and pipes.pending() == 0:
        return None  # still running and nothing waiting: the command itself is slow
    grace_end = time.monotonic() + LATE_GRACE_SECONDS
    pipes.read_until(grace_end)
    if proc.poll() is None:
        try:
            proc.wait(timeout=max(0.0, grace_end - time.monotonic()))
        except subprocess.TimeoutExpired:
            return None  # a writer that goes on and on: it runs long on the host, it is killed as such
    return late_note(read_by_deadline, pipes.read, timeout, more=pipes.open)


def _buffers(pipes: _Pipes) -> tuple[CappedOutput, CappedOutput]:
    return pipes.buffers[pipes.out_fd], pipes.buffers[pipes.err_fd]


def _wait(proc: subprocess.Popen[bytes], deadline: float, timed_out: bool) -> bool:
    """Reap the process by the deadline (it may have closed its pipes and still run); True if it had to be
    killed."""
    try:
        proc.wait(timeout=max(0.0, deadline - time.monotonic()))
        return timed_out
    except subprocess.TimeoutExpired:
        pass
    _kill(proc.pid)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=KILL_GRACE_SECONDS)
    return True


def _kill(pid: int) -> None:
    """Kill the command's process group (it leads its own session) and every process still in its tree."""
    with contextlib.suppress(OSError):
        os.killpg(pid, signal.SIGKILL)
    _kill_tree(pid)


class LocalTransport:
    """The ``local`` host: subprocess without a shell."""

    def __init__(self, host: str = "local", output_cap_bytes: int = 64 * 1024 * 1024) -> None:
        self.host = host
        self.output_cap_bytes = output_cap_bytes
        self._running: set[int] = set()

    def connect(self) -> None:
        return None

    def close(self) -> None:
        """Kill what is still running (an interrupt closes every transport to stop the run at once)."""
        for pid in list(self._running):
            _kill(pid)

    def run(self, argv: Sequence[str], timeout: float, kind: str | None = None) -> CommandResult:
        argv_t = tuple(argv)
        started = time.time()
        t0 = time.monotonic()
        try:
            proc = subprocess.Popen(
                argv_t,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                start_new_session=True,
            )
        except OSError as exc:
            return CommandResult(argv_t, None, "", "", started, time.monotonic() - t0, error=str(exc))
        self._running.add(proc.pid)
        try:
            collected = _collect(proc, t0, timeout, self.output_cap_bytes)
        except BaseException:  # interrupted (SIGINT/SIGTERM): leave nothing running behind us
            _kill(proc.pid)
            raise
        finally:
            self._running.discard(proc.pid)
        return _result(argv_t, proc, collected, started, t0)


def _result(
    argv: tuple[str, ...], proc: subprocess.Popen[bytes], got: _Collected, started: float, t0: float
) -> CommandResult:
    stdout, dropped, cut_at = got.out.text()
    stderr, err_dropped, _ = got.err.text()
    return CommandResult(
        argv=argv,
        rc=None if got.timed_out else proc.returncode,
        stdout=stdout,
        stderr=stderr,
        started=started,
        duration=time.monotonic() - t0,
        timed_out=got.timed_out,
        error="timed out" if got.timed_out else None,
        stdout_truncated_bytes=dropped,
        extra=cut_extra(cut_at, err_dropped),
        late=got.late,
    )
