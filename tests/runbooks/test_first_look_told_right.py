"""The first look told right (issue 45 items 1, 2, 3 and two of item 9), on loopback stand-in replicas reached by
URL (tests/runbooks/firstlook_standins.py), as the issue saw each case:

1. onset ("Since") from the implicated replica only; every other finding an "also seen" line;
2. over --replica URLs, only commands that can run: a follow-up that needs the node is not run and says so;
3. a comparison claimed only over what was compared; "connection refused" told from "timed out";
9. the all-clear status update does not say users see nothing when streams were not probed; --replica-inventory
   has an example that loads.
"""

from __future__ import annotations

import json
import re
import shlex
import shutil
import time
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from nightowl.cli.main import main
from nightowl.collectors.serving import replica_health
from tests.runbooks.firstlook_standins import Replica, Window, replicas
from tests.runbooks.record_firstlook_url import FreshReplica


def first_look(specs: dict[str, Replica], tmp_path: Path, *extra: str) -> tuple[Any, dict[str, Any], str]:
    """One URL-only first look: (the CLI result, its JSON report, its status-update.md)."""
    with replicas(specs):
        return look(specs, tmp_path, *extra)


def look(specs: dict[str, Replica], tmp_path: Path, *extra: str) -> tuple[Any, dict[str, Any], str]:
    """first_look on stand-ins already serving."""
    argv = ["triage", "first-look", *[a for n, r in specs.items() for a in ("--replica", f"{n}={r.url}")]]
    argv += ["--param", "window_seconds=0", "--out", str(tmp_path), "--format", "json", *extra]
    result = CliRunner().invoke(main, argv)
    assert result.exit_code in (0, 1, 3), result.output
    document = json.loads(result.stdout[: result.stdout.rindex("}") + 1])
    return result, document, (Path(document["bundle"]) / "status-update.md").read_text()


def verdict_of(document: dict[str, Any]) -> dict[str, Any]:
    return document["hosts"][0]["verdict"]


def line(text: str, head: str) -> str:
    return next(x for x in text.splitlines() if x.startswith(head))


def utc(seconds: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(seconds))


def mixed() -> dict[str, Replica]:
    """r2 answers 503; r3's TTFT rises 4x in the last window (flat traffic); r4, healthy, restarted 90 s ago."""
    specs: dict[str, Replica] = {"r1": Replica(), "r2": Replica(health_status=503), "r3": Replica()}
    specs["r3"].windows = [Window(), Window(), Window(ttft=0.12)]
    specs["r4"] = FreshReplica(90)
    return specs


# ---- 45.1: onset from the implicated replica only; the rest "also seen" ----------------------------------------


def test_partial_outage_is_dated_from_the_failing_replica_not_a_restarted_healthy_one(tmp_path: Path) -> None:
    specs = mixed()
    r4_start = utc(specs["r4"].started)  # type: ignore[attr-defined]
    _, document, update = first_look(specs, tmp_path)
    verdict = verdict_of(document)
    assert verdict["id"] == "partial-down" and verdict["implicated"] == ["r2"]
    summary = verdict["summary"]
    since = re.search(r"Since (.*?) \((.*?)\)\)\.", summary)
    assert since is not None
    assert since.group(1).startswith("at or before ") and "r2 /health 503" in since.group(2)
    assert "the engine process on r4" not in summary and "r4 started then" not in update
    # r3's TTFT and r4's restart are said, as what else was seen, in the verdict and the status update
    also = summary[summary.index("Also seen: ") :]
    assert re.search(r"r3 TTFT x\d+\.\d of its history", also)
    assert f"r4 restarted: its engine process started 1.5 min before the look ({r4_start})" in also
    assert line(update, "Since: ").startswith("Since: at or before ")
    assert "r2 /health 503" in line(update, "Since: ")
    also_line = line(update, "Also seen: ")
    assert "r3 TTFT x" in also_line and "r4 restarted" in also_line


