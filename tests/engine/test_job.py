"""Runbooks over a group of hosts: merged facts, per-host facts, one verdict for the job."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from nightowl.engine.runner import RunOptions
from nightowl.engine.session import run_runbook
from nightowl.engine.validate import load_runbook
from nightowl.transports.replay import ReplayTransport
from tests.engine.runbook_texts import write_runbook
from tests.engine.test_runner import LineCounter

COLLECTORS = {"ranks": LineCounter("ranks", (("cat", "/var/log/ranks.log"),))}

JOB = """\
id: job
title: job
scope: job
entry: gather
nodes:
  gather:
    collect: [ranks]
    next: judge
  judge:
    decide:
      - when: "unreachable_hosts | length > 0"
        goto: member-lost
      - when: "ranks.lines != 4"
        goto: odd
    default: straggler
  member-lost:
    verdict:
      {id: member-lost, severity: critical, action: escalate, summary: "lost {{ unreachable_hosts }}",
       implicates: unreachable_hosts}
  odd:
    verdict: {id: odd, severity: ok, action: none, summary: "{{ ranks.lines }}"}
  straggler:
    verdict:
      id: straggler
      severity: warning
      action: drain-and-reset
      summary: >
        {% for h, f in hosts | dictsort %}{% if f.ranks.lines == 1 %}pull {{ h }}{% endif %}{% endfor %}
      gpus: "[hosts['b'].ranks.lines]"
      implicates: "hosts | members_with('ranks.lines', 1)"
"""


def job_with_members(tmp_path: Path, ranks: dict[str, str]) -> Any:
    """JOB loaded, with a recorded folder per member holding its ``ranks.out``."""
    loaded = load_runbook(write_runbook(tmp_path, JOB, "job.yaml"), known_collectors=COLLECTORS)
    for host, text in ranks.items():
        (tmp_path / host).mkdir()
        (tmp_path / host / "ranks.out").write_text(text)
    return loaded


def run_job(loaded: Any, transports: dict[str, Any], tmp_path: Path) -> tuple[list[Any], Path]:
    return run_runbook(loaded, transports, COLLECTORS.__getitem__, RunOptions(), tmp_path / "out")


def test_job_merges_outputs_and_names_the_host(tmp_path: Path) -> None:
    ranks = {host: "".join(f"{host} rank {i}\n" for i in range(lines)) for host, lines in (("a", 3), ("b", 1))}
    loaded = job_with_members(tmp_path, ranks)
    transports = {h: (lambda d=tmp_path / h: ReplayTransport(d)) for h in ("a", "b")}
    runs, bundle = run_job(loaded, transports, tmp_path)
    assert [r.host for r in runs] == ["a", "b"]
    assert {r.verdict["id"] for r in runs} == {"straggler"}
    assert runs[0].verdict["summary"] == "pull b"
    assert runs[0].verdict["gpus"] == [1]
    assert (bundle / "hosts" / "a" / "ranks.out").read_text().count("\n") == 3
    assert (bundle / "hosts" / "b" / "ranks.out").read_text() == "b rank 0\n"
    verdicts = json.loads((bundle / "verdicts.json").read_text())
    assert [h["path"] for h in verdicts["hosts"]] == [["gather", "judge", "straggler"]] * 2
    roles = {m["host"]: m["role"] for m in verdicts["job"]["members"]}
    assert roles == {"a": "not implicated", "b": "act on: drain-and-reset"}  # from b's own facts, not the prose
    assert verdicts["job"]["implicated"] == ["b"] and verdicts["job"]["not_implicated"] == ["a"]


def test_job_with_an_unreachable_member(tmp_path: Path) -> None:
    loaded = job_with_members(tmp_path, {"a": "x\n"})
    transports = {"a": lambda: ReplayTransport(tmp_path / "a"), "gone": lambda: ReplayTransport(tmp_path / "no")}
    runs, _ = run_job(loaded, transports, tmp_path)
    assert [r.status for r in runs] == ["ok", "unreachable"]
    assert runs[0].verdict["id"] == "member-lost" and "gone" in runs[0].verdict["summary"]
    assert runs[1].verdict is None


def test_a_member_whose_transport_cannot_be_built_is_unreachable(tmp_path: Path) -> None:
    loaded = job_with_members(tmp_path, {"a": "x\n"})

    def bad_spec() -> ReplayTransport:
        raise ValueError("unknown option 'foo'")

    transports = {"a": lambda: ReplayTransport(tmp_path / "a"), "ssh://x?foo=1": bad_spec}
    runs, bundle = run_job(loaded, transports, tmp_path)
    assert [r.status for r in runs] == ["ok", "unreachable"]
    assert "unknown option 'foo'" in runs[1].error
    assert not list((tmp_path / "out").glob(".*.partial"))  # the bundle was finished, not left half-written
