"""Run commands on this machine, with a deadline that kills the whole process tree."""

from __future__ import annotations

import contextlib
import os
import selectors
import signal
import subprocess
import time
from collections.abc import Sequence

from nightowl.transports.base import CommandResult


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


def _collect(proc: subprocess.Popen[bytes], deadline: float, cap: int) -> tuple[bytearray, bytearray, int, bool]:
    """Read stdout and stderr as they come, keeping the first ``cap`` bytes of each (the rest is read and
    counted, never held), until both close and the process exits, or the deadline: then kill the tree."""
    assert proc.stdout is not None and proc.stderr is not None
    out_fd, err_fd = proc.stdout.fileno(), proc.stderr.fileno()
    buffers = {out_fd: bytearray(), err_fd: bytearray()}
    dropped = 0
    timed_out = False
    with selectors.DefaultSelector() as selector:
        for fd in buffers:
            os.set_blocking(fd, False)
            selector.register(fd, selectors.EVENT_READ)
        while selector.get_map():
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                if timed_out:
                    break  # the grace after the kill is over: stop waiting for whoever holds the pipe
                timed_out = True
                _kill(proc.pid)
                deadline = time.monotonic() + KILL_GRACE_SECONDS
                continue
            for key, _events in selector.select(remaining):
                try:
                    chunk = os.read(key.fd, 1 << 16)
                except BlockingIOError:
                    continue
                if not chunk:
                    selector.unregister(key.fd)
                    continue
                buffer = buffers[key.fd]
                room = max(0, cap - len(buffer))
                buffer += chunk[:room]
                if key.fd == out_fd:
                    dropped += len(chunk) - min(room, len(chunk))
    proc.stdout.close()
    proc.stderr.close()
    return buffers[out_fd], buffers[err_fd], dropped, _wait(proc, deadline, timed_out)


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
            out, err, dropped, timed_out = _collect(proc, t0 + timeout, self.output_cap_bytes)
        except BaseException:  # interrupted (SIGINT/SIGTERM): leave nothing running behind us
            _kill(proc.pid)
            raise
        finally:
            self._running.discard(proc.pid)
        rc = None if timed_out else proc.returncode
        return self._result(argv_t, rc, bytes(out), bytes(err), started, t0, timed_out=timed_out, dropped=dropped)

    def _result(
        self,
        argv: tuple[str, ...],
        rc: int | None,
        out: bytes,
        err: bytes,
        started: float,
        t0: float,
        timed_out: bool = False,
        dropped: int = 0,
    ) -> CommandResult:
        return CommandResult(
            argv=argv,
            rc=rc,
            stdout=out.decode("utf-8", errors="replace"),
            stderr=err.decode("utf-8", errors="replace"),
            started=started,
            duration=time.monotonic() - t0,
            timed_out=timed_out,
            error="timed out" if timed_out else None,
            stdout_truncated_bytes=dropped,
        )
