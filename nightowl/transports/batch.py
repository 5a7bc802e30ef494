"""Several commands over one SSH session: the reads a repeated sweep asks of a host round after round.

Each command of a steady round costs a session on both ends: a channel opened, driven and closed over the
connection in this process, and on the host sshd's session process and a shell, before the command itself
runs. Most of a steady round's reads are the same argvs every round (nvidia-smi's cheap query, the NVLink
counters, a service's state), so a kept connection (transports/kept.py) sends those together: each command as
``timeout`` would start it alone (``command_line``), one after the other in one shell or in lanes side by side
(``script``: where one read would hold up the rest, transports/kept.py ``lanes``), stdin from /dev/null,
each output framed on stdout and stderr by a line holding a random nonce (no output can hold it) and, after the
output, the command's exit status and two readings of the host's clock around it (``/proc/uptime``, read by the
shell's own ``read``: no process more), so each command's own time on the host is known. The
batch as a whole runs under the host's own ``timeout`` (``run_batch``: the longest of its commands' limits), not
each command under its own: a ``timeout`` process per command was a third of what a batched read cost the host.
A command's answer is taken only when the whole session took no longer than that command's own limit.

What cannot be taken from a batch is run alone, as before, where the host's ``timeout`` limits it and judges a
hang: every command of a batch one of whose frames did not come back whole (or holds another's nonce: a lane's
output written early, ``_side_by_side``); a command that exited 124 or 137 (alone, that is the host's
``timeout`` ending it: running it alone gives the answer it would have given), 126 or 127 from the shell (a
program it found but could not run: alone, ``timeout`` says so, in other words) or past 128 otherwise (killed by
a signal: alone, sshd tells which, and the shell's own note would be in its errors here); and every command of
a batch that failed, was cut or was late (a command that hangs holds up the session until its limit ends it:
then none of its answers is taken). Only connections that limit commands on the host are batched
(``run_batch``).
"""

from __future__ import annotations

import secrets
import shlex
from collections.abc import Sequence
from dataclasses import dataclass

from nightowl.transports.base import REMOTE_TIMEOUT_EXITS, CommandResult

BATCH_NOTE = (
    "read in one SSH session with {others} other command(s), under the host's timeout of the whole session; its"
    " start and duration are the session's"
)


@dataclass(frozen=True)
class Framed:
    """One command's part of a batch's output: its exit status, stdout and stderr."""

    rc: int
    stdout: str
    stderr: str
    alone: bool = False  # run as it is sent alone (``command_line``: a program the shell could not find)
    seconds: float | None = None  # its own time on the host (``/proc/uptime``, to 10 ms); None: no clock read


def new_nonce() -> str:
    return "nightowl-" + secrets.token_hex(12)


WRAPPED = "alone"  # the status suffix of a command run as it is sent alone, under the host's `timeout`


def command_line(argv: Sequence[str], alone: str) -> str:
    """``argv`` as a batch runs it: as the host's ``timeout`` starts a command sent alone, the program itself
    (exec, looked up on PATH) in a process of its own; never a builtin, function or assignment of the session's
    shell, and nothing it does (``exit``, ``set``) reaches the commands after it. A program the shell cannot find
    (``command -v``, a builtin: no process) is run as ``alone`` (the line sent alone: the host's ``timeout``),
    so its answer (exit 127 and ``timeout``'s own words) is the one it gives alone, and its status says so."""
    found = f"command -v {shlex.quote(argv[0])} >/dev/null 2>&1"
    return f"if {found}; then ( exec {shlex.join(argv)} ); else w={WRAPPED}; {alone}; fi"


# The host's seconds since boot into a variable, by the shell's ``read`` (a builtin: no process); empty where
# /proc/uptime cannot be read (stderr first, so a missing file says nothing).
_CLOCK = "read -r {} _ 2>/dev/null </proc/uptime"