def test_the_recorded_mixed_case_reads_the_same_in_the_status_update(tmp_path: Path) -> None:
    """The issue's mixed case recorded (fixtures/hosts/first-look-mixed-r*, tests/runbooks/record_firstlook_url.py)
    and replayed: the status update dates it from r2 and names r3's TTFT and r4's restart as also seen."""
    from nightowl.engine.bundle_summary import triage_summary
    from nightowl.library.rehearse import rehearsal_cases, replay_case
    from nightowl.reports import status_update

    case = next(c for c in rehearsal_cases("first-look") if c["hosts"][0] == "first-look-mixed-r1")
    runs = replay_case("first-look", case, out_dir=tmp_path)
    summary = triage_summary("first-look", "run-1", tmp_path / "run-1", runs)
    update = status_update.render(summary, now=0)
    verdict = summary["hosts"][0]["verdict"]
    assert verdict["id"] == "partial-down"
    assert re.match(
        r"Since: at or before \S+ \S+ UTC; source: the first failing answer seen: r2 /health 503",
        line(update, "Since: "),
    )
    also = line(update, "Also seen: ")
    assert re.search(
        r"r3 TTFT x\d+\.\d of its history \(latency up\); r4 restarted: its engine process started 1\.5 min", also
    )
    assert "r4" not in line(update, "Since: ") and "Also seen: " in verdict["summary"]
    # the onset's time is a time wherever facts are printed, never a float epoch (1.79651e+09, issue 45.9)
    since = next(e["value"] for e in summary["job"]["facts"] if e["fact"].endswith(".since"))
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", since["time"])


def test_latency_verdict_is_not_dated_by_another_replicas_restart(tmp_path: Path) -> None:
    specs = mixed()
    specs["r2"] = Replica()
    _, document, update = first_look(specs, tmp_path)
    verdict = verdict_of(document)
    assert verdict["id"] == "latency-up-flat-traffic" and verdict["implicated"] == ["r3"]
    assert "Since " not in verdict["summary"]  # r3 did not restart or fail: nothing dates its latency
    assert line(update, "Since: ").startswith("Since: not known: first seen by this check at ")
    assert "r4 restarted" in line(update, "Also seen: ") and "r4 restarted" in verdict["summary"]


def test_a_restart_of_the_implicated_replica_still_dates_it(tmp_path: Path) -> None:
    specs: dict[str, Replica] = {"r1": Replica(), "r2": Replica(), "r3": FreshReplica(90)}
    _, document, update = first_look(specs, tmp_path)
    verdict = verdict_of(document)
    start = utc(specs["r3"].started)  # type: ignore[attr-defined]
    assert verdict["id"] == "replica-restarted"
    assert f"Since {start} (the engine process on r3 started then" in verdict["summary"]
    assert line(update, "Since: ").startswith(f"Since: {start}; source: the engine process on r3 started then")
    assert "Also seen" not in update  # nothing else was found


# ---- 45.2: over --replica URLs, only commands that can run --------------------------------------------------------


def test_follow_over_urls_runs_no_node_runbook_and_names_the_flag(tmp_path: Path) -> None:
    specs: dict[str, Replica] = {"r1": Replica(), "r2": Replica(health_status=503), "r3": Replica()}
    result, document, update = first_look(specs, tmp_path, "--follow")
    verdict = verdict_of(document)
    assert verdict["id"] == "partial-down"
    assert document["followed"] == []  # xid reads the node's kernel log: never run over a URL
    assert not (Path(document["bundle"]) / "next").exists()
    assert "--host r2" not in verdict["next"]["command"] and verdict["next"]["hosts"] == []
    assert "not followed: xid on r2: reached by URL only (--replica)" in result.stderr
    assert "--host NODE" in result.stderr and "--host NODE" in verdict["summary"]
    next_check = line(update, "Next check: ")
    assert "r2: it needs the node (--host NODE)" in next_check


