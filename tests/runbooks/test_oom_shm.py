"""oom runbook: a Bus error (SIGBUS) is judged against /dev/shm, never ended in "no OOM found, ok".

The engine log is the composed Bus-error log of fixtures/hosts/oom-vllm-bus-error-shm-full (its SOURCE.md);
the df outputs below are written in GNU df's own formats (`df -k` and `df -B1 --output=size,avail`).
"""

from __future__ import annotations

from pathlib import Path

from tests.helpers import ROOT
from tests.runbook_helpers import make_host, run_on

HOSTS = ROOT / "fixtures" / "hosts"
BUS_ERROR_LOG = (HOSTS / "oom-vllm-bus-error-shm-full" / "engine-log.out").read_text()
# Docker's default 64 MiB /dev/shm, a third used: small, though not full (the shape of vllm-project/vllm#789)
SMALL_WITH_ROOM = (
    "Filesystem     1K-blocks  Used Available Use% Mounted on\nshm                65536 20480     45056  32% /dev/shm\n"
)
# a 16 GiB /dev/shm with 512 MiB left: large but full
LARGE_BUT_FULL = "  1B-blocks      Avail\n17179869184  536870912\n"


def test_small_shm_with_room_is_still_exhausted(tmp_path: Path) -> None:
    host = make_host(tmp_path, "small", {"engine-log.out": BUS_ERROR_LOG, "dev-shm.out": SMALL_WITH_ROOM})
    verdict, path = run_on("oom", host)
    assert verdict["id"] == "shm-exhausted" and verdict["action"] == "reconfigure", path
    assert "64 MiB" in verdict["summary"] and "--shm-size" in verdict["summary"]


def test_large_shm_nearly_full_is_exhausted(tmp_path: Path) -> None:
    host = make_host(tmp_path, "full", {"engine-log.out": BUS_ERROR_LOG, "dev-shm.out": LARGE_BUT_FULL})
    verdict, _ = run_on("oom", host)
    assert verdict["id"] == "shm-exhausted"
    assert "16.0 GiB" in verdict["summary"] and "512 MiB free" in verdict["summary"]
    # a lower floor (a small model on one GPU needs less) makes the same reading roomy: not shared memory
    verdict, _ = run_on("oom", host, {"min_shm_gib": 0.25})
    assert verdict["id"] == "bus-error-not-shm" and verdict["severity"] != "ok"


def test_df_that_failed_is_no_verdict(tmp_path: Path) -> None:
    df_failed = {"dev-shm.rc": "1\n", "dev-shm.err": "df: /dev/shm: No such file or directory\n"}
    files = {"engine-log.out": BUS_ERROR_LOG, **df_failed}
    verdict, path = run_on("oom", make_host(tmp_path, "df-failed", files))
    assert verdict == {} and path[-1] == "shm-unread"


def test_no_bus_error_does_not_read_shm(tmp_path: Path) -> None:
    log = BUS_ERROR_LOG.replace("Fatal Python error: Bus error", "worker exited")
    verdict, path = run_on("oom", make_host(tmp_path, "no-bus", {"engine-log.out": log}))
    assert "shm-read" not in path and verdict["id"] != "shm-exhausted"


def test_exit_135_alone_reads_shm(tmp_path: Path) -> None:
    # a log that ends after a good start, the container's exit status 135 (128 + SIGBUS), a roomy /dev/shm
    files = {
        name: (HOSTS / "oom-vllm-exit135-shm-full" / name).read_text()
        for name in ("engine-log.out", "container-state.out")
    }
    files["dev-shm.out"] = (HOSTS / "oom-vllm-bus-error-shm-roomy" / "dev-shm.out").read_text()
    # the container state alone: the log's own exit line (docker compose's) taken out
    files["engine-log.out"] = files["engine-log.out"].replace("vllm exited with code 135\n", "")
    assert "135" not in files["engine-log.out"]
    verdict, path = run_on("oom", make_host(tmp_path, "exit135", files), {"container": "vllm"})
    assert path[-2:] == ["shm-judge", "bus-error-not-shm"] and "exit status 135" in verdict["summary"]
    # the same host with exit 0 stays "no OOM found": 135 is what sends it to /dev/shm
    files["container-state.out"] = files["container-state.out"].replace('"ExitCode": 135', '"ExitCode": 0')
    verdict, path = run_on("oom", make_host(tmp_path, "exit0", files), {"container": "vllm"})
    assert "shm-read" not in path and verdict["id"] == "no-oom-found"
