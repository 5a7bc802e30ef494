"""Background collect nodes (nightowl/engine/background.py) and `wait: name / N`, on generic collectors."""

from __future__ import annotations

import json
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from nightowl.engine.background import check_wait, wait_seconds
from nightowl.engine.model import Node
from nightowl.engine.runner import RunOptions
from nightowl.engine.session import run_runbook
from nightowl.engine.validate import load_runbook
from nightowl.transports.base import CommandResult
from nightowl.transports.local import LocalTransport
from nightowl.transports.replay import ReplayTransport

PY = sys.executable


@dataclass(frozen=True)
class Stamp:
    """Prints the time it started (and sleeps ``seconds`` after), so a test can order commands by clock."""

    kind: str
    seconds: float = 0.0
    timeout: float = 5.0
    invasive: bool = False
    description: str = ""

    @property
    def commands(self) -> tuple[tuple[str, ...], ...]:
        script = f"import time; print(time.time(), flush=True); time.sleep({self.seconds}); print(time.time())"
        return ((PY, "-c", script),)

    def parse(self, text: str) -> dict[str, Any]:
        lines = text.split()
        ended = float(lines[1]) if len(lines) > 1 else None
        return {"kind": self.kind, "warnings": [], "started": float(lines[0]), "ended": ended is not None, "at": ended}

    def facts(self, result: Any) -> dict[str, Any]:
        return result


@dataclass(frozen=True)
class Earliest:
    """A derived collector: the earliest start among its inputs (it must see the background's facts)."""

    kind: str = "earliest"
    inputs: tuple[str, ...] = ("slow", "quick")
    commands: tuple[tuple[str, ...], ...] = ()
    timeout: float = 1.0
    invasive: bool = False
    description: str = ""

    def parse(self, text: str) -> dict[str, Any]:
        return {}

    def facts(self, result: Any) -> dict[str, Any]:
        return result

    def derive(self, inputs: dict[str, Any], params: dict[str, Any]) -> dict[str, Any]:
        return {"kind": self.kind, "warnings": [], "first": min(inputs[n]["started"] for n in self.inputs)}


COLLECTORS: dict[str, Any] = {
    "slow": Stamp("slow", seconds=3.0),  # long enough that a loaded machine still starts `quick` inside it
    "quick": Stamp("quick"),
    "hangs": Stamp("hangs", seconds=30, timeout=0.5),
    "earliest": Earliest(),
}

RUNBOOK = """\
id: background
title: background
parameters:
  window: {default: 1.0}
entry: early
nodes:
  early:
    collect: [slow, hangs]
    background: {background}
    next: later
  later:
    wait: window / 2
    collect: [quick]
    next: derive
  derive:
    collect: [earliest]
    next: judge
  judge:
    decide:
      - when: "slow.ended == true and status.hangs == 'timed_out' and earliest.first == slow.started"
        goto: seen
    default: unseen
  seen:
    verdict: {id: seen, severity: ok, action: none, summary: "slow started {{ slow.started }}"}
  unseen:
    verdict: {id: unseen, severity: warning, action: escalate, summary: unseen}
"""


def run(tmp_path: Path, background: bool, transport: Any = None, out: str = "out") -> tuple[Any, Path]:
    path = tmp_path / "background.yaml"
    path.write_text(textwrap.dedent(RUNBOOK.replace("{background}", "true" if background else "false")))
    loaded = load_runbook(path, known_collectors=COLLECTORS)
    opener = transport or (lambda: LocalTransport("box"))
    # The runbook's parameter defaults, as run_and_save resolves them: `wait: window / 2` is then 0.5 s
    options = RunOptions(params=loaded.resolve_params({}))
    runs, bundle = run_runbook(loaded, {"box": opener}, COLLECTORS.__getitem__, options, tmp_path / out)
    return runs[0], bundle


def test_the_walk_goes_on_while_a_background_node_runs(tmp_path: Path) -> None:
    run_, bundle = run(tmp_path, background=True)
    facts = {c.namespace: c.facts for c in run_.collections.values()}
    # the half-window wait and the quick collector ran while `slow` (3 s) was still sleeping
    assert facts["quick"]["started"] < facts["slow"]["at"]
    later = run_.visits[1]
    assert later.node == "later" and facts["quick"]["started"] >= later.started + 0.5 - 0.05  # wait: window / 2
    # joined before any fact was read: the derived collector and the decision saw every background fact
    assert run_.verdict["id"] == "seen" and run_.path == ["early", "later", "derive", "judge", "seen"]
    early = run_.visits[0]
    assert early.collectors == {"slow": "ok", "hangs": "timed_out"} and early.status == "timed_out"
    assert early.duration >= 1.0  # the visit lasts until its collectors ended, not until it handed on
    trace = json.loads((bundle / "trace.json").read_text())
    assert trace["hosts"][0]["nodes"][0]["collectors"] == {"slow": "ok", "hangs": "timed_out"}
    assert len((bundle / "hosts" / "box" / "slow.out").read_text().split()) == 2  # its whole output kept


def test_without_background_the_same_walk_waits_for_the_node(tmp_path: Path) -> None:
    """The control: the same runbook, `background: false`, takes the quick collector after the slow one."""
    run_, _ = run(tmp_path, background=False)
    facts = {c.namespace: c.facts for c in run_.collections.values()}
    assert facts["quick"]["started"] >= facts["slow"]["at"]
    assert run_.verdict["id"] == "seen"


