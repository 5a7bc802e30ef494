"""runbooks/nccl-hang.yaml: the rehearsed jobs name the right host; nothing invasive runs without the flag."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest

from nightowl.collectors import get_collector
from nightowl.collectors.nccl.nccl_log import facts as nccl_facts
from nightowl.collectors.nccl.nccl_log import parse as nccl_parse
from nightowl.collectors.nccl.nccl_tests import BUSBW_PROFILES
from nightowl.engine.runner import HostRun
from nightowl.engine.session import plan
from nightowl.library import runbooks
from nightowl.library.rehearse import rehearsal_cases
from tests.helpers import ROOT
from tests.runbook_helpers import RecordingReplay, run_runbook_on

HOSTS = ROOT / "fixtures" / "hosts"
CORPUS = ROOT / "fixtures" / "corpus" / "nccl"
LOG = {"nccl_log": "/var/log/job/nccl.log"}


def run_job(
    members: dict[str, Path], params: dict[str, Any], allow_invasive: bool = False
) -> tuple[HostRun, list[tuple[str, ...]]]:
    ran: list[tuple[str, ...]] = []
    transports = {h: (lambda d=d, h=h: RecordingReplay(d, h, ran)) for h, d in members.items()}
    runs = run_runbook_on("nccl-hang", transports, params, allow_invasive)
    return runs[0], ran


def case_named(fragment: str) -> dict[str, Any]:
    (case,) = [c for c in rehearsal_cases("nccl-hang") if fragment in c["name"]]
    return case


# (rehearsal name fragment, verdict, hosts the summary must name, member hosts it must not name)
NAMED = [
    ("CPU-side straggler", "cpu-side-straggler", ["nccl-straggler-b"], ["nccl-straggler-a"]),
    ("never completed it", "rank-stuck-gpu-or-network", ["nccl-gpu-path-a"], ["nccl-gpu-path-b"]),
    ("Xid 79 on the other", "gpu-fault-on-rank-host", ["nccl-xid-b", "Xid 79"], ["nccl-xid-a"]),
    ("never completes init", "init-incomplete", ["nccl-init-b", "veth25f2e72"], ["nccl-init-a"]),
    ("retry exceeded", "fabric-link-fault", ["nccl-ib-a", "11.214.147.122", "IBV_WC_RETRY_EXC_ERR"], ["nccl-ib-b"]),
    ("local protection", "ib-protection-error", ["gpu5", "nccl-ibprot-gpu5"], ["gpu4"]),
    ("a port down whose link trained", "rank-port-bad", ["nccl-ib-port-c", "mlx5_7/1"], ["nccl-ib-port-a"]),
    ("member of the job is unreachable", "rank-host-unreachable", ["nccl-unreachable"], ["nccl-peer-lost"]),
    ("falls back to sockets", "ib-not-used", ["nccl-socket-b", "libibverbs"], ["nccl-socket-a"]),
    ("half the H100 baseline", "node-below-baseline", ["nccl-busbw-low", "234.72", "450"], ["nccl-busbw-h100"]),
    ("job's own median", "node-below-baseline", ["nccl-busbw-low", "470.73"], ["nccl-busbw-h100 ("]),
    (
        "BROADCAST vs ALLREDUCE",
        "collective-mismatch",
        ["rank 7: BROADCAST #80078", "rank 3: ALLREDUCE #80078"],
        ["nccl-mismatch-a", "nccl-mismatch-b"],
    ),
]


@pytest.mark.parametrize(("fragment", "verdict", "named", "not_named"), NAMED, ids=[n[0] for n in NAMED])
def test_verdict_names_the_host_to_pull(fragment: str, verdict: str, named: list[str], not_named: list[str]) -> None:
    case = case_named(fragment)
    run, _ = run_job({h: HOSTS / h for h in case["hosts"]}, case.get("params", {}))
    assert run.verdict is not None and run.verdict["id"] == verdict
    summary = run.verdict["summary"]
    for text in named:
        assert text in summary, f"{text!r} not in {summary!r}"
    for text in not_named:
        assert text not in summary, f"{text!r} in {summary!r}"


# Rehearsals whose busbw_baseline is a figure of nightowl/knowledge/busbw_profiles.csv (their hosts'
# SOURCE.md say which): (rehearsal name fragment, profile, verdict).
PROFILE_BASELINES = [
    ("half the H100 baseline", "h100-sxm-8gpu-single-node", "node-below-baseline"),
    ("a healthy H100 node at its baseline", "h100-sxm-8gpu-single-node", "busbw-at-baseline"),
    ("8x400G multi-node baseline", "h100-8x400g-ib-multi-node", "fabric-or-config-regression"),
]


@pytest.mark.parametrize(("fragment", "profile", "verdict"), PROFILE_BASELINES, ids=[p[0] for p in PROFILE_BASELINES])
def test_rehearsal_baselines_are_the_busbw_profiles(fragment: str, profile: str, verdict: str) -> None:
    """The runbook takes a number; a rehearsal copies its profile's figure, and judged by the data's
    figure the job gets the same verdict (a changed figure fails here until the rehearsal follows)."""
    case = case_named(fragment)
    figure = BUSBW_PROFILES[profile]["busbw"]
    assert case["params"]["busbw_baseline"] == figure
    run, _ = run_job({h: HOSTS / h for h in case["hosts"]}, {**case["params"], "busbw_baseline": figure})
    assert run.verdict is not None and run.verdict["id"] == verdict


def test_ranks_seen_maps_ranks_to_the_member_log() -> None:
    # Read from the files: BasicSR#737 shows ranks 1, 0, 2; the composed member shows rank 3 only.
    assert nccl_facts(nccl_parse((HOSTS / "nccl-straggler-a" / "nccl-log.out").read_text()))["ranks_seen"] == [0, 1, 2]
    assert nccl_facts(nccl_parse((HOSTS / "nccl-straggler-b" / "nccl-log.out").read_text()))["ranks_seen"] == [3]
    # NCCL's own comm lines: NVIDIA/nccl#367 prints Init COMPLETE for ranks 10-13.
    sample = CORPUS / "nccl_container_16ranks_shm_and_socket_init_complete_nccl_367.txt"
    container = nccl_facts(nccl_parse(sample.read_text()))
    assert container["ranks_seen"] == [10, 11, 12, 13]


def test_all_reduce_perf_runs_only_with_allow_invasive(tmp_path: Path) -> None:
    member = tmp_path / "node-1"
    shutil.copytree(HOSTS / "nccl-healthy-ib", member)
    shutil.copy(CORPUS / "nccl-tests_all_reduce_h100_8gpu_single_node_nvswitch.txt", member / "nccl-tests-run.out")
    params = {**LOG, "symptom": "slow"}

    run, ran = run_job({"node-1": member}, params)
    assert run.verdict is not None and run.verdict["id"] == "slow-needs-measurement"
    assert not any(argv[0] == "all_reduce_perf" for argv in ran)

    run, ran = run_job({"node-1": member}, params, allow_invasive=True)
    assert run.verdict is not None and run.verdict["id"] == "busbw-measured"
    assert ("all_reduce_perf", "-b", "8", "-e", "8G", "-f", "2", "-g", "8") in ran
    assert "470.73" in run.verdict["summary"]


def test_plan_marks_all_reduce_perf_skipped_without_the_flag() -> None:
    loaded = runbooks.load("nccl-hang")
    steps = {s["collector"]: s for s in plan(loaded, get_collector, allow_invasive=False, params=LOG)}
    assert steps["nccl-tests-run"]["invasive"] and steps["nccl-tests-run"]["skipped"]
    assert not steps["nccl-log"]["skipped"]
    assert steps["nccl-log"]["commands"] == [["cat", "--", "/var/log/job/nccl.log"]]
    steps = {s["collector"]: s for s in plan(loaded, get_collector, allow_invasive=True, params=LOG)}
    assert not steps["nccl-tests-run"]["skipped"]


def test_ib_without_gdrdma(tmp_path: Path) -> None:
    # Not in the corpus: NVIDIA/nccl#743's inter-node channel line with its "/GDRDMA" removed.
    line = "task272154-tz9m4:1742:1840 [3] NCCL INFO Channel 01 : 7[d0000] -> 2[4a000] [send] via NET/IB/3\n"
    (tmp_path / "n1").mkdir()
    (tmp_path / "n1" / "nccl-log.out").write_text((HOSTS / "nccl-healthy-ib" / "nccl-log.out").read_text() + line)
    (tmp_path / "n1" / "kernel-log.out").write_text("")
    run, _ = run_job({"n1": tmp_path / "n1"}, {**LOG, "symptom": "slow", "expect_gdr": True})
    assert run.verdict is not None and run.verdict["id"] == "gdr-not-used"
    assert "n1" in run.verdict["summary"]
    # Nobody said GPUDirect RDMA is expected: NCCL turns it off by topology, which is no fault.
    run, _ = run_job({"n1": tmp_path / "n1"}, {**LOG, "symptom": "slow"})
    assert run.verdict is not None and run.verdict["id"] == "slow-needs-measurement"
    # With GPUDirect RDMA in the log (the real line) the transport check passes.
    real = tmp_path / "n2"
    shutil.copytree(tmp_path / "n1", real)
    shutil.copy(CORPUS / "nccl_info_connected_all_rings_gdrdma_megatron_nccl_743_turn3.txt", real / "nccl-log.out")
    run, _ = run_job({"n2": real}, {**LOG, "symptom": "slow", "expect_gdr": True})
    assert run.verdict is not None and run.verdict["id"] == "slow-needs-measurement"


def test_one_rail_below_baseline(tmp_path: Path) -> None:
    # Not in the corpus as a rail incident: the 2-node x 1-GPU RTX 3090 run (GPU 0 on worker1 and
    # worker2, 8.2 GB/s) is a one-GPU-per-node test; judged against a hypothetical 12 GB/s rail baseline.
    (tmp_path / "worker1").mkdir()
    rail_run = CORPUS / "nccl-tests_all_reduce_rtx3090_2node_rdma_mtu256_ok.txt"
    shutil.copy(rail_run, tmp_path / "worker1" / "nccl-tests.out")
    params = {**LOG, "nccl_tests_file": "/tmp/rail0.txt", "busbw_baseline": 12}
    run, _ = run_job({"worker1": tmp_path / "worker1"}, params)
    assert run.verdict is not None and run.verdict["id"] == "rail-below-baseline"
    assert "GPU index 0" in run.verdict["summary"] and "worker1, worker2" in run.verdict["summary"]
    run, _ = run_job({"worker1": tmp_path / "worker1"}, {**params, "busbw_baseline": 8})
    assert run.verdict is not None and run.verdict["id"] == "busbw-at-baseline"
