"""The engine on generic collectors: it knows nothing about GPUs, so neither do these tests."""

from __future__ import annotations

import json
import stat
import sys
import textwrap
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from nightowl.engine.bundle_summary import unreachable_in_bundle
from nightowl.engine.bundle_verify import verify_bundle
from nightowl.engine.runner import RunOptions
from nightowl.engine.session import plan, run_runbook
from nightowl.engine.validate import load_runbook
from nightowl.transports.local import LocalTransport
from nightowl.transports.replay import ReplayTransport
from tests.engine.runbook_texts import variant


@dataclass(frozen=True)
class LineCounter:
    """Counts lines of its command's output."""

    kind: str
    commands: tuple[tuple[str, ...], ...]
    timeout: float = 5.0
    invasive: bool = False
    description: str = ""
    calls: list[str] = field(default_factory=list)

    def parse(self, text: str) -> dict[str, Any]:
        self.calls.append(text)
        if "CRASH" in text:
            raise ValueError("parser bug")
        return {"kind": self.kind, "warnings": [], "lines": len(text.splitlines())}

    def facts(self, result: Any) -> dict[str, Any]:
        return result


PY = sys.executable
COLLECTORS = {
    "three-lines": LineCounter("three-lines", ((PY, "-c", "print('a\\nb\\nc')"),)),
    "hangs": LineCounter("hangs", ((PY, "-c", "import time; time.sleep(30)"),), timeout=0.5),
    "missing": LineCounter("missing", (("/nonexistent/tool",), (PY, "-c", "print('fallback')"))),
    "crashes-parser": LineCounter("crashes-parser", ((PY, "-c", "print('CRASH')"),)),
    "loads-gpu": LineCounter("loads-gpu", ((PY, "-c", "print('x')"),), invasive=True),
}

RUNBOOK = """\
id: generic
title: generic
parameters:
  want: {default: 3}
entry: gather
nodes:
  gather:
    collect: [three-lines, hangs, missing, crashes-parser, loads-gpu]
    next: judge
  judge:
    decide:
      - when: "status.hangs == 'timed_out' and three_lines.lines == params.want"
        goto: hung
      - when: "three_lines.nonexistent == 1"
        goto: never
    default: fine
  hung:
    verdict:
      id: hung
      severity: critical
      action: escalate
      summary: "the tool hung; {{ three_lines.lines }} lines; fallback said {{ missing.lines }} line"
      evidence: [three_lines.lines, status.hangs]
  never:
    verdict: {id: never, severity: ok, action: none, summary: x}
  fine:
    verdict: {id: fine, severity: ok, action: none, summary: fine}
"""


def load(tmp_path: Path, text: str = RUNBOOK, collectors: Any = COLLECTORS, name: str = "generic.yaml"):
    path = tmp_path / name
    path.write_text(textwrap.dedent(text))
    return load_runbook(path, known_collectors=collectors)


def one_collector(kind: str, condition: str, summary: str, evidence: str) -> str:
    """RUNBOOK gathering only ``kind``: `judge` goes to `hung` on ``condition`` (the second rule reads
    only a parameter) and the verdict says ``summary`` with ``evidence``."""
    return variant(
        RUNBOOK,
        ("collect: [three-lines, hangs, missing, crashes-parser, loads-gpu]", f"collect: [{kind}]"),
        ("status.hangs == 'timed_out' and three_lines.lines == params.want", condition),
        ("three_lines.nonexistent == 1", "params.want == 0"),
        (
            'summary: "the tool hung; {{ three_lines.lines }} lines; fallback said {{ missing.lines }} line"',
            f"summary: {summary}",
        ),
        ("evidence: [three_lines.lines, status.hangs]", f"evidence: [{evidence}]"),
    )


def run_on_box(
    loaded: Any, out: Path, params: dict[str, Any], collectors: Any = COLLECTORS, transport: Any = None, **kw: Any
) -> tuple[list[Any], Path]:
    """``loaded`` run on one host, box: this machine, or the one ``transport`` builds."""
    transports = {"box": transport or (lambda: LocalTransport("box"))}
    return run_runbook(loaded, transports, collectors.__getitem__, RunOptions(params=params), out, **kw)


