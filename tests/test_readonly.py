"""Read-only by construction: no registered collector declares a command that changes a node."""

from __future__ import annotations

import pytest

from nightowl.collectors import MODULES, UnsafeCollector, get_collector
from nightowl.collectors.readonly import violations


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
                ("journalctl", "-k", "-b"),
                ("kubectl", "get", "pod", "x", "-o", "json"),
                ("sh", "-c", 'exec docker logs -- "$1"', "x"),
            ]
        )
        == []
    )


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
    runbook = tmp_path / "bad.yaml"
    runbook.write_text(
        "id: bad\ntitle: bad\nentry: a\nnodes:\n  a:\n    collect: [reset]\n    next: v\n"
        "  v:\n    verdict: {id: v, severity: ok, action: none, summary: s}\n"
    )
    from nightowl import runbooks
    from nightowl.engine.validate import RunbookInvalid

    with pytest.raises(RunbookInvalid, match=r"bad.yaml:5: \[node a\] collector 'reset' is not read-only"):
        runbooks.load(str(runbook))


def test_a_derived_collector_needs_its_inputs_collected(tmp_path) -> None:  # noqa: ANN001
    from nightowl import runbooks
    from nightowl.engine.validate import RunbookInvalid

    runbook = tmp_path / "derived.yaml"
    runbook.write_text(
        "id: d\ntitle: d\nentry: a\nnodes:\n  a:\n    collect: [nvidia-smi, xid-judgement]\n"
        "    next: v\n  v:\n    verdict: {id: v, severity: ok, action: none, summary: s}\n"
    )
    with pytest.raises(RunbookInvalid, match=r"derived.yaml:5: \[node a\] xid-judgement derives from kernel_log"):
        runbooks.load(str(runbook))
    runbook.write_text(runbook.read_text().replace("[nvidia-smi, xid-judgement]", "[kernel-log, xid-judgement]"))
    runbooks.load(str(runbook))