# What the host sends of a batch: stdout and stderr each in one write at its end (``dd`` gathers up to a MiB a
# write, and writes what it holds when the batch ends), not a write per frame line: sshd sends each write it reads
# as a packet of its own, and a packet cost this process its decryption, dispatch and a wake of the reading thread
# (33 packets a host for a steady round's nine reads, 1.7 ms of CPU in decryption alone). ``dd`` is tried first
# on nothing (``_CAN_GATHER``): a host without it, or whose ``dd`` refuses ``obs`` (a busybox built without it),
# runs the batch as it did, its lanes one after the other, its output sent as it comes. Each ``dd``'s own report
# goes to /dev/null (fd 4 is the session's stderr, where the batch's stderr goes). GNU ``timeout`` ends the
# ``dd``s with the rest (its signal goes to its whole process group; a busybox ``timeout`` signals the shell alone,
# and the batch's reads after the one it stopped at then run on, their answers dropped with the rest).
_GATHER = "dd obs=1048576 2>/dev/null"
_CAN_GATHER = f"{_GATHER} </dev/null"


def _gathered(command: str) -> str:
    """``command`` (a function call or a group) with its stdout and stderr each written in one piece when it ends."""
    return f"{{ {{ {command} 2>&1 1>&3 3>&- 4>&- | {_GATHER} 1>&4 3>&- 4>&-; }} 3>&1 | {_GATHER} 4>&-; }} 4>&2"


def _side_by_side(lanes: int) -> str:
    """Lanes ``l0`` .. ``l{lanes-1}`` started together, their frames in lane order. Each lane after the first runs
    in the background with its output gathered (``dd``) and written only when the lanes before it have ended: the
    group that gathers it holds the gatherer's pipes open until then (fds 5 and 6 are where the lanes before it
    write, past the gatherer; closed for the lane itself, so a program it leaves behind holds no pipe of theirs).
    A lane that writes more than a gather holds (a MiB) before then has its output written early, among the earlier
    lanes' frames, starting with its own first frame's line: then a frame is not found in order or holds another's
    nonce, and the batch answers nothing (``results``)."""
    body = "l0"
    for lane in range(1, lanes):
        inner = f"{{ l{lane} 5>&- 6>&- & {{ {body}; }} 1>&5 2>&6 5>&- 6>&-; wait; }}"
        body = f"{{ {{ {_gathered(inner)}; }} 5>&1 6>&2; }}"
    return body


def _frame(number: int, command: str, nonce: str) -> str:
    """The shell line that runs ``command`` framed: the end line holds its exit status and the host's clock
    before and after it."""
    mark = f"{nonce} {number}"
    return (
        f"printf '%s\\n' '{mark}'; printf '%s\\n' '{mark}' >&2; w=; t=; u=; {_CLOCK.format('t')}; "
        f"{command} </dev/null; s=$?; {_CLOCK.format('u')}; "
        f"printf '\\n%s %s%s %s %s\\n' '{mark} end' \"$s\" \"$w\" \"$t\" \"$u\"; printf '\\n%s\\n' '{mark} end' >&2"
    )


def script(commands: Sequence[str], nonce: str, lanes: Sequence[int] = ()) -> str:
    """The shell text that runs ``commands`` (each a complete command line), framed. ``lanes``: how many of the
    commands, in order, each lane runs (none: all in one): the commands of a lane run one after the other, the
    lanes side by side (``_side_by_side``), and the frames come in the commands' order either way. Its stdout and
    stderr are each sent in one piece at the end where the host's ``dd`` can gather them (``_GATHER``)."""
    sizes = list(lanes) or [len(commands)]
    if sum(sizes) != len(commands) or min(sizes) < 1:
        raise ValueError(f"lanes {list(lanes)} do not hold the {len(commands)} commands")
    functions, first = [], 0
    for lane, size in enumerate(sizes):
        frames = (_frame(number, commands[number], nonce) for number in range(first, first + size))
        functions.append(f"l{lane}() {{\n" + "\n".join(frames) + "\n}")
        first += size
    in_turn = "; ".join(f"l{lane}" for lane in range(len(sizes)))
    together = _side_by_side(len(sizes))
    return "\n".join(functions) + f"\nif {_CAN_GATHER}; then {_gathered(together)}; else {in_turn}; fi\n"