def test_walk_statuses_trace_and_bundle(tmp_path: Path) -> None:
    loaded = load(tmp_path)
    runs, bundle = run_on_box(loaded, tmp_path / "out", {"want": 3})
    run = runs[0]
    assert run.status == "ok"
    assert run.path == ["gather", "judge", "hung"]
    statuses = {k: c.status for k, c in run.collections.items()}
    assert statuses == {
        "three-lines": "ok",
        "hangs": "timed_out",
        "missing": "ok",
        "crashes-parser": "error",
        "loads-gpu": "skipped",
    }
    assert "parser bug" in run.collections["crashes-parser"].parse_error
    assert run.verdict["summary"] == "the tool hung; 3 lines; fallback said 1 line"
    assert run.verdict["evidence"][0] == {
        "fact": "three_lines.lines",
        "value": 3,
        "source": "hosts/box/three-lines.out",
    }
    # bundle layout (docs/reference.md#recorded-hosts-and-bundles)
    host_dir = bundle / "hosts" / "box"
    assert (host_dir / "three-lines.out").read_text() == "a\nb\nc\n"
    assert (host_dir / "hangs.timeout").exists()
    assert not (bundle.parent / f".{bundle.name}.partial").exists()
    assert stat.S_IMODE(bundle.stat().st_mode) == 0o700
    manifest = json.loads((bundle / "manifest.json").read_text())
    argvs = [c["argv"][0] for c in manifest["commands"] if c["kind"] == "missing"]
    assert argvs == ["/nonexistent/tool", PY]  # every attempt is in the manifest
    assert verify_bundle(bundle) == []
    trace = json.loads((bundle / "trace.json").read_text())
    judge = trace["hosts"][0]["nodes"][1]
    assert judge["conditions"][0]["reads"] == {
        "status.hangs": "timed_out",
        "three_lines.lines": 3,
        "params.want": 3,
    }
    assert judge["conditions"][0]["value"] is True
    verdicts = json.loads((bundle / "verdicts.json").read_text())
    assert verdicts["hosts"][0]["verdict"]["id"] == "hung"


def test_condition_on_missing_fact_is_no_verdict_not_false(tmp_path: Path) -> None:
    """Taking a failed condition as false would walk on to `fine`: a false OK."""
    loaded = load(tmp_path)
    runs, _ = run_on_box(loaded, tmp_path / "out", {"want": 99})
    run = runs[0]
    judge = run.visits[1]
    assert run.path[-1] == "judge" and run.verdict is None and run.status == "incomplete"
    assert judge.status == "error"
    assert judge.conditions[1]["value"] is None and "nonexistent" in judge.conditions[1]["error"]
    assert "node judge" in run.error and "nonexistent" in run.error


def test_replay_of_a_bundle_reaches_the_same_verdict(tmp_path: Path) -> None:
    loaded = load(tmp_path)
    _, bundle = run_on_box(loaded, tmp_path / "out", {"want": 3})
    runs, _ = run_on_box(
        loaded, tmp_path / "out2", {"want": 3}, transport=lambda: ReplayTransport(bundle / "hosts" / "box")
    )
    assert runs[0].path == ["gather", "judge", "hung"]
    assert runs[0].collections["hangs"].status == "timed_out"


def test_unreachable_host_and_every_collector_failed(tmp_path: Path) -> None:
    loaded = load(tmp_path)
    empty = tmp_path / "empty-host"
    empty.mkdir()
    transports = {
        "gone": lambda: ReplayTransport(tmp_path / "nowhere"),
        "empty": lambda: ReplayTransport(empty),
    }
    runs, bundle = run_runbook(loaded, transports, COLLECTORS.__getitem__, RunOptions(), tmp_path / "out")
    assert [r.status for r in runs] == ["unreachable", "incomplete"]
    assert runs[0].verdict is None and "no recorded host" in runs[0].error
    assert runs[1].verdict is None and "every collector failed" in runs[1].error
    assert not (bundle / "hosts" / "gone").exists()  # nothing collected: no folder, the reason is in verdicts.json
    assert unreachable_in_bundle(bundle) == {"gone": runs[0].error}


