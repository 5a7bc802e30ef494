"""The read-only allow-list's reasons (issue 30 mutation figures): each dangerous command a person could
write is refused with the reason that names what it would change, and the wrappers and shells around a
command are seen through. The commands are written out here, not read from the table under test."""

from __future__ import annotations

import pytest

from nightowl.collectors.readonly import allowed_shape, violations

GPU_STATE = "changes GPU state (reset, clocks, power, ECC, MIG, persistence)"
NOT_ALLOWED = "is not one of the read-only command shapes nightowl allows"

REFUSED = [
    (("nvidia-smi", "nvlink", "-r", "0"), "resets NVLink counters"),
    (("nvidia-smi", "nvlink", "--resetcounters", "0"), "resets NVLink counters"),
    (("nvidia-smi", "nvlink", "-sc", "0bz"), "resets NVLink counters"),
    (("nvidia-smi", "nvlink", "--setcontrol", "0bz"), "resets NVLink counters"),
    *[
        (("nvidia-smi", option, "1"), GPU_STATE)
        for option in (
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
        )
    ],  # fmt: skip
    (("nvidia-smi", "--power-limit=300"), GPU_STATE),
    (("nvidia-smi", "drain", "-p", "0000:5a:00.0", "-m", "1"), "drains a GPU"),
    (("modprobe", "nvidia"), "loads or unloads kernel modules"),
    (("rmmod", "nvidia"), "unloads kernel modules"),
    (("insmod", "nvidia.ko"), "loads kernel modules"),
    (("kill", "1"), "signals processes"),
    (("pkill", "vllm"), "signals processes"),
    (("killall", "python3"), "signals processes"),
    (("reboot",), "reboots the node"),
    (("/sbin/reboot", "-f"), "reboots the node"),
    (("shutdown", "-h", "now"), "stops the node"),
    (("poweroff",), "stops the node"),
    *[
        (("systemctl", verb, "vllm"), "changes services")
        for verb in ("start", "stop", "restart", "reload", "kill", "disable", "enable", "mask")
    ],  # fmt: skip
    *[
        (("scontrol", verb, "node=gpu-17"), "changes the Slurm cluster")
        for verb in ("update", "reboot", "delete", "create")
    ],  # fmt: skip
    *[
        (("kubectl", verb, "node/gpu-17"), "changes the Kubernetes cluster")
        for verb in (
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
        )
    ],  # fmt: skip
    *[
        (("docker", verb, "vllm"), "changes containers")
        for verb in ("rm", "kill", "stop", "restart", "start", "run", "exec", "pause", "update")
    ],  # fmt: skip
    (("ncclras", "CONTROL", "abort"), "changes the running NCCL job (NCCL 2.31 ncclras CONTROL)"),
    *[
        (("dmesg", option), "clears the kernel ring buffer or changes console logging")
        for option in (
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
        )
    ],  # fmt: skip
    (("dmesg", "-Tc"), "clears the kernel ring buffer or changes console logging"),  # bundled short options
    (("dmesg", "--console-level=1"), "clears the kernel ring buffer or changes console logging"),
    (("rm", "-f", "/tmp/x"), "deletes files"),
    (("dd", "if=/dev/zero", "of=/dev/nvme0n1"), "writes devices or files"),
    # Wrappers run the command after them: it is what is judged.
    (("sudo", "-n", "--", "reboot"), "reboots the node"),
    (("sudo", "-n", "reboot"), "reboots the node"),
    (("/usr/bin/sudo", "-n", "--", "rm", "-f", "x"), "deletes files"),
    (("/usr/bin/sudo", "-u", "root", "reboot"), "runs sudo with -u (only `sudo -n --` is allowed)"),
    (("/usr/bin/timeout", "5", "reboot"), "reboots the node"),
    (("env", "LANG=C", "reboot"), "reboots the node"),
    (("env", "-i", "reboot"), "reboots the node"),
    (("timeout", "5", "reboot"), "reboots the node"),
    (("exec", "reboot"), "reboots the node"),
    (("sudo", "-n", "--", "timeout", "5", "reboot"), "reboots the node"),
    (("sudo", "-i", "reboot"), "runs sudo with -i (only `sudo -n --` is allowed)"),
    (("sudo", "-n", "-u", "root", "reboot"), "runs sudo with -u (only `sudo -n --` is allowed)"),
    # Shells: a fixed one-command script is judged as that command.
    (("sh", "-c", "reboot"), "reboots the node"),
    (("bash", "-c", "exec nvidia-smi -r"), GPU_STATE),
    (("dash", "-c", "rm -f x"), "deletes files"),
    (("/bin/sh", "-c", "reboot"), "reboots the node"),
    (("sh", "script.sh"), "runs a shell script"),
    (("dash", "script.sh"), "runs a shell script"),
]
SHELL_STRING = "runs a shell string that is not one fixed command (only `sh -c 'cmd \"$1\"' name arg` is allowed)"


