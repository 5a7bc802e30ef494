"""nccl-ras collector: one JSON case per real RAS report, formats no public report shows, the runbook step."""

# ruff: noqa: E501 - report lines are kept verbatim, one per source line

from __future__ import annotations

import contextlib
import socket
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

from nightowl.collectors.nccl.nccl_ras import COLLECTOR, RAS_QUERY_SCRIPT, facts, parse
from nightowl.collectors.readonly import violations
from tests.helpers import ROOT, assert_subset
from tests.runbook_helpers import run_runbook_on

SAMPLES = sorted((ROOT / "fixtures" / "corpus-extra" / "nccl-ras").glob("*.txt"))
HOSTS = ROOT / "fixtures" / "hosts"


def facts_of(text: str) -> dict[str, Any]:
    return facts(parse(text))


def test_collector_declaration() -> None:
    assert COLLECTOR.kind == "nccl-ras"
    assert COLLECTOR.commands[0] == ("ncclras", "-v")
    assert COLLECTOR.commands[1][:2] == ("python3", "-c")
    assert not COLLECTOR.invasive and not violations(COLLECTOR.commands)
    assert "{" not in RAS_QUERY_SCRIPT  # a constant: no parameter ever reaches the script


# --- formats no public report shows (lines from the format strings of NVIDIA/nccl src/ras/client_support.cc) ---

NEWER_RANK_LINES = """\
#1-3 (00000000000abcde) MISMATCH
  Communicator ranks have different AllReduce operation counts
  7 ranks have launched up to operation 64
  Rank 7 has launched up to operation 60 -- GPU 3 managed by process 1650386 on node 10.0.0.2
  Communicator ranks have different Broadcast operation counts
  7 ranks have launched up to operation 2
  Rank 0 has not launched any operations -- GPU 0 (NVML 4) managed by process 1650380 on node 10.0.0.1
"""


def test_single_rank_groups_are_their_own_rank_line() -> None:
    result = facts_of(NEWER_RANK_LINES)
    assert [m["differs_in"] for m in result["mismatches"]] == ["AllReduce", "Broadcast"]
    assert result["mismatches"][0]["groups"] == [{"ranks": 7, "value": 64}, {"ranks": 1, "value": 60}]
    assert result["mismatches"][1]["ranks"] == [{"rank": 0, "gpu": 0, "pid": 1650380, "node": "10.0.0.1", "value": 0}]
    assert_subset(
        result["behind"],
        [
            {"op": "AllReduce", "operation": 60, "ranks": 1, "ahead": 64, "listed": [7], "nodes": ["10.0.0.2"]},
            {"op": "Broadcast", "operation": 0, "ranks": 1, "ahead": 2, "listed": [0], "nodes": ["10.0.0.1"]},
        ],
    )
    assert result["mismatch_signature"] == [
        "00000000000abcde AllReduce 1x60 7x64",
        "00000000000abcde Broadcast 1x0 7x2",
    ]
    assert result["reports"] == 1 and result["warnings"] == []


ERROR_BLOCK = """\
Errors
======

#0-0 (0123456789abcdef) ERROR
  Initialization error on 1 rank
  Rank 5 reported System error -- GPU 5 managed by process 4242 on node 10.0.0.3
  Asynchronous errors on 2 ranks
  2 ranks reported Remote process error
  Rank 3 -- GPU 3 managed by process 4240 on node 10.0.0.3
  Rank 9 -- [process information not found]

#0-0 (0123456789abcdef) INCOMPLETE
  Missing communicator data from 2 ranks
  Rank 11 -- GPU 3 managed by process 5150 on node 10.0.0.4
  Rank 12 -- [process information not found]

DEAD
  2 job processes are considered dead (unreachable via the RAS network)
  Process 5150 on node 10.0.0.4 managing GPUs 2,3 (NVML 6,7)
  [could not find information on 1 process]
"""