def test_plan_lists_commands_and_marks_invasive(tmp_path: Path) -> None:
    steps = plan(load(tmp_path), COLLECTORS.__getitem__, allow_invasive=False)
    by_kind = {s["collector"]: s for s in steps}
    assert by_kind["loads-gpu"]["skipped"] is True
    assert by_kind["missing"]["commands"][0] == ["/nonexistent/tool"]


def test_engine_imports_nothing_gpu_or_cli() -> None:
    import subprocess

    code = (
        "import sys, nightowl.engine.session, nightowl.engine.validate;"
        "bad=[m for m in sys.modules if m.startswith(('nightowl.collectors','nightowl.cli','click'))];"
        "print(bad)"
    )
    out = subprocess.run([PY, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert out == "[]"


def test_resolve_argv_fills_whole_elements_and_refuses_options() -> None:
    from nightowl.engine.runner import resolve_argv

    assert resolve_argv(("cat", "--", "{path}"), {"path": "/var/log/a b; rm -rf /"}) == (
        "cat",
        "--",
        "/var/log/a b; rm -rf /",
    )
    assert resolve_argv(("journalctl", "--since={since}"), {"since": "2024-01-01"}) == (
        "journalctl",
        "--since=2024-01-01",
    )
    assert resolve_argv(("cat", "{path}"), {"path": None}) is None
    assert resolve_argv(("cat", "{path}"), {}) is None
    assert resolve_argv(("nvidia-smi", "{flag}"), {"flag": "-r"}) is None
    assert resolve_argv(("journalctl", "--since={since}"), {"since": "-2h"}) == ("journalctl", "--since=-2h")


def test_collector_with_unset_parameter_is_skipped(tmp_path: Path) -> None:
    text = one_collector("file", "status.file == 'skipped'", "skipped", "status.file")
    collectors = {"file": LineCounter("file", (("cat", "--", "{path}"),))}
    loaded = load(tmp_path, text, collectors, "p.yaml")
    runs, _ = run_on_box(loaded, tmp_path / "out", {"want": 3}, collectors)
    assert runs[0].collections["file"].status == "skipped" and "path" in runs[0].collections["file"].reason
    target = tmp_path / "x.log"
    target.write_text("1\n2\n")
    runs, _ = run_on_box(loaded, tmp_path / "out", {"want": 3, "path": str(target)}, collectors)
    assert runs[0].collections["file"].facts["lines"] == 2


def test_a_collector_taken_twice_numbers_its_files_and_replays(tmp_path: Path) -> None:
    counter = {"n": 0}

    @dataclass(frozen=True)
    class Ticker(LineCounter):
        def parse(self, text: str) -> dict[str, Any]:
            return {"kind": self.kind, "warnings": [], "value": int(text.strip())}

    script = tmp_path / "tick.py"
    script.write_text(
        f"import pathlib; p=pathlib.Path({str(tmp_path / 'n')!r}); "
        "n=int(p.read_text()) if p.exists() else 0; p.write_text(str(n+1)); print(n+1)"
    )
    collectors = {"tick": Ticker("tick", ((PY, str(script)),))}
    text = """\
    id: twice
    title: twice
    parameters:
      window: {default: 0.2}
    entry: first
    nodes:
      first:
        collect: [tick]
        next: second
      second:
        collect: ["tick:after"]
        wait: window
        next: judge
      judge:
        decide:
          - when: "tick_after.value - tick.value == 1"
            goto: moved
        default: still
      moved:
        verdict: {id: moved, severity: ok, action: none, summary: "{{ tick.value }} -> {{ tick_after.value }}"}
      still:
        verdict: {id: still, severity: ok, action: none, summary: x}
    """
    loaded = load(tmp_path, text, collectors, "twice.yaml")
    del counter
    runs, bundle = run_on_box(loaded, tmp_path / "out", {"window": 0.2}, collectors)
    assert runs[0].verdict["summary"] == "1 -> 2"
    assert runs[0].visits[1].duration >= 0.2  # waited for the window
    host = bundle / "hosts" / "box"
    assert (host / "tick.1.out").read_text() == "1\n" and (host / "tick.2.out").read_text() == "2\n"
    assert not (host / "tick.out").exists()
    manifest = json.loads((bundle / "manifest.json").read_text())
    assert [c["file"] for c in manifest["commands"]] == ["hosts/box/tick.1.out", "hosts/box/tick.2.out"]
    trace = json.loads((bundle / "trace.json").read_text())
    assert trace["hosts"][0]["collectors"]["tick"]["file"] == "hosts/box/tick.1.out"
    assert trace["hosts"][0]["collectors"]["tick:after"]["file"] == "hosts/box/tick.2.out"
    replayed, _ = run_on_box(
        loaded, tmp_path / "out2", {"window": 0.2}, collectors, transport=lambda: ReplayTransport(host)
    )
    assert replayed[0].verdict["summary"] == "1 -> 2"


def test_secrets_never_reach_the_bundle(tmp_path: Path) -> None:
    from nightowl.redact import scrub_secrets

    secret = "hf_abcdefghijklmnopqrstuvwxyz0123456789"
    collectors = {"leaky": LineCounter("leaky", ((PY, "-c", f"print('HF_TOKEN={secret}')", f"--api-key={secret}"),))}
    text = one_collector("leaky", "leaky.lines == 1", "leaked", "leaky.lines")
    loaded = load(tmp_path, text, collectors, "leak.yaml")
    _, bundle = run_on_box(loaded, tmp_path / "out", {"want": 3}, collectors, redact=scrub_secrets)
    for file in bundle.rglob("*"):
        if file.is_file():
            assert secret not in file.read_text(), file
    assert verify_bundle(bundle) == []


class CountingTransport:
    """Replays a line per command, noting how many of its commands run at once."""

    def __init__(self, host: str) -> None:
        self.host = host
        self.now = 0
        self.most = 0
        self.lock = threading.Lock()

    def connect(self) -> None:
        return None

    def close(self) -> None:
        return None

    def run(self, argv: Any, timeout: float, kind: str | None = None) -> Any:
        from nightowl.transports.base import CommandResult

        with self.lock:
            self.now += 1
            self.most = max(self.most, self.now)
        time.sleep(0.05)
        with self.lock:
            self.now -= 1
        return CommandResult(tuple(argv), 0, "a\nb\n", "", time.time(), 0.05)


def test_a_runs_shared_collector_threads_keep_each_hosts_concurrency(tmp_path: Path) -> None:
    kinds = {f"c{i}": LineCounter(f"c{i}", ((PY, "-c", "print(1)"),)) for i in range(6)}
    text = "id: wide\ntitle: t\nentry: gather\nnodes:\n"
    text += "  gather:\n    collect: [c0, c1, c2, c3, c4, c5]\n    next: end\n"
    text += "  end:\n    verdict: {id: done, severity: ok, action: none, summary: '{{ c5.lines }}'}\n"
    path = tmp_path / "wide.yaml"
    path.write_text(text)
    loaded = load_runbook(path, known_collectors=kinds)
    hosts = {f"h{i}": CountingTransport(f"h{i}") for i in range(3)}
    runs, _ = run_runbook(
        loaded,
        {name: (lambda t=t: t) for name, t in hosts.items()},
        kinds.__getitem__,
        RunOptions(concurrency=2),
        tmp_path / "out",
        forks=3,
    )
    assert [r.verdict["summary"] for r in runs] == ["2", "2", "2"]
    assert all(r.collections[f"c{i}"].status == "ok" for r in runs for i in range(6))
    assert [t.most for t in hosts.values()] == [2, 2, 2]  # side by side, never more than `concurrency`