@pytest.mark.parametrize(("argv", "why"), REFUSED, ids=[" ".join(a) for a, _ in REFUSED])
def test_a_dangerous_command_is_refused_with_what_it_changes(argv: tuple[str, ...], why: str) -> None:
    assert violations([argv]) == [f"`{' '.join(argv)}` {why}"]


@pytest.mark.parametrize(
    "script",
    ["cat {path}", "a; b", "a && b", "a || b", "a | b", "echo `id`", "echo $(id)", "a\nb"],
)
def test_a_shell_string_that_is_not_one_fixed_command_is_refused(script: str) -> None:
    assert violations([("sh", "-c", script)]) == [f"`sh -c {script}` {SHELL_STRING}"]


@pytest.mark.parametrize(
    "argv",
    [
        ("nvidia-smi", "nvlink", "-e", "0"),  # nvlink's -e reads error counters; it is not nvidia-smi -e
        ("nvidia-smi", "topo", "-p2p", "r"),
        ("nvidia-smi",),
        # A subcommand's options are its own: `-r` after `mig` is not nvidia-smi's GPU reset (and no
        # subcommand but nvlink has a shape here, so each is refused as not allowed).
        *[("nvidia-smi", sub, "-r") for sub in ("topo", "mig", "dmon", "pmon", "clocks", "conf-compute", "c2c")],
        ("nvidia-smi", "vgpu", "-r"),
        ("nvidia-smi", "-pmx"),  # not bundled: nvidia-smi options are words, -pmx is not -pm
        ("dmesg", "-T", "-x"),
        ("sh", "-c"),  # no script: nothing to run, nothing it changes
        ("sh", "-c", ""),
        ("sudo", "-n", "--"),
        ("timeout", "5"),
        ("cat", "/etc/shadow"),
        ("systemctl", "status", "vllm"),
        ("journalctl", "--vacuum-size=1K"),
        ("docker", "ps"),
        ("kubectl", "get", "nodes"),
        ("scontrol", "show", "node"),
    ],
)
def test_a_command_that_changes_nothing_named_is_refused_as_not_allowed(argv: tuple[str, ...]) -> None:
    assert violations([argv]) == [f"`{' '.join(argv)}` {NOT_ALLOWED}"]


def test_an_allowed_command_has_no_violation_and_a_list_reports_each_refusal_in_order() -> None:
    assert violations([]) == []
    assert violations([("nvidia-smi", "-q", "-x"), ("dmesg", "-T")]) == []
    assert violations([["nvidia-smi", "-q"]]) == []  # a list is read as the argv it holds
    assert violations([("reboot",), ("nvidia-smi", "-q"), ("poweroff",)]) == [
        "`reboot` reboots the node",
        "`poweroff` stops the node",
    ]


@pytest.mark.parametrize(
    ("argv", "resolved", "shape"),
    [
        (("cat", "--", "{any_name}"), False, ("cat", "--", "{bench_result_file}")),
        (("cat", "--", "/var/log/nccl.log"), True, ("cat", "--", "{bench_result_file}")),
        (("cat", "--", "/var/log/nccl.log"), False, None),  # unresolved, a value is not a placeholder
        (("cat", "--", "-n"), True, None),  # a whole element may not be an option
        (("cat", "--", ""), True, None),
        (("cat", "--", "a\x00b"), True, None),
        (
            ("journalctl", "-k", "-b", "--no-pager", "-o", "short-iso", "--since=-1h"),
            True,
            ("journalctl", "-k", "-b", "--no-pager", "-o", "short-iso", "--since={since}"),
        ),  # fmt: skip
        (("journalctl", "-k", "-b", "--no-pager", "-o", "short-iso", "--since="), True, None),
        (
            ("journalctl", "-k", "-b", "--no-pager", "-o", "short-iso", "--since={x}"),
            False,
            ("journalctl", "-k", "-b", "--no-pager", "-o", "short-iso", "--since={since}"),
        ),  # fmt: skip
        (("journalctl", "-k", "-b", "--no-pager", "-o", "short-iso", "--since={x"), False, None),
        (("dcgmi", "diag", "-r", "1"), False, ("dcgmi", "diag", "-r", "1")),
        (("dcgmi", "diag", "-r", "4"), False, None),  # a number is compared exactly
        (("dcgmi", "diag", "-r", "1", "-v"), False, None),  # a longer argv is not the shape
        (("dcgmi", "diag", "-r"), False, None),
    ],
)
def test_allowed_shape(argv: tuple[str, ...], resolved: bool, shape: tuple[str, ...] | None) -> None:
    assert allowed_shape(argv, resolved) == shape
