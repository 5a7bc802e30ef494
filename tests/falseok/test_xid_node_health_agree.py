"""The same evidence gives the same severity and action under `xid` and `node-health`, or a verdict says why.

Both runbooks read nvidia-smi and the kernel log; node-health also reads NVLink status and checks the
SKU's GPU count, which `xid` does not. So every recorded host is replayed with only the outputs both
runbooks read (``nvidia-smi.*``, ``kernel-log.*``), and every recorded kernel log once more next to a
healthy nvidia-smi (so Xid-only recordings are judged with readable GPUs too). Where severity or action
differ, one of the two verdict summaries must name the other runbook and say why.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from nightowl.library.rehearse import replay_case
from nightowl.paths import data_dir

HOSTS = data_dir("fixtures") / "hosts"
SHARED = ("nvidia-smi", "kernel-log")  # the outputs both runbooks read
HEALTHY_SMI = HOSTS / "healthy-l40s" / "nvidia-smi.out"


def _shared_files(host: Path) -> list[Path]:
    return sorted(p for p in host.iterdir() if p.is_file() and p.name.split(".")[0] in SHARED)


def _cases() -> list[tuple[str, str]]:
    cases = []
    for host in sorted(p for p in HOSTS.iterdir() if p.is_dir()):
        files = _shared_files(host)
        if any(p.suffix == ".out" for p in files):
            cases.append((host.name, "as-recorded"))
        if (host / "kernel-log.out").is_file() and host.name != "healthy-l40s":
            cases.append((host.name, "with-healthy-nvidia-smi"))
    return cases


def _evidence(host: str, mode: str, into: Path) -> Path:
    """A copy of the host holding only the shared outputs (and, in one mode, a healthy nvidia-smi)."""
    copy = into / host
    copy.mkdir(parents=True)
    for path in _shared_files(HOSTS / host):
        if mode == "with-healthy-nvidia-smi" and path.name.startswith("nvidia-smi."):
            continue
        shutil.copy(path, copy / path.name)
    if mode == "with-healthy-nvidia-smi":
        shutil.copy(HEALTHY_SMI, copy / "nvidia-smi.out")
    return copy


def _verdict(runbook: str, host: str, copy: Path, out: Path) -> tuple[str, dict, str]:
    run = replay_case(runbook, {"host": host}, host_dirs={host: copy}, out_dir=out)[0]
    return run.status, run.verdict or {}, run.error or ""


CASES = _cases()


def test_the_comparison_covers_the_xid_recordings() -> None:
    """Guard the case list itself: a filter that dropped the Xid hosts would make the test vacuous."""
    names = {h for h, _ in CASES}
    assert {"xid79-fallen-off-bus", "xid13-app-fault", "xid145-nvlink-b200", "healthy-l40s"} <= names
    assert len(CASES) > 40


@pytest.mark.parametrize(("host", "mode"), CASES, ids=[f"{h}:{m}" for h, m in CASES])
def test_same_evidence_same_answer_or_the_verdict_says_why(host: str, mode: str, tmp_path: Path) -> None:
    copy = _evidence(host, mode, tmp_path / "evidence")
    xid_status, xid, xid_why = _verdict("xid", host, copy, tmp_path / "xid")
    nh_status, nh, nh_why = _verdict("node-health", host, copy, tmp_path / "nh")
    if not xid or not nh:
        # "cannot judge" in one must be "cannot judge" in the other (no verdict beside a verdict), unless the
        # reason says why (node-health reads the fabric, which the xid runbook does not).
        said = "`xid`" in nh_why or "node-health" in xid_why
        assert bool(xid) == bool(nh) or said, (
            f"xid {xid_status} {xid.get('id')} vs node-health {nh_status} {nh.get('id')}"
        )
        return
    if (xid["severity"], xid["action"]) == (nh["severity"], nh["action"]):
        return
    explained = "node-health" in xid.get("summary", "") or "`xid`" in nh.get("summary", "")
    assert explained, (
        f"xid {xid['id']} ({xid['severity']}, {xid['action']}) vs node-health {nh['id']} "
        f"({nh['severity']}, {nh['action']}) and neither summary says why:\n{xid['summary']}\n{nh['summary']}"
    )
