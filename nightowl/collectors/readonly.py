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
    ("sh", frozenset({"-c"}), "runs a shell string (only a fixed script with positional arguments is allowed)"),
)


def violations(commands: Iterable[tuple[str, ...]]) -> list[str]:
    """What is wrong with a declaration, one line per offending argv (empty: read-only)."""
    problems = []
    for argv in commands:
        if not argv:
            continue
        argv = _without_sudo(argv)
        if not argv:
            continue
        program = argv[0].rsplit("/", 1)[-1]
        if program == "nvidia-smi" and len(argv) > 1 and argv[1] in NVIDIA_SMI_SUBCOMMANDS:
            program, argv = f"nvidia-smi {argv[1]}", (f"nvidia-smi {argv[1]}", *argv[2:])
        for name, options, why in MUTATING:
            if program != name:
                continue
            if not options or options.intersection(argv[1:]):
                if name == "sh" and _fixed_script(argv):
                    continue
                problems.append(f"`{' '.join(argv)}` {why}")
    return problems


def _without_sudo(argv: tuple[str, ...]) -> tuple[str, ...]:
    """The command sudo would run: ``sudo -n -- dmesg -T`` is judged as ``dmesg -T``."""
    if argv[0].rsplit("/", 1)[-1] != "sudo":
        return argv
    rest = list(argv[1:])
    while rest and rest[0].startswith("-"):
        if rest.pop(0) == "--":
            break
    return tuple(rest)


def _fixed_script(argv: tuple[str, ...]) -> bool:
    """`sh -c 'fixed script' name arg...`: the script is a constant and inputs arrive as $1, $2."""
    index = argv.index("-c")
    script = argv[index + 1] if index + 1 < len(argv) else ""
    return "{" not in script