def split(stdout: str, stderr: str, count: int, nonce: str) -> list[Framed] | None:
    """Each command's part of a batch's output, in order; None when any frame is not whole, is out of order or
    holds another frame's line (a lane's output written early, ``_side_by_side``: its later parts may sit in frames
    that look whole, so no frame of the batch is trusted)."""
    parts: list[Framed] = []
    out_at = err_at = 0
    for number in range(count):
        mark = f"{nonce} {number}"
        out = _between(stdout, out_at, f"{mark}\n", f"\n{mark} end ")
        err = _between(stderr, err_at, f"{mark}\n", f"\n{mark} end")
        if out is None or err is None:
            return None
        (out_text, out_at, ended), (err_text, err_at, rest) = out, err
        status, _, clock = ended.partition(" ")
        code = status.removesuffix(WRAPPED)
        if not code.isdigit() or rest != "" or nonce in out_text or nonce in err_text:  # another frame inside it
            return None
        parts.append(Framed(int(code), out_text, err_text, code != status, _seconds(clock)))
    return parts


def _seconds(clock: str) -> float | None:
    """A command's own time from the two readings of the host's clock around it (``"T U"``); None when either
    is missing or unreadable, or the clock went backwards."""
    readings = clock.split(" ")
    if len(readings) != 2:
        return None
    try:
        before, after = float(readings[0]), float(readings[1])
    except ValueError:
        return None
    return round(after - before, 2) if after >= before else None


def _between(text: str, start: int, begin: str, end: str) -> tuple[str, int, str] | None:
    """(what lies between ``begin`` and ``end`` from ``start``, where reading goes on, the rest of ``end``'s
    line), or None."""
    opened = text.find(begin, start)
    if opened < 0:
        return None
    body_at = opened + len(begin)
    closed = text.find(end, body_at)
    line_end = text.find("\n", closed + len(end)) if closed >= 0 else -1
    if line_end < 0:
        return None
    return text[body_at:closed], line_end + 1, text[closed + len(end) : line_end]


# A program the shell found but could not run: alone, `timeout` says so in its own words (exit 126, 127), here the
# shell would; from the command run as alone (``Framed.alone``) they are the answer alone gives.
_CANNOT_RUN = frozenset({126, 127})


def results(
    argvs: Sequence[tuple[str, ...]],
    commands: Sequence[str],
    timeouts: Sequence[float],
    batch: CommandResult,
    nonce: str,
) -> dict[tuple[str, ...], CommandResult]:
    """The commands a finished ``batch`` answers as each would have answered alone, under its own limit
    (``timeouts``; 0 for none): none past it (the session took longer than the limit, so the command may have);
    none when the batch itself failed, timed out, was cut or was late, nor when any frame is not whole (``split``)."""
    if not batch.ok or batch.stdout_truncated_bytes or batch.extra.get("stderr_truncated_bytes"):
        return {}
    answered: dict[tuple[str, ...], CommandResult] = {}
    parts = split(batch.stdout, batch.stderr, len(argvs), nonce)
    if parts is None:
        return {}
    for argv, command, timeout, part in zip(argvs, commands, timeouts, parts, strict=True):
        if part.rc > 128 or 0 < timeout < batch.duration:
            continue
        if part.rc in REMOTE_TIMEOUT_EXITS or (part.rc in _CANNOT_RUN and not part.alone):
            continue
        extra = {"remote_command": command, "batch": BATCH_NOTE.format(others=len(argvs) - 1)}
        if part.seconds is not None:
            extra["host_seconds"] = f"{part.seconds:.2f}"  # its own time, by the host's clock
        answered[argv] = CommandResult(
            argv, part.rc, part.stdout, part.stderr, batch.started, batch.duration, extra=extra
        )
    return answered