def test_error_block_and_multi_gpu_process() -> None:
    result = facts_of(ERROR_BLOCK)
    assert_subset(
        result["rank_errors"],
        [
            {"phase": "init", "error": "System error", "count": 1, "rank": 5, "pid": 4242, "node": "10.0.0.3"},
            {"phase": "async", "error": "Remote process error", "count": 2, "rank": None},
            {"phase": "async", "error": "Remote process error", "rank": 3, "gpu": 3, "node": "10.0.0.3"},
            {"phase": "async", "error": "Remote process error", "rank": 9, "pid": None, "node": None},
        ],
    )
    assert result["missing_processes"] == [{"pid": 5150, "node": "10.0.0.4", "gpus": [2, 3], "dead": True}]
    assert [r["rank"] for r in result["missing_ranks"]] == [11, 12]
    assert result["dead_process_count"] == 2
    assert result["missing_hosts"] == ["10.0.0.4"] and result["dead_hosts"] == ["10.0.0.4"]
    assert result["error_flags"] == ["DEAD", "ERROR", "INCOMPLETE"]
    assert result["warnings"] == []


def test_members_reports_merge() -> None:
    mismatch = (SAMPLES[0].parent / "nccl_2.26.2_mismatch_allgather_4x8_nccl_1911.txt").read_text()
    incomplete = (SAMPLES[0].parent / "docs_ras_incomplete_timeout.txt").read_text()
    dead = (SAMPLES[0].parent / "docs_ras_dead.txt").read_text()
    twice = facts_of(mismatch + mismatch)
    assert twice["reports"] == 2 and len(twice["mismatches"]) == 1 and len(twice["groups"]) == 1
    assert twice["mismatch_signature"] == ["fa93daea854b060b AllGather 30x640 2x641"]
    # One member still waits for the process, another already declared it dead: one process, dead.
    both = facts_of(incomplete + dead)
    assert both["missing_processes"] == [{"pid": 3487984, "node": "172.16.64.213", "gpus": [5], "dead": True}]
    assert len(both["missing_ranks"]) == 1 and both["timeouts"] == 2


def test_counts_that_moved_change_the_signature() -> None:
    report = (SAMPLES[0].parent / "docs_ras_mismatch_collective_counts.txt").read_text()
    later = report.replace("6650", "6702").replace("6649", "6701")
    assert facts_of(report)["mismatch_signature"] != facts_of(later)["mismatch_signature"]


def test_not_a_text_report() -> None:
    assert facts_of("")["reports"] == 0 and facts_of("")["healthy"] is False
    json_report = facts_of('{\n  "nccl_version": "2.29.1",\n  "communicators": []\n}\n')
    assert json_report["reports"] == 0 and "JSON" in json_report["warnings"][0]
    garbled = facts_of("Missing communicator data from 255 ranks\n  Rank 1057455228 --\n")
    assert garbled["missing_ranks"] == [] and garbled["warnings"]


def test_fallback_script_asks_the_ras_socket() -> None:
    """The python3 fallback speaks RAS's text protocol to localhost:28028 (a fake RAS on 127.0.0.1)."""
    server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        server.bind(("127.0.0.1", 28028))
    except OSError:
        server.close()
        pytest.skip("port 28028 is in use on this machine")
    server.listen(1)
    report = (SAMPLES[0].parent / "docs_ras_dead.txt").read_bytes()
    received: list[bytes] = []

    def serve() -> None:
        conn, _ = server.accept()
        with conn:
            received.append(conn.recv(1024))
            conn.sendall(report)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        run = subprocess.run([sys.executable, "-c", RAS_QUERY_SCRIPT], capture_output=True, timeout=20)
    finally:
        with contextlib.suppress(OSError):
            server.shutdown(socket.SHUT_RDWR)  # wakes an accept() still waiting (no connection came)
        thread.join(timeout=5)
        server.close()
    assert received == [b"VERBOSE STATUS\n"]
    assert run.returncode == 0 and run.stdout == report


# --- runbooks/nccl-hang.yaml: the RAS step -------------------------------------------------------


def run_job(members: dict[str, Path], params: dict[str, Any]) -> Any:
    from nightowl.transports.replay import ReplayTransport

    transports = {h: (lambda d=d, h=h: ReplayTransport(d, h)) for h, d in members.items()}
    return run_runbook_on("nccl-hang", transports, params)[0]


