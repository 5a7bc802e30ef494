"""Read-only by construction: no registered collector declares a command that changes a node."""

from __future__ import annotations

from pathlib import Path

import pytest

from nightowl.collectors import MODULES, UnsafeCollector, get_collector
from nightowl.collectors.readonly import ALLOWED, allowed_shape, violations


@pytest.mark.parametrize("kind", sorted(MODULES))
def test_every_registered_collector_is_read_only(kind: str) -> None:
    collector = get_collector(kind)
    assert violations(collector.commands) == []


@pytest.mark.parametrize(
    "argv",
    [
        ("nvidia-smi", "-r", "-i", "0"),
        ("/usr/bin/nvidia-smi", "-pm", "1"),
        ("nvidia-smi", "-lgc", "1400"),
        ("modprobe", "-r", "nvidia"),
        ("systemctl", "restart", "nvidia-fabricmanager"),
        ("kill", "-9", "1"),
        ("kubectl", "drain", "gpu-17"),
        ("nvidia-smi", "nvlink", "-r", "0"),
        ("nvidia-smi", "-e", "0"),
        ("sudo", "-n", "--", "nvidia-smi", "-r"),
        ("dmesg", "-C"),
        ("sh", "-c", "cat {path}"),
        ("nvidia-smi", "--persistence-mode=1"),
        ("dmesg", "-Tc"),
        ("dmesg", "--console-level=1"),
        ("sudo", "-u", "root", "dmesg", "-T"),
        ("sh", "-c", "reboot"),
        ("bash", "-c", "exec nvidia-smi -r"),
        ("sh", "-c", "journalctl -k; reboot"),
        ("env", "LANG=C", "reboot"),
        ("timeout", "5", "modprobe", "-r", "nvidia"),
        ("sh", "/tmp/anything.sh"),
    ],
)
def test_mutating_commands_are_refused(argv: tuple[str, ...]) -> None:
    assert violations([argv])


def test_read_only_commands_pass() -> None:
    assert (
        violations(
            [
                ("nvidia-smi", "-q", "-x"),
                ("nvidia-smi", "nvlink", "-s"),
                ("journalctl", "-k", "-b", "--no-pager", "-o", "short-iso", "--since={since_time}"),
                ("kubectl", "get", "pod", "{p}", "-n", "{ns}", "-o", "json"),
                ("tail", "-n", "5000", "--", "{log_path}"),  # a parameter may be renamed
            ]
        )
        == []
    )


# Issue 14: a deny-list let these through. Each is refused because it is not an allowed shape.
MUTATING_COMMANDS = [
    ("systemctl", "reboot"),
    ("systemctl", "isolate", "rescue.target"),
    ("systemctl", "--no-block", "poweroff"),
    ("busybox", "reboot"),
    ("busybox", "rm", "-rf", "/"),
    ("zsh", "-c", "reboot"),
    ("ksh", "-c", "reboot"),
    ("fish", "-c", "reboot"),
    ("nsenter", "-t", "1", "-m", "--", "reboot"),
    ("chroot", "/host", "reboot"),
    ("python3", "-c", "import os; os.system('reboot')"),
    ("python", "-c", "print(1)"),
    ("perl", "-e", "unlink '/etc/passwd'"),
    ("find", "/", "-delete"),
    ("find", "/var/log", "-exec", "rm", "{}", ";"),
    ("journalctl", "--vacuum-time=1s"),
    ("journalctl", "--rotate"),
    ("journalctl", "--flush"),
    ("nvidia-smi", "mig", "-dgi"),
    ("nvidia-smi", "mig", "-cgi", "9"),
    ("nvidia-smi", "-i", "0", "-r"),
    ("nvidia-smi", "conf-compute", "-srs", "1"),
    ("nvidia-smi", "drain", "-p", "0000:3b:00.0", "-m", "1"),
    ("docker", "system", "prune", "-af"),
    ("docker", "volume", "rm", "x"),
    ("docker", "compose", "down"),
    ("kubectl", "delete", "pod", "x"),
    ("kubectl", "replace", "-f", "x.yaml"),
    ("kubectl", "debug", "node/x", "-it", "--image=busybox"),
    ("crictl", "rmp", "-a"),
    ("ctr", "task", "kill", "x"),
    ("ip", "link", "set", "ib0", "down"),
    ("ethtool", "-s", "eth0", "speed", "10"),
    ("sysctl", "-w", "kernel.panic=1"),
    ("tee", "/proc/sysrq-trigger"),
    ("echo", "b"),
    ("mv", "/etc/fstab", "/tmp"),
    ("truncate", "-s", "0", "/var/log/syslog"),
    ("cp", "/dev/null", "/etc/passwd"),
    ("chmod", "000", "/"),
    ("mount", "-o", "remount,ro", "/"),
    ("swapoff", "-a"),
    ("ipmitool", "chassis", "power", "cycle"),
    ("nvme", "format", "/dev/nvme0n1"),
    ("dcgmi", "diag", "-r", "4"),  # level 4: an hour of GPU load; only `-r 1` and `-r {dcgm_level}` are shapes
    ("dcgmi", "group", "-d", "1"),
    ("dcgmi", "config", "--set", "-P", "300"),
    ("scontrol", "reboot", "ASAP", "gpu-17"),
    ("ncclras", "CONTROL"),
    ("curl", "-X", "POST", "http://127.0.0.1:8000/shutdown"),
    ("curl", "-sS", "--fail", "--max-time", "5", "-o", "/etc/passwd", "--", "{metrics_url}"),
    ("tail", "-n", "5000", "--", "{engine_log_file}", "-f"),
    ("dmesg", "-C"),
    ("sudo", "-n", "--", "reboot"),
    ("sh", "-c", 'exec docker rm -f -- "$2"', "docker-logs", "5000", "{container}"),
    ("env", "-i", "reboot"),
    ("xargs", "reboot"),
    ("at", "now"),
    ("wall", "bye"),
]


