"""Read-only by construction: the exact command shapes collectors may declare, and nothing else.

Every command nightowl runs comes from a collector's declaration (runbooks name collectors, never
commands, and parameters fill whole argv elements that may not start with "-"). ``ALLOWED``
(readonly_commands.yaml beside this module) is the second lock: a declaration that is not one of these
read-only shapes is refused when the collector is loaded, so it can never be planned, let alone run. A
new collector command is added there, deliberately, after checking it changes nothing. (A deny-list of
mutating commands let ``systemctl reboot``, ``busybox reboot``, ``nsenter``, ``python3 -c``,
``find / -delete`` ... through.) ``MUTATING`` stays only to say *why* a refused command is dangerous.

Matching: tokens are compared exactly (a number too: ``dcgmi diag -r 1`` is not ``-r 4``, an hour of
GPU load), except that a ``{parameter}`` matches any parameter placeholder (or, in a resolved argv, any
value not starting with "-").
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any

# The read-only shapes the built-in collectors need, by kind, in readonly_commands.yaml beside this module
# (tests/collectors/test_readonly.py checks both ways: every built-in is accepted, every shape is used).
COMMANDS_FILE = Path(__file__).resolve().with_name("readonly_commands.yaml")


@functools.cache
def allowed_shapes() -> tuple[tuple[str, ...], ...]:
    """Every shape of readonly_commands.yaml, in file order (read once; ``ALLOWED`` is the same tuple)."""
    from nightowl.knowledge import load_yaml

    data = load_yaml(COMMANDS_FILE) or {}
    shapes = []
    for kind, commands in data.items():
        for argv in commands or ():
            if not (isinstance(argv, list) and argv and all(isinstance(token, str) for token in argv)):
                raise ValueError(f"{COMMANDS_FILE.name}: {kind}: a command is a list of strings, not {argv!r}")
            shapes.append(tuple(argv))
    return tuple(shapes)


def __getattr__(name: str) -> Any:
    """``ALLOWED``: the shapes of readonly_commands.yaml, read on first use."""
    if name == "ALLOWED":
        return allowed_shapes()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


_PLACEHOLDER = re.compile(r"\{[A-Za-z_][A-Za-z0-9_]*\}")

# nvidia-smi's subcommands take their own options: `nvidia-smi nvlink -e` reads error counters,
# `nvidia-smi -e 0` turns ECC off.
NVIDIA_SMI_SUBCOMMANDS = frozenset({"nvlink", "topo", "mig", "dmon", "pmon", "clocks", "conf-compute", "c2c", "vgpu"})

# (program, options any of which makes it mutating; empty = the program itself), why.
MUTATING: tuple[tuple[str, frozenset[str], str], ...] = (
    ("nvidia-smi nvlink", frozenset({"-r", "--resetcounters", "-sc", "--setcontrol"}), "resets NVLink counters"),
    (
        "nvidia-smi",
        frozenset(
            {
                "-r",
                "--gpu-reset",
                "-pm",
                "--persistence-mode",
                "-lgc",
                "--lock-gpu-clocks",
                "-rgc",
                "--reset-gpu-clocks",
                "-lmc",
                "--lock-memory-clocks",
                "-rmc",
                "-pl",
                "--power-limit",
                "-e",
                "--ecc-config",
                "-c",
                "--compute-mode",
                "-ac",
                "--applications-clocks",
                "-rac",
                "-mig",
                "--multi-instance-gpu",
                "-am",
                "--accounting-mode",
                "-caa",
                "--clear-accounted-apps",
                "-dm",
                "--driver-model",
                "-acp",
                "--auto-boost-default",
            }
        ),
        "changes GPU state (reset, clocks, power, ECC, MIG, persistence)",
    ),
    ("nvidia-smi", frozenset({"drain"}), "drains a GPU"),
    ("modprobe", frozenset(), "loads or unloads kernel modules"),
    ("rmmod", frozenset(), "unloads kernel modules"),
    ("insmod", frozenset(), "loads kernel modules"),
    ("kill", frozenset(), "signals processes"),
    ("pkill", frozenset(), "signals processes"),
    ("killall", frozenset(), "signals processes"),
    ("reboot", frozenset(), "reboots the node"),
    ("shutdown", frozenset(), "stops the node"),
    ("poweroff", frozenset(), "stops the node"),
    (
        "systemctl",
        frozenset({"start", "stop", "restart", "reload", "kill", "disable", "enable", "mask"}),
        "changes services",
    ),
    ("scontrol", frozenset({"update", "reboot", "delete", "create"}), "changes the Slurm cluster"),
    (
        "kubectl",
        frozenset(
            {
                "delete",
                "drain",
                "cordon",
                "uncordon",
                "apply",
                "patch",
                "edit",
                "scale",
                "rollout",
                "exec",
                "label",
                "annotate",
                "taint",
            }
        ),
        "changes the Kubernetes cluster",
    ),
    (
        "docker",
        frozenset({"rm", "kill", "stop", "restart", "start", "run", "exec", "pause", "update"}),
        "changes containers",
    ),
    ("ncclras", frozenset({"CONTROL"}), "changes the running NCCL job (NCCL 2.31 ncclras CONTROL)"),
    (
        "dmesg",
        frozenset(
            {
                "-c",
                "-C",
                "--clear",
                "--read-clear",
                "-D",
                "-E",
                "--console-off",
                "--console-on",
                "-n",
                "--console-level",
            }
        ),
        "clears the kernel ring buffer or changes console logging",
    ),
    ("rm", frozenset(), "deletes files"),
    ("dd", frozenset(), "writes devices or files"),
)


def violations(commands: Iterable[tuple[str, ...]]) -> list[str]:
    """What is wrong with a declaration, one line per argv that is not an allowed shape (empty: read-only)."""
    problems = []
    for argv in commands:
        argv = tuple(argv)
        if allowed_shape(argv) is not None:
            continue
        why = _judge(argv) or "is not one of the read-only command shapes nightowl allows"
        problems.append(f"`{' '.join(argv)}` {why}")
    return problems


@functools.lru_cache(maxsize=1024)  # asked before every command of every host of a sweep: same few argvs
def allowed_shape(argv: tuple[str, ...], resolved: bool = False) -> tuple[str, ...] | None:
    """The ALLOWED shape ``argv`` has, or None. ``resolved``: parameters are already filled in."""
    for shape in allowed_shapes():
        if len(shape) == len(argv) and all(_token_matches(s, a, resolved) for s, a in zip(shape, argv, strict=True)):
            return shape
    return None


def _token_matches(shape: str, token: str, resolved: bool) -> bool:
    if shape == token:
        return True
    placeholder = _PLACEHOLDER.search(shape)
    if placeholder is None:
        return False
    prefix, suffix = shape[: placeholder.start()], shape[placeholder.end() :]
    if not (token.startswith(prefix) and token.endswith(suffix) and len(token) >= len(prefix) + len(suffix)):
        return False
    value = token[len(prefix) : len(token) - len(suffix)]
    if resolved:  # a whole element may not start with "-" (an option); inside `--since={since}` it is a value
        return bool(value) and "\x00" not in value and (bool(prefix) or not value.startswith("-"))
    return _PLACEHOLDER.fullmatch(value) is not None


def _judge(argv: tuple[str, ...]) -> str | None:
    argv, problem = _unwrap(argv)
    if problem or not argv:
        return problem
    program = argv[0].rsplit("/", 1)[-1]
    if program in SHELLS:
        return _judge_script(argv) if "-c" in argv else "runs a shell script"
    if program == "nvidia-smi" and len(argv) > 1 and argv[1] in NVIDIA_SMI_SUBCOMMANDS:
        program, argv = f"nvidia-smi {argv[1]}", (f"nvidia-smi {argv[1]}", *argv[2:])
    words = set(_option_words(argv[1:], bundled=not program.startswith("nvidia-smi")))
    for name, options, why in MUTATING:
        if program == name and (not options or options & words):
            return why
    return None


SHELLS = frozenset({"sh", "bash", "dash"})
# Programs that run another command: judge the command they run.
_WRAPPERS = frozenset({"sudo", "env", "timeout", "nice", "exec"})


def _unwrap(argv: tuple[str, ...]) -> tuple[tuple[str, ...], str | None]:
    """The command a wrapper would run: ``sudo -n -- dmesg -T`` is judged as ``dmesg -T``."""
    while argv and argv[0].rsplit("/", 1)[-1] in _WRAPPERS:
        wrapper, rest = argv[0].rsplit("/", 1)[-1], list(argv[1:])
        while rest and (rest[0].startswith("-") or (wrapper == "env" and "=" in rest[0])):
            option = rest.pop(0)
            if option == "--":
                break
            if wrapper == "sudo" and option != "-n":
                return argv, f"runs sudo with {option} (only `sudo -n --` is allowed)"
        if wrapper == "timeout" and rest:
            rest.pop(0)  # the duration
        argv = tuple(rest)
    return argv, None


def _judge_script(argv: tuple[str, ...]) -> str | None:
    """`sh -c 'fixed script' name arg...`: a constant, single command; inputs arrive as $1, $2."""
    import shlex

    index = argv.index("-c")
    script = argv[index + 1] if index + 1 < len(argv) else ""
    if "{" in script or any(token in script for token in (";", "&&", "||", "|", "`", "$(", "\n")):
        return "runs a shell string that is not one fixed command (only `sh -c 'cmd \"$1\"' name arg` is allowed)"
    try:
        words = tuple(shlex.split(script))
    except ValueError:
        return "runs a shell string nightowl cannot read"
    return _judge(words)


def _option_words(args: Iterable[str], bundled: bool) -> Iterable[str]:
    """``--opt=value`` -> ``--opt``; ``-Tc`` -> ``-Tc``, ``-T``, ``-c`` (bundled short options)."""
    for arg in args:
        if arg.startswith("--"):
            yield arg.split("=", 1)[0]
        elif arg.startswith("-") and len(arg) > 1:
            yield arg.split("=", 1)[0]
            if bundled and len(arg) > 2 and arg[1:].isalpha():
                yield from (f"-{letter}" for letter in arg[1:])
        else:
            yield arg
