"""Run commands on this machine, with a deadline that kills the whole process tree."""

from __future__ import annotations

import contextlib
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


class LocalTransport:
    """The ``local`` host: subprocess without a shell."""

    def __init__(self, host: str = "local", output_cap_bytes: int = 64 * 1024 * 1024) -> None:
        self.host = host
        self.output_cap_bytes = output_cap_bytes

    def connect(self) -> None:
        return None

    def close(self) -> None:
        return None

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
        try:
            out, err = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            _kill_tree(proc.pid)
            out, err = proc.communicate()
            return self._result(argv_t, None, out, err, started, t0, timed_out=True)
        return self._result(argv_t, proc.returncode, out, err, started, t0)

    def _result(
        self,
        argv: tuple[str, ...],
        rc: int | None,
        out: bytes,
        err: bytes,
        started: float,
        t0: float,
        timed_out: bool = False,
    ) -> CommandResult:
        dropped = max(0, len(out) - self.output_cap_bytes)
        return CommandResult(
            argv=argv,
            rc=rc,
            stdout=out[: self.output_cap_bytes].decode("utf-8", errors="replace"),
            stderr=err.decode("utf-8", errors="replace"),
            started=started,
            duration=time.monotonic() - t0,
            timed_out=timed_out,
            error="timed out" if timed_out else None,
            stdout_truncated_bytes=dropped,
        )