@pytest.mark.parametrize("argv", MUTATING_COMMANDS, ids=lambda argv: " ".join(argv)[:40])
def test_every_command_outside_the_allowed_shapes_is_refused(argv: tuple[str, ...]) -> None:
    assert allowed_shape(argv) is None
    assert violations([argv])


def test_every_allowed_shape_is_used_by_a_built_in_collector() -> None:
    declared = {tuple(argv) for kind in MODULES for argv in get_collector(kind).commands}
    # a collector's incremental reads (engine/incremental.py) declare theirs on its cursor
    cursors = [getattr(get_collector(kind), "cursor", None) for kind in MODULES]
    declared |= {tuple(argv) for cursor in cursors if cursor is not None for argv in cursor.shapes}
    unused = [shape for shape in ALLOWED if shape not in declared]
    assert unused == [], "an allowed shape no collector needs: remove it"


@pytest.mark.parametrize(
    ("argv", "allowed"),
    [
        (("curl", "-sS", "--fail", "--max-time", "5", "--", "http://127.0.0.1:8000/metrics"), True),
        (("curl", "-sS", "--fail", "--max-time", "5", "--", "-o/etc/passwd"), False),
        (("tail", "-n", "5000", "--", "/var/log/vllm.log"), True),
        (("cat", "--", "--help"), False),
    ],
)
def test_resolved_commands_match_only_with_safe_values(argv: tuple[str, ...], allowed: bool) -> None:
    assert (allowed_shape(argv, resolved=True) is not None) is allowed


def collect_and_end(path: Path, runbook_id: str, kinds: str) -> Path:
    """A runbook at ``path`` whose node a (line 5) collects ``kinds`` and goes on to a verdict."""
    path.write_text(
        f"id: {runbook_id}\ntitle: {runbook_id}\nentry: a\nnodes:\n  a:\n    collect: [{kinds}]\n    next: v\n"
        "  v:\n    verdict: {id: v, severity: ok, action: none, summary: s}\n"
    )
    return path


def test_an_unsafe_collector_never_loads(monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:  # noqa: ANN001
    import sys
    import types

    from nightowl.collectors.base import Collector

    module = types.ModuleType("nightowl_test_unsafe")
    module.COLLECTOR = Collector(kind="reset", commands=(("nvidia-smi", "-r"),), parse=lambda text: {})  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "nightowl_test_unsafe", module)
    monkeypatch.setitem(MODULES, "reset", "nightowl_test_unsafe")
    with pytest.raises(UnsafeCollector, match="resets|changes GPU state"):
        get_collector("reset")
    runbook = collect_and_end(tmp_path / "bad.yaml", "bad", "reset")
    from nightowl.engine.validate import RunbookInvalid
    from nightowl.library import runbooks

    with pytest.raises(RunbookInvalid, match=r"bad.yaml:5: \[node a\] collector 'reset' is not read-only"):
        runbooks.load(str(runbook))


def test_a_derived_collector_needs_its_inputs_collected(tmp_path) -> None:  # noqa: ANN001
    from nightowl.engine.validate import RunbookInvalid
    from nightowl.library import runbooks

    runbook = collect_and_end(tmp_path / "derived.yaml", "d", "nvidia-smi, xid-judgement")
    with pytest.raises(RunbookInvalid, match=r"derived.yaml:5: \[node a\] xid-judgement derives from kernel_log"):
        runbooks.load(str(runbook))
    runbook.write_text(runbook.read_text().replace("[nvidia-smi, xid-judgement]", "[kernel-log, xid-judgement]"))
    runbooks.load(str(runbook))


class _Spy:
    """A transport that records what it was asked to run and runs nothing."""

    host = "gpu-01"

    def __init__(self) -> None:
        self.ran: list[tuple[str, ...]] = []

    def run(self, argv: tuple[str, ...], timeout: float, kind: str | None = None):  # noqa: ANN201
        from nightowl.transports.base import CommandResult

        self.ran.append(tuple(argv))
        return CommandResult(argv=tuple(argv), rc=0, stdout="INFO vLLM\n", stderr="", started=0.0, duration=0.0)


class _NoRecord:
    def record_command(self, host: str, kind: str, result: object, keep_output: bool) -> None:
        return None


@pytest.mark.parametrize(
    ("value", "runs"),
    [("/var/log/vllm.log", True), ("", False), ("/var/log/vllm.log\x00-r", False)],
    ids=["a-path", "empty", "nul"],
)
def test_the_runner_checks_each_resolved_command_against_the_allow_list(value: str, runs: bool) -> None:
    """A parameter value that makes an allowed shape into another is that collector's error, never a run."""
    from nightowl.engine.runner import RunOptions, collect_on

    spy = _Spy()
    run = collect_on(spy, get_collector("engine-log"), _NoRecord(), RunOptions(params={"engine_log_file": value}))
    if runs:
        assert spy.ran == [("tail", "-n", "5000", "--", value)]
        return
    assert spy.ran == [] and run.status == "error"
    assert "refused to run `tail -n 5000 --" in (run.reason or "") and "read-only command shapes" in (run.reason or "")


def test_an_option_value_inside_an_element_may_start_with_a_dash() -> None:
    """`--since=-2h` (the kernel-log's documented since) is a value, not an option: the resolved check allows it."""
    argv = ("journalctl", "-k", "-b", "--no-pager", "-o", "short-iso", "--since=-2h")
    assert allowed_shape(argv, resolved=True) is not None