def test_a_replay_of_a_background_run_reaches_the_same_verdict(tmp_path: Path) -> None:
    _, bundle = run(tmp_path, background=True)
    replayed, _ = run(tmp_path, True, lambda: ReplayTransport(bundle / "hosts" / "box"), out="out2")
    assert replayed.verdict["id"] == "seen" and replayed.collections["hangs"].status == "timed_out"


@pytest.mark.parametrize(
    ("wait", "params", "seconds"),
    [
        (3, {}, 3.0),
        (None, {}, None),
        ("window", {"window": 5}, 5.0),
        ("window / 2", {"window": 5}, 2.5),
        ("window/4", {"window": 2.0}, 0.5),
        ("window / 2", {"window": None}, None),
        ("window / 2", {"window": True}, None),
        ("window / 2", {}, None),
    ],
)
def test_wait_seconds(wait: Any, params: dict[str, Any], seconds: float | None) -> None:
    assert wait_seconds(wait, params) == seconds


@pytest.mark.parametrize("wait", ["window * 2", "window / 0", "2 / window", "window / x", "params.window", ""])
def test_a_wait_of_another_form_is_refused(wait: str) -> None:
    with pytest.raises(ValueError, match="parameter over a number"):
        check_wait(wait)
    with pytest.raises(ValidationError):
        Node(wait=wait, collect=["quick"], next="x")


def test_background_belongs_to_collect_nodes_without_wait() -> None:
    assert Node(collect=["quick"], background=True, next="x").background
    with pytest.raises(ValidationError, match="background"):
        Node(collect=["quick"], background=True, wait=1, next="x")
    with pytest.raises(ValidationError, match="background"):
        Node(cannot_judge="x", background=True)


def test_a_wait_tells_the_transport_to_forget_what_it_read_ahead(tmp_path: Path) -> None:
    """A kept connection may have read a command ahead in a batch (transports/kept.py): after `wait:` the walk
    asks for reads after the pause, so the transport is told to drop them before the later node's reads."""
    said: list[str] = []

    class ReadsAhead(LocalTransport):
        def run(self, argv: Any, timeout: float, kind: str | None = None) -> Any:
            said.append(f"run {kind}")
            return super().run(argv, timeout, kind=kind)

        def forget_batched(self) -> None:
            said.append("forget")

    run_, _ = run(tmp_path, background=False, transport=lambda: ReadsAhead("box"))
    assert run_.verdict["id"] == "seen"
    assert said.index("forget") > max(said.index("run slow"), said.index("run hangs"))
    assert said.index("forget") < said.index("run quick") and said.count("forget") == 1


JOB_WAITS = """\
id: job-waits
title: job-waits
scope: job
parameters:
  window: {default: 0.2}
entry: early
nodes:
  early:
    collect: [quick]
    next: later
  later:
    wait: window
    collect: ["quick:again"]
    next: done
  done:
    verdict: {id: done, severity: ok, action: none, summary: done}
"""


def test_a_jobs_wait_tells_every_members_transport_to_forget_what_it_read_ahead(tmp_path: Path) -> None:
    """A job's collect node runs on every member: each member's read after the pause is read after it."""
    said: list[str] = []

    class ReadsAhead(LocalTransport):
        def forget_batched(self) -> None:
            said.append(self.host)

    path = tmp_path / "job.yaml"
    path.write_text(JOB_WAITS)
    loaded = load_runbook(path, known_collectors=COLLECTORS)
    members = {name: (lambda name=name: ReadsAhead(name)) for name in ("m1", "m2", "m3")}
    options = RunOptions(params=loaded.resolve_params({}))
    run_runbook(loaded, members, COLLECTORS.__getitem__, options, tmp_path / "out")
    assert sorted(said) == ["m1", "m2", "m3"]


def test_a_wait_drops_the_answers_readers_share_so_none_is_taken_after_it(tmp_path: Path) -> None:
    """An answer one reader's run left for another kind (engine/shared_reads.py) was read before the pause: a
    later node's reader of another kind runs its own."""
    from nightowl.engine.incremental import CursorBook

    book = CursorBook(lambda host, kind: None)
    argv = ("nvidia-smi", "--query-gpu=index")
    book.shared.run("m1", "nvidia-smi", argv, 5.0, lambda: CommandResult(argv, 0, "before\n", "", 0.0, 0.0))
    book.shared.run("m2", "nvidia-smi", argv, 5.0, lambda: CommandResult(argv, 0, "before\n", "", 0.0, 0.0))
    path = tmp_path / "job.yaml"
    path.write_text(JOB_WAITS)
    loaded = load_runbook(path, known_collectors=COLLECTORS)
    members = {"m1": lambda: LocalTransport("m1")}
    options = RunOptions(params=loaded.resolve_params({}), cursors=book)
    run_runbook(loaded, members, COLLECTORS.__getitem__, options, tmp_path / "out")
    after = book.shared.run("m1", "fabric", argv, 5.0, lambda: CommandResult(argv, 0, "after\n", "", 0.0, 0.0))
    kept = book.shared.run("m2", "fabric", argv, 5.0, lambda: CommandResult(argv, 0, "after\n", "", 0.0, 0.0))
    assert after.stdout == "after\n" and kept.stdout == "before\n"  # only the host that waited forgets