LOG = {"nccl_log": "/var/log/job/nccl.log"}


@pytest.mark.parametrize("host", ["nccl-ras-incomplete", "nccl-ras-dead"])
def test_dead_rank_process_names_its_node(host: str) -> None:
    run = run_job({host: HOSTS / host}, LOG)
    assert run.verdict["id"] == "rank-process-dead"
    summary = run.verdict["summary"]
    assert "Pull 172.16.64.213 from the job" in summary and "process 3487984" in summary and "rank 21" in summary
    assert ("dead: unreachable" in summary) == (host == "nccl-ras-dead")


def composed_member(folder: Path, logs_from: str, names: tuple[str, ...], ras_twice: Path | None = None) -> Path:
    """A member's folder: the files ``names`` of recorded host ``logs_from``, and ``ras_twice`` (a recorded
    RAS report) as the answer to both RAS queries when given."""
    folder.mkdir()
    for name in names:
        (folder / name).write_text((HOSTS / logs_from / name).read_text())
    if ras_twice is not None:
        for take in (1, 2):
            (folder / f"nccl-ras.{take}.out").write_text(ras_twice.read_text())
    return folder


def test_ras_node_address_maps_to_the_member(tmp_path: Path) -> None:
    # Composed: the member's NCCL log says its bootstrap interface has the address RAS names.
    member = composed_member(
        tmp_path / "gpu-13", "nccl-ras-incomplete", ("nccl-log.out", "kernel-log.out", "nccl-ras.out")
    )
    with (member / "nccl-log.out").open("a") as log:
        log.write("gpu-13:3487984:3487984 [5] NCCL INFO Bootstrap : Using eth0:172.16.64.213<0>\n")
    run = run_job({"gpu-13": member}, LOG)
    assert "(172.16.64.213 is gpu-13's eth0)" in run.verdict["summary"]


def test_second_query_waits_and_a_changed_mismatch_goes_on(tmp_path: Path) -> None:
    # The transient rehearsal's first member alone: its second report is the healthy one.
    run = run_job({"nccl-ras-transient-a": HOSTS / "nccl-ras-transient-a"}, LOG)
    assert run.path[:6] == ["collect", "members", "hang-or-slow", "hang-host-evidence", "ras-again", "ras-compare"]
    assert run.path[6] == "hang-init"
    # The same first report twice: unchanged, so straight to the sequence comparison.
    first = HOSTS / "nccl-ras-transient-a" / "nccl-ras.1.out"
    member = composed_member(tmp_path / "m", "nccl-ras-transient-a", ("nccl-log.out", "kernel-log.out"), first)
    run = run_job({"m": member}, LOG)
    assert run.path[5:7] == ["ras-compare", "hang-sequence"]


def test_without_ras_the_hang_branch_is_unchanged() -> None:
    run = run_job({"nccl-unknown-hang": HOSTS / "nccl-unknown-hang"}, LOG)
    assert "ras-again" not in run.path and run.verdict["id"] == "unknown-hang"
    assert "NCCL RAS:" not in run.verdict["summary"]


def test_stuck_mismatch_the_logs_cannot_explain_is_told_in_unknown_hang(tmp_path: Path) -> None:
    # Composed: NVIDIA/nccl#1911's report in both queries, next to BasicSR#737's inconclusive log.
    report = HOSTS / "nccl-ras-stuck-a" / "nccl-ras.1.out"
    member = composed_member(tmp_path / "m", "nccl-unknown-hang", ("nccl-log.out", "kernel-log.out"), report)
    run = run_job({"m": member}, LOG)
    assert run.path[-4:] == ["ras-compare", "hang-sequence", "hang-transport", "unknown-hang"]
    assert (
        "NCCL RAS: 30 rank(s) of communicator fa93daea854b060b launched AllGather operations up to 640 while others reached 641."
        in run.verdict["summary"]
    )


def test_an_unknown_status_word_is_kept_and_warned() -> None:
    row = "0      1      2      1      2       2     RUNNING  OK"
    assert not parse(row).warnings
    result = parse(row.replace("RUNNING", "PAUSED"))
    assert result.groups and any("PAUSED" in w for w in result.warnings)