def test_a_mixed_run_names_every_url_replica_its_follow_up_skips() -> None:
    """r5 has a node (--host), r2 only a URL: xid runs on r5 and the note names r2; a step read from here (local)
    needs no note."""
    from nightowl.cli.follow import needing_a_node
    from nightowl.cli.replicas import ReplicaOpener

    transports: dict[str, Any] = {"r2": ReplicaOpener("r2", "http://10.0.0.6:8000"), "r5": object()}
    xid = {"runbook": "xid", "hosts": ["r5"], "params": {}, "command": "nightowl triage xid --host r5"}
    summary = {"hosts": [{"host": "r2", "verdict": {"next": xid, "implicated": ["r2", "r5"]}}]}
    assert needing_a_node(summary, transports) == [
        "not followed: xid on r2: reached by URL only (--replica), and xid needs the node: give it with --host NODE"
        " (or an inventory that names the node)"
    ]
    p99 = {"runbook": "p99-regression", "hosts": ["local"], "params": {}, "command": "nightowl triage ..."}
    summary = {"hosts": [{"host": "r2", "verdict": {"next": p99, "implicated": ["r2"]}}]}
    assert needing_a_node(summary, transports) == []


@pytest.mark.skipif(shutil.which("curl") is None, reason="curl is not installed")
def test_p99_follow_up_over_a_url_is_a_command_that_runs_from_here(tmp_path: Path) -> None:
    specs: dict[str, Replica] = {"r1": Replica(), "r2": Replica(), "r3": Replica()}
    specs["r3"].windows = [Window(), Window(), Window(itl=0.3)]
    with replicas(specs):
        _, document, update = look(specs, tmp_path / "look")
        command = verdict_of(document)["next"]["command"]
        assert command == (f"nightowl triage p99-regression --host local --param metrics_url={specs['r3'].url}/metrics")
        assert "this machine (--host local)" in line(update, "Next check: ")
        # the printed command runs as printed (a 0 s window keeps the test short)
        argv = [*shlex.split(command)[1:], "--param", "window_seconds=0", "--out", str(tmp_path / "p99")]
        ran = CliRunner().invoke(main, [*argv, "--format", "json"])
        assert ran.exit_code in (0, 1), ran.output
        assert json.loads(ran.stdout)["hosts"][0]["verdict"]["id"]
        # and p99-regression takes a --replica too: its metrics_url is the replica's /metrics
        by_url = ["triage", "p99-regression", "--replica", f"r3={specs['r3'].url}", "--param", "window_seconds=0"]
        ran = CliRunner().invoke(main, [*by_url, "--out", str(tmp_path / "p99"), "--format", "json"])
        assert ran.exit_code in (0, 1), ran.output
        assert json.loads(ran.stdout)["hosts"][0]["status"] == "ok"


# ---- 45.3: claim only what was compared; refused is not timed out ----------------------------------------------------


def test_nothing_listening_is_refused_and_claims_no_comparison(tmp_path: Path) -> None:
    specs: dict[str, Replica] = {"r1": Replica(), "r2": Replica(), "r3": Replica()}
    with replicas({"gone": Replica()}) as gone:
        dead = gone["gone"].url  # the stand-in is shut down on leaving: nothing listens there any more
    with replicas(specs):
        argv = ["triage", "first-look", "--replica", f"r1={specs['r1'].url}", "--replica", f"r2={specs['r2'].url}"]
        argv += ["--replica", f"r3={dead}", "--param", "window_seconds=0", "--out", str(tmp_path), "--format", "json"]
        result = CliRunner().invoke(main, argv)
    verdict = verdict_of(json.loads(result.stdout[: result.stdout.rindex("}") + 1]))
    summary = verdict["summary"]
    assert verdict["id"] == "partial-down" and "(r3: connection refused)" in summary
    assert "no answer" not in summary and "with the same" not in summary
    assert "their release could not be compared" in summary and "Not compared: engine version on r3" in summary
    assert "r3 refused the connection: nothing listens on its port" in summary and "not hung" in summary


