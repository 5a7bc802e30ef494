"""Never an unlogged action (issue 42 item 4): a cut last line in actions.jsonl, the intent logged before
acting, a log that cannot take a line, and a confirming sinfo that fails after the drain."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from nightowl.cli.main import main
from nightowl.fleet import actions_log
from nightowl.fleet.breaker import NodeState
from nightowl.fleet.slurm_actions import SlurmError, drain, resume
from tests.fleet.test_breaker import NOW, FakeSlurm, _cluster

REASON = "nightowl: gpu-fell-off-bus (reboot-node)"


def cut_log(path: Path) -> bytes:
    """Two whole lines, then a third cut mid-write (a crash or a full disk): no newline, half an object."""
    actions_log.append(path, {"node": "n10", "what": "drain", "why": REASON, "result": "intended"})
    actions_log.append(path, {"node": "n10", "what": "drain", "why": REASON, "result": "drained"})
    cut = b'{"bundle": null, "node": "n11", "what": "drain", "why": "nightowl: x (reb'
    with path.open("ab") as handle:
        handle.write(cut)
    return cut


def test_a_cut_last_line_is_skipped_and_recorded_as_a_break(tmp_path: Path) -> None:
    log = tmp_path / "actions.jsonl"
    cut_log(log)
    assert [e["result"] for e in actions_log.read(log)] == ["intended", "drained"]  # reading never fails on it
    state = actions_log.breaker_state(log)
    assert state is not None and state["open"] is None and "line 3 cut short" in state["error"]  # unknown, not closed
    slurm = FakeSlurm(_cluster(0))
    entry = drain(slurm, "n00", "gpu-fell-off-bus", "reboot-node", _caps(), log, now=lambda: NOW, settle=0)
    assert entry["result"] == "drained" and slurm.calls == [("drain", "n00")]
    lines = log.read_text().splitlines()
    assert len(lines) == 6 and json.loads(lines[2 + 1])["result"] == "break"  # the cut line stays, ended
    brk = actions_log.read(log)[2]
    assert (brk["what"], brk["result"]) == ("log", "break") and brk["why"].startswith("line 3 cut (")
    assert brk["prev"] == actions_log.read(log)[1]["hash"]  # the chain goes on from the last whole line
    assert [e["result"] for e in actions_log.read(log)[3:]] == ["intended", "drained"]
    # verify says where the break is, and only there
    assert actions_log.verify(log) == ["line 3: cut short (not a whole JSON line); the log goes on after it"]
    assert actions_log.breaker_state(log)["error"] is None  # type: ignore[index]
    # resume reads the log to know its own drains: the cut line does not stop it either
    assert resume(slurm, "n00", log)["result"] == "resumed"


def test_a_cut_log_never_makes_the_cli_act_and_exit_70(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    log = tmp_path / "actions.jsonl"
    cut_log(log)
    slurm = FakeSlurm(_cluster(0))
    monkeypatch.setattr("nightowl.fleet.slurm_actions.Slurm", lambda: slurm)
    args = ["slurm", "drain", "n01", "--verdict", "v", "--action", "reboot-node", "--actions-log", str(log)]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 0, result.output
    assert [e["result"] for e in actions_log.read(log)] == ["intended", "drained", "break", "intended", "drained"]


def _caps() -> Any:
    from nightowl.fleet.breaker import Caps

    return Caps(max_drain=5)


class Watching(FakeSlurm):
    """Checks at each change that the log already holds the intent for it."""

    def __init__(self, nodes: dict[str, NodeState], log: Path) -> None:
        super().__init__(nodes)
        self.log = log

    def drain(self, node: str, reason: str) -> None:
        last = actions_log.read(self.log)[-1]
        assert (last["node"], last["what"], last["result"]) == (node, "drain", "intended")
        super().drain(node, reason)

    def resume(self, node: str) -> None:
        last = actions_log.read(self.log)[-1]
        assert (last["node"], last["result"]) == (node, "intended")
        super().resume(node)


def test_the_intent_is_logged_before_acting_and_the_outcome_after(tmp_path: Path) -> None:
    log = tmp_path / "actions.jsonl"
    slurm = Watching(_cluster(0), log)
    drain(slurm, "n00", "gpu-fell-off-bus", "reboot-node", _caps(), log, now=lambda: NOW, settle=0)
    resume(slurm, "n00", log)
    assert [(e["what"], e["result"]) for e in actions_log.read(log)] == [
        ("drain", "intended"),
        ("drain", "drained"),
        ("resume", "intended"),
        ("resume", "resumed"),
    ]
    assert actions_log.verify(log) == []


class FailingScontrol(FakeSlurm):
    def drain(self, node: str, reason: str) -> None:
        raise SlurmError("scontrol update: slurm_update error: Invalid node state specified")


def test_a_failed_drain_after_its_intent_is_logged_failed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    log = tmp_path / "actions.jsonl"
    monkeypatch.setattr("nightowl.fleet.slurm_actions.Slurm", lambda: FailingScontrol(_cluster(0)))
    args = ["slurm", "drain", "n01", "--verdict", "v", "--action", "reboot-node", "--actions-log", str(log)]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 5
    logged = actions_log.read(log)
    assert [e["result"] for e in logged] == ["intended", "failed"] and "Invalid node state" in logged[1]["why"]


def test_a_log_that_cannot_take_the_intent_means_no_action(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A full disk or a log on a read-only mount: nothing is done, and the command says it could not log."""
    slurm = FakeSlurm(_cluster(0))
    monkeypatch.setattr("nightowl.fleet.slurm_actions.Slurm", lambda: slurm)
    (tmp_path / "a-file").write_text("")
    unwritable = tmp_path / "a-file" / "actions.jsonl"  # its folder cannot be made: every write fails
    args = ["slurm", "drain", "n01", "--verdict", "v", "--action", "reboot-node", "--actions-log", str(unwritable)]
    result = CliRunner().invoke(main, [*args, "--format", "json"])
    assert result.exit_code == 5, result.output
    (entry,) = json.loads(result.output)["actions"]
    assert entry["result"] == "failed" and entry["logged"] is False and "not logged" in entry["why"]
    assert slurm.calls == []  # never drained without its line


