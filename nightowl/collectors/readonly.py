"""Read-only by construction: commands no collector may ever declare.

Every command nightowl runs comes from a collector's declaration (runbooks name collectors, never
commands, and parameters fill whole argv elements that may not start with "-"). This list is the
second lock: a declaration that could change a node is refused when the collector is loaded, so
it can never be planned, let alone run.
"""

from __future__ import annotations

from collections.abc import Iterable

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
    """What is wrong with a declaration, one line per offending argv (empty: read-only)."""
    problems = []
    for argv in commands:
        problem = _judge(tuple(argv))
        if problem:
            problems.append(f"`{' '.join(argv)}` {problem}")
    return problems


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
