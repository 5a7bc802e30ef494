"""Read-only by construction: the exact command shapes collectors may declare, and nothing else.

Every command nightowl runs comes from a collector's declaration (runbooks name collectors, never
commands, and parameters fill whole argv elements that may not start with "-"). ``ALLOWED`` is the
second lock: a declaration that is not one of these read-only shapes is refused when the collector is
loaded, so it can never be planned, let alone run. A new collector command is added here, deliberately,
after checking it changes nothing. (A deny-list of mutating commands let ``systemctl reboot``,
``busybox reboot``, ``nsenter``, ``python3 -c``, ``find / -delete`` ... through.) ``MUTATING`` stays
only to say *why* a refused command is dangerous.

Matching: tokens are compared exactly (a number too: ``dcgmi diag -r 1`` is not ``-r 4``, an hour of
GPU load), except that a ``{parameter}`` matches any parameter placeholder (or, in a resolved argv, any
value not starting with "-").
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable

# kernel-log-boots: journalctl --list-boots, then journalctl -k -b -N for N = 1 .. $1 (at most 10); written
# out here, not imported, so this list stays the one place that says what may run.
_BOOTS_SCRIPT = (
    "journalctl --list-boots --no-pager || exit $?; n=1; "
    'while [ "$n" -le "$1" ] && [ "$n" -le 10 ]; do '
    'echo "-- nightowl previous boot -$n --"; journalctl -k -b "-$n" --no-pager -o short-iso; n=$((n+1)); done'
)

# free-space: the paths of its colon-separated arguments that exist, to one df (stat -f when that df fails
# before printing); the others named, one line each. Written out here for the reason above.
_FREE_SPACE_SCRIPT = (
    'n=$#; for a do IFS=:; set -f; for p in $a; do [ -n "$p" ] || continue; case $p in "~/"*) p=$HOME/${p#"~/"};; '
    'esac; if [ -e "$p" ]; then set -- "$@" "$p"; else printf \'nightowl-free-space: not found: %s\\n\' "$p"; fi; '
    'done; unset IFS; set +f; done; shift "$n"; [ "$#" -gt 0 ] || exit 0; '
    'if out=$(df -B1 --output=file,size,used,avail,itotal,iused,iavail,target -- "$@"); then printf \'%s\\n\' "$out"; '
    'exit 0; fi; [ -z "$out" ] || { printf \'%s\\n\' "$out"; exit 1; }; '
    "exec stat -f -c '%S %b %f %a %c %d %n' -- \"$@\""
)

# The read-only shapes the built-in collectors need (derived from every registered collector's declared
# commands; tests/collectors/test_readonly.py checks both ways: every built-in is accepted, every shape is used).
ALLOWED: tuple[tuple[str, ...], ...] = (
    ("cat", "--", "{bench_result_file}"),  # bench-serve
    ("docker", "inspect", "--", "{container}"),  # container-state
    ("kubectl", "get", "pod", "{pod}", "-n", "{namespace}", "-o", "json"),  # container-state
    ("cat", "--", "/sys/devices/system/cpu/cpu0/cpufreq/scaling_governor"),  # cpu-governor
    ("dcgmi", "diag", "-r", "1"),  # dcgmi-diag
    ("dcgmi", "diag", "-r", "{dcgm_level}", "--json"),  # dcgmi-diag-drained
    ("df", "-B1", "--output=size,avail", "--", "/dev/shm"),  # dev-shm
    ("df", "-k", "--", "/dev/shm"),  # dev-shm
    ("sh", "-c", _FREE_SPACE_SCRIPT, "free-space", "{space_path}", "{space_paths}"),  # free-space
    ("sh", "-c", _FREE_SPACE_SCRIPT, "free-space", "{space_paths}"),  # free-space
    ("df", "-B1", "--output=size,used,avail,itotal,iused,iavail,target", "--", "{space_path}"),  # free-space
    ("stat", "-f", "-c", "%S %b %f %a %c %d %n", "--", "{space_path}"),  # free-space
    ("tail", "-n", "5000", "--", "{engine_log_file}"),  # engine-log
    ("sh", "-c", 'exec docker logs --tail "$1" -- "$2" 2>&1', "docker-logs", "5000", "{container}"),  # engine-log
    ("kubectl", "logs", "--previous", "--tail", "5000", "-n", "{namespace}", "{pod}"),  # engine-log
    ("kubectl", "logs", "--tail", "5000", "-n", "{namespace}", "{pod}"),  # engine-log
    ("journalctl", "-u", "{engine_unit}", "--no-pager", "-n", "5000"),  # engine-log
    ("nvidia-smi", "topo", "-m"),  # gpu-topology
    (
        "sh",
        "-c",
        "exec grep -s -H . /sys/class/infiniband/*/ports/*/state /sys/class/infiniband/*/ports/*/phys_state"
        " /sys/class/infiniband/*/ports/*/rate /sys/class/infiniband/*/ports/*/link_layer"
        " /sys/class/infiniband/*/ports/*/counters/*",
        "ib-ports",
    ),  # ib-ports
    ("ibstat",),  # ib-ports
    ("systemctl", "is-active", "nvidia-fabricmanager"),  # fabric-manager
    ("journalctl", "-k", "-b", "--no-pager", "-o", "short-iso", "--since={since}"),  # kernel-log
    ("journalctl", "-k", "-b", "--no-pager", "-o", "short-iso"),  # kernel-log
    ("dmesg", "-T"),  # kernel-log
    ("dmesg",),  # kernel-log
    ("sudo", "-n", "--", "dmesg", "-T"),  # kernel-log
    ("sh", "-c", _BOOTS_SCRIPT, "kernel-log-boots", "{previous_boots}"),  # kernel-log-boots
    ("sh", "-c", _BOOTS_SCRIPT, "kernel-log-boots", "2"),  # kernel-log-boots
    (
        "curl",
        "-sS",
        "--max-time",
        "120",
        "-H",
        "Content-Type: application/json",
        "--data-binary",
        "@{probe_file}",
        "{endpoint}",
    ),  # known-answer
    (
        "curl",
        "-sS",
        "--max-time",
        "120",
        "-H",
        "Content-Type: application/json",
        "--data-binary",
        "{probe_body}",
        "{endpoint}",
    ),  # known-answer
    ("curl", "-sS", "--fail", "--max-time", "5", "--", "{metrics_url}"),  # metrics
    ("cat", "--", "{nccl_log}"),  # nccl-log
    ("ncclras", "-v"),  # nccl-ras
    (
        "python3",
        "-c",
        "import socket,sys;s=socket.create_connection(('localhost',28028),10);s.settimeout(60);"
        "s.sendall(b'VERBOSE STATUS\\n');[sys.stdout.buffer.write(b) for b in iter(lambda:s.recv(65536),b'')]",
    ),  # nccl-ras
    ("cat", "--", "{nccl_tests_file}"),  # nccl-tests
    ("all_reduce_perf", "-b", "8", "-e", "8G", "-f", "2", "-g", "{gpus_per_node}"),  # nccl-tests-run
    ("nvidia-smi", "-q", "-x"),  # nvidia-smi
    ("nvidia-smi", "-q"),  # nvidia-smi
    (
        "nvidia-smi",
        "--query-gpu=index,pci.bus_id,name,uuid,driver_version,temperature.gpu,utilization.gpu,"
        "memory.total,memory.used,ecc.errors.uncorrected.volatile.total,clocks_event_reasons.active,pcie.link.gen.current,pcie.link.gen.max,pcie.link.width.current,pcie.link.width.max",
        "--format=csv,noheader,nounits",
    ),  # nvidia-smi-query
    ("nvidia-smi", "nvlink", "-s"),  # nvlink
    ("nvidia-smi", "nvlink", "-e"),  # nvlink-errors
    (
        "curl",
        "-sS",
        "-i",
        "--max-time",
        "5",
        "-w",
        "\\nnightowl-probe %{URL_EFFECTIVE} %{HTTP_CODE} %{TIME_TOTAL}\\n",
        "--",
        "{base_url}/health",
        "{base_url}/version",
    ),  # replica-health
    ("curl", "-sS", "--fail", "--max-time", "5", "--", "{base_url}/metrics"),  # replica-metrics
    ("curl", "-sS", "--fail", "--max-time", "5", "--", "{base_url}/v1/models"),  # replica-models
    (
        "curl",
        "-sS",
        "-N",
        "--max-time",
        "20",
        "-H",
        "Content-Type: application/json",
        "--data-binary",
        "{stream_body}",
        "--",
        "{base_url}/v1/completions",
    ),  # stream-probe
)
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
    for shape in ALLOWED:
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