def test_a_replica_that_never_answers_is_timed_out_not_refused(tmp_path: Path) -> None:
    """The other side of the refused case, end to end: the connection is taken and /health never answers within
    the probe's 5 s (the one test here that waits them out)."""
    specs: dict[str, Replica] = {"r1": Replica(), "r2": Replica(), "r3": Replica(health_delay=5.5)}
    _, document, _ = first_look(specs, tmp_path)
    summary = verdict_of(document)["summary"]
    assert "(r3: no answer in 5 s (timed out))" in summary and "refused" not in summary.replace("not refused", "")
    assert "r3 never answered within the probe's time limit (timed out, not refused)" in summary


def test_only_the_traits_compared_are_claimed_the_same(tmp_path: Path) -> None:
    specs: dict[str, Replica] = {"r1": Replica(), "r2": Replica(), "r3": Replica(health_status=503)}
    specs["r3"].version = None  # type: ignore[assignment]  # /version names none: not compared
    _, document, _ = first_look(specs, tmp_path)
    summary = verdict_of(document)["summary"]
    assert "with the same weights and context length (compared on that only)" in summary
    assert "the node, not the release" not in summary and "engine version on r3" in summary
    # all three compared and alike: then, and only then, the node and not the release
    _, document, _ = first_look({"r1": Replica(), "r2": Replica(), "r3": Replica(health_status=503)}, tmp_path)
    assert (
        "with the same engine version, weights and context length: the node, not the release"
        in (verdict_of(document)["summary"])
    )


MARKER = "nightowl-probe http://10.0.0.5:8000/{path} {status} {seconds}"


@pytest.mark.parametrize(
    ("seconds", "status", "reason", "said"),
    [
        ("0.000412", "000", "refused", "connection refused"),
        ("5.001873", "000", "timed out", "no answer in 5 s (timed out)"),
        ("0.013000", "503", None, "503"),
    ],
)
def test_refused_and_timed_out_are_told_apart(seconds: str, status: str, reason: str | None, said: str) -> None:
    """curl prints status 000 for both; a refusal comes at once, a timeout after --max-time (5 s)."""
    from nightowl.collectors.serving.replica_findings import health_text

    text = "\n".join(
        [
            MARKER.format(path="health", status=status, seconds=seconds),
            MARKER.format(path="version", status="000", seconds="0.0003"),
        ]
    )
    facts = replica_health.facts(replica_health.parse(text + "\n"))
    assert facts["no_answer"] == reason and facts["alive"] is False
    assert health_text(facts) == said


# ---- 45.9: the all-clear's "What users see", and --replica-inventory's example ---------------------------------------


def test_all_clear_status_update_does_not_vouch_for_unprobed_streams(tmp_path: Path) -> None:
    _, document, update = first_look({"r1": Replica(), "r2": Replica()}, tmp_path)
    assert verdict_of(document)["id"] == "all-clear"
    users = line(update, "What users see: ")
    assert users.startswith("What users see: no fault found in what this check read; not checked: streamed answers")
    assert "nothing" not in users
    _, document, update = first_look({"r1": Replica(), "r2": Replica()}, tmp_path, "--param", "stream_probe=true")
    assert verdict_of(document)["id"] == "all-clear"
    assert "not checked: streamed answers" not in line(update, "What users see: ")


def test_replica_inventory_help_has_an_example_that_loads(tmp_path: Path) -> None:
    from nightowl.cli.replicas import replica_urls

    text = CliRunner().invoke(main, ["triage", "--help"], terminal_width=400).output
    flat = " ".join(text.split())
    example = re.search(r"--replica-inventory FILE .*?e\.g\. .*?`(serving: .*?)`", flat)
    assert example is not None, flat
    inventory = tmp_path / "replicas.yaml"
    inventory.write_text(example.group(1) + "\n")
    assert replica_urls((), inventory, "serving") == {"r1": "http://10.0.0.5:8000", "r2": "http://10.0.0.6:8000"}
    assert example.group(1) in " ".join(Path("docs/reference.md").read_text().split())