class SinfoFailsAfterDrain(FakeSlurm):
    def nodes(self) -> dict[str, NodeState]:
        if self.calls:
            raise SlurmError("sinfo: slurm_load_partitions: Unable to contact slurm controller (connect failure)")
        return super().nodes()


def test_a_confirming_sinfo_that_fails_gives_drained_unconfirmed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = tmp_path / "actions.jsonl"
    slurm = SinfoFailsAfterDrain(_cluster(0))
    monkeypatch.setattr("nightowl.fleet.slurm_actions.Slurm", lambda: slurm)
    monkeypatch.setattr("nightowl.fleet.slurm_actions.SETTLE_S", 0.0)
    args = ["slurm", "drain", "n01", "--verdict", "v", "--action", "reboot-node", "--max-drain", "3"]
    result = CliRunner().invoke(main, [*args, "--actions-log", str(log), "--format", "json"])
    assert result.exit_code == 5, result.output  # drained but unconfirmed: automation must look
    (entry,) = json.loads(result.output)["actions"]
    assert entry["result"] == "drained-unconfirmed" and "Unable to contact slurm controller" in entry["why"]
    assert slurm.state["n01"].drained  # left drained: never undone blind, never unlogged
    assert [e["result"] for e in actions_log.read(log)] == ["intended", "drained-unconfirmed"]
    # a later resume knows it as its own drain
    assert resume(FakeSlurm(slurm.state), "n01", log)["result"] == "resumed"


class Kube:
    """The nodes' conditions in a dict; the read after the patch fails when ``fail_after_patch``."""

    def __init__(self, fail_after_patch: bool) -> None:
        self.conditions: dict[str, dict[str, Any] | None] = {f"gpu-{i:02d}": None for i in range(1, 5)}
        self.fail_after_patch = fail_after_patch
        self.patched = 0

    def nodes(self) -> dict[str, dict[str, Any] | None]:
        if self.patched and self.fail_after_patch:
            from nightowl.fleet.k8s_condition import KubectlError

            raise KubectlError("kubectl get: Unable to connect to the server: net/http: TLS handshake timeout")
        return dict(self.conditions)

    def patch(self, node: str, condition: dict[str, Any]) -> None:
        self.patched += 1
        self.conditions[node] = condition


def test_a_condition_whose_confirming_read_fails_is_set_unconfirmed(tmp_path: Path) -> None:
    from nightowl.fleet.k8s_condition import Timing, set_condition

    log = tmp_path / "actions.jsonl"
    cut_log(log)  # and a cut log changes nothing for a condition either
    kube = Kube(fail_after_patch=True)
    report = {"hosts": [{"host": "gpu-01", "verdict": {"id": "gpu-fell-off-bus", "summary": "s"}}]}
    entry = set_condition(kube, "gpu-01", report, 1, _caps(), log, timing=Timing(settle=0))
    assert entry["result"] == "set-unconfirmed" and "TLS handshake timeout" in entry["why"]
    assert kube.conditions["gpu-01"]["status"] == "False"  # type: ignore[index]
    assert [e["result"] for e in actions_log.read(log)][-3:] == ["break", "intended", "set-unconfirmed"]
