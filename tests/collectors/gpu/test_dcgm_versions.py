"""`dcgm-metrics` across dcgm-exporter releases (issue 47's leftovers): scrapes of each release read to the same
facts in one unit, the cumulative Xid totals (4.8.3+) read as totals and judged by what is new in the window,
and a DCGM whose library and host engine disagree ("API version mismatch") is a blind monitor, never a healthy
GPU. Fixtures and their sources: fixtures/dcgm/SOURCE.md."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from typing import Any

import pytest

from nightowl.collectors.gpu import dcgm_fields
from nightowl.library.rehearse import replay_case
from tests.helpers import facts_of

ROOT = Path(__file__).resolve().parents[3]
DCGM = ROOT / "fixtures" / "dcgm"
UUID = "GPU-20c56d28-0da5-6d26-a36a-e7af1ce2586e"


def facts(text: str) -> dict[str, Any]:
    return facts_of("dcgm-metrics", text)


# ---- the same facts from every release ------------------------------------------------------------------------

# The T4 sample's values as its source prints them (datadog-t4.prom), converted by hand to the normalised units.
T4_MEASURED = {
    "sm_clock_hz": 300 * 10**6,  # 300 MHz
    "mem_clock_hz": 405 * 10**6,  # 405 MHz
    "gpu_temp_c": 25,
    "power_w": 8.969,
    "energy_j": 128996.013,  # 128996013 mJ
    "fb_free_bytes": 15109 * 2**20,  # 15109 MiB
    "fb_used_bytes": 0,
    "gpu_util": 0,
    "xid_last": 0,
    "pcie_replay": 0,
    "nvlink_bandwidth_total": 0,
}
RELEASES = {  # the same T4 as each release prints it
    "1.x": "derived/t4-as-1.x.prom",
    "2.x-4.8.2": "datadog-t4.prom",
    "4.8.3": "derived/t4-as-4.8.3.prom",
    "4.9.0": "derived/t4-as-4.9.0.prom",
}
IDENTITY = ("device", "model", "hostname", "driver_version")  # labels the 1.x names did not carry


def measured(gpu: dict[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in gpu.items() if key not in IDENTITY}


@pytest.mark.parametrize("release", sorted(RELEASES))
def test_each_exporter_release_reads_to_the_same_facts(release: str) -> None:
    (gpu,) = facts((DCGM / RELEASES[release]).read_text())["gpus"]
    for key, value in T4_MEASURED.items():
        assert gpu[key] == pytest.approx(value), (release, key)
    (reference,) = facts((DCGM / RELEASES["2.x-4.8.2"]).read_text())["gpus"]
    assert measured(gpu) == measured(reference)
    assert gpu["uuid"] == UUID and gpu["health_fields"] == ["xid_last"]


# Real scrapes of four releases: whatever the release, every field reads in its normalised unit and no name
# nightowl reads under another release is left unread.
REAL = {
    "gist-1x-names.prom": ("1.x", {"sm_clock_hz": 139 * 10**6, "gpu_temp_c": 25, "power_w": 10.101}),
    "datadog-t4.prom": ("2.x-3.x", {"mem_clock_hz": 405 * 10**6, "fb_free_bytes": 15109 * 2**20}),
    "issue317-a30-mig.prom": ("3.3.5-3.4.x", {"gpu_temp_c": 35, "xid_last": 0}),
    "pr736-mixed-node.prom": ("4.9 development build", {"power_w": 34.959, "gpu_temp_c": 44}),
}


@pytest.mark.parametrize("scrape", sorted(REAL))
def test_real_scrapes_of_each_release_read_in_normalised_units(scrape: str) -> None:
    _, expected = REAL[scrape]
    result = facts((DCGM / scrape).read_text())
    known = {row.metric for row in dcgm_fields.names()}
    assert not set(result["unmapped"]) & known
    assert any(all(gpu[key] == pytest.approx(value) for key, value in expected.items()) for gpu in result["gpus"])
    for gpu in result["gpus"]:
        assert set(dcgm_fields.fields()) - set(gpu) <= {"xid_window_count", "xid_total", "health_status"}


# Every rename the collector reads, written from the release notes and DCGM's headers (not read from the table).
RENAMED_4_9 = {  # old name -> (4.9.0 name, old value times this = new value)
    "DCGM_FI_DEV_SM_CLOCK": ("DCGM_FI_DEV_SM_CLOCK_HERTZ", 10**6),
    "DCGM_FI_DEV_MEM_CLOCK": ("DCGM_FI_DEV_MEMORY_CLOCK_HERTZ", 10**6),
    "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION": ("DCGM_FI_DEV_GPU_ENERGY_JOULES_TOTAL", 10**-3),
    "DCGM_FI_DEV_GPU_UTIL": ("DCGM_FI_DEV_GPU_UTIL_RATIO", 10**-2),
    "DCGM_FI_DEV_FB_FREE": ("DCGM_FI_DEV_FB_FREE_BYTES", 2**20),
    "DCGM_FI_DEV_FB_USED": ("DCGM_FI_DEV_FB_USED_BYTES", 2**20),
    "DCGM_FI_DEV_GPU_TEMP": ("DCGM_FI_DEV_GPU_TEMP_CELSIUS", 1),
    "DCGM_FI_DEV_MEMORY_TEMP": ("DCGM_FI_DEV_MEMORY_TEMP_CELSIUS", 1),
    "DCGM_FI_DEV_POWER_USAGE": ("DCGM_FI_DEV_BOARD_POWER_WATTS", 1),
    "DCGM_FI_DEV_PCIE_REPLAY_COUNTER": ("DCGM_FI_DEV_PCIE_REPLAY_TOTAL", 1),
    "DCGM_FI_DEV_XID_ERRORS": ("DCGM_FI_DEV_XID_ERROR", 1),
    "DCGM_FI_DEV_RETIRED_SBE": ("DCGM_FI_DEV_PAGE_RETIRED_SBE_TOTAL", 1),
    "DCGM_FI_DEV_RETIRED_DBE": ("DCGM_FI_DEV_PAGE_RETIRED_DBE_TOTAL", 1),
    "DCGM_FI_DEV_RETIRED_PENDING": ("DCGM_FI_DEV_PAGE_RETIRED_PENDING", 1),
    "DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS": ("DCGM_FI_DEV_ROW_REMAP_UNCORRECTABLE_TOTAL", 1),
    "DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS": ("DCGM_FI_DEV_ROW_REMAP_CORRECTABLE_TOTAL", 1),
    "DCGM_FI_DEV_ROW_REMAP_FAILURE": ("DCGM_FI_DEV_ROW_REMAP_FAILED", 1),
    "DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL": ("DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_TOTAL", 1),
    "DCGM_FI_DEV_NVLINK_CRC_DATA_ERROR_COUNT_TOTAL": ("DCGM_FI_DEV_NVLINK_CRC_DATA_ERROR_TOTAL", 1),
    "DCGM_FI_DEV_NVLINK_REPLAY_ERROR_COUNT_TOTAL": ("DCGM_FI_DEV_NVLINK_REPLAY_ERROR_TOTAL", 1),
    "DCGM_FI_DEV_NVLINK_RECOVERY_ERROR_COUNT_TOTAL": ("DCGM_FI_DEV_NVLINK_RECOVERY_ERROR_TOTAL", 1),
    # "NVLink throughput from MB/s to bytes per second": field 449 is NVML's KiB/s divided by 1000
    # (NVIDIA/dcgm-exporter#658 quoting DcgmCacheManager.cpp), the 4.9.0 field NVML's KiB/s times 1024
    "DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL": ("DCGM_FI_DEV_NVLINK_THROUGHPUT_BYTES_PER_SECOND", 1000 * 1024),
}
RENAMED_4_10 = {  # release 4.10.0 notes: same unit (bytes per second)
    "DCGM_FI_PROF_PCIE_TX_BYTES": "DCGM_FI_PROF_PCIE_TX_BYTES_PER_SECOND",
    "DCGM_FI_PROF_PCIE_RX_BYTES": "DCGM_FI_PROF_PCIE_RX_BYTES_PER_SECOND",
    "DCGM_FI_PROF_NVLINK_TX_BYTES": "DCGM_FI_PROF_NVLINK_TX_BYTES_PER_SECOND",
    "DCGM_FI_PROF_NVLINK_RX_BYTES": "DCGM_FI_PROF_NVLINK_RX_BYTES_PER_SECOND",
}


@pytest.mark.parametrize("old", sorted(RENAMED_4_9) + sorted(RENAMED_4_10))
def test_every_renamed_field_is_read_under_both_names_in_one_unit(old: str) -> None:
    new, scale = RENAMED_4_9[old] if old in RENAMED_4_9 else (RENAMED_4_10[old], 1)
    table = dcgm_fields.by_metric()
    assert table[new].field == table[old].field
    assert table[new].unit_out == table[old].unit_out
    assert table[old].factor == pytest.approx(scale * table[new].factor)  # the same reading, either name
    assert table[new].source and table[old].source


# The NVLink rate field 449 printed while FSDP ran on an H200 (KempnerInstitute/kempnerpulse#10, `dcgmi dmon`:
# 16721, in DCGM's MB/s); the same reading in bytes/s worked out by hand: MB/s -> KiB/s (x 1000) -> bytes/s (x 1024).
NVLINK_MBPS = 16721
NVLINK_BYTES_PER_S = 16721 * 1000 * 1024


def with_nvlink(text: str, old: str, new: str, value: int) -> str:
    """``text`` with its NVLink throughput line (value 0 in the T4 sample) renamed ``new`` and set to ``value``."""
    line = re.compile(rf"^({old})(\{{.*\}}) 0$", re.MULTILINE)
    assert line.search(text), old
    return line.sub(lambda m: f"{new}{m.group(2)} {value}", text).replace(f" {old} ", f" {new} ")


def test_nvlink_throughput_under_the_4_9_0_name_and_unit_is_the_older_fact() -> None:
    """A 4.9.0 scrape (DCGM_FI_DEV_NVLINK_THROUGHPUT_BYTES_PER_SECOND, bytes/s) and a 2.x-4.8 one
    (DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL, DCGM's MB/s) of the same reading give the same fact, in bytes/s; so do
    the 1.x name and the DCGM 4.7 alias of field 449 (same MB/s)."""
    base = "DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL"
    old = with_nvlink((DCGM / "datadog-t4.prom").read_text(), base, base, NVLINK_MBPS)
    new_name = "DCGM_FI_DEV_NVLINK_THROUGHPUT_BYTES_PER_SECOND"
    new = with_nvlink((DCGM / "derived/t4-as-4.9.0.prom").read_text(), new_name, new_name, NVLINK_BYTES_PER_S)
    one_x = with_nvlink(
        (DCGM / "derived/t4-as-1.x.prom").read_text(),
        "dcgm_nvlink_bandwidth_total",
        "dcgm_nvlink_bandwidth_total",
        NVLINK_MBPS,
    )
    alias = old.replace(base, "DCGM_FI_DEV_NVLINK_THROUGHPUT_TOTAL")
    readings = {
        name: facts(text)["gpus"][0] for name, text in (("old", old), ("4.9.0", new), ("1.x", one_x), ("alias", alias))
    }
    for name, gpu in readings.items():
        assert gpu["nvlink_bandwidth_total"] == NVLINK_BYTES_PER_S, name
    assert measured(readings["4.9.0"]) == measured(readings["old"])
    assert "DCGM_FI_DEV_NVLINK_THROUGHPUT_BYTES_PER_SECOND" in facts(new)["metrics_read"]


# ---- cumulative Xid totals (4.8.3+) ---------------------------------------------------------------------------

TOTALS = (DCGM / "derived/xid-totals-t4.prom").read_text()


def test_xid_totals_are_totals_per_code_distinct_from_the_last_xid() -> None:
    result = facts(TOTALS)
    (gpu,) = result["gpus"]
    assert gpu["xid_last"] == 13 and gpu["xid_totals"] == {"13": 2, "48": 1}
    assert result["xid_last_codes"] == [13] and result["xid_total_codes"] == [13, 48]
    # one scrape: its window is the exporter's life, so every counted code is new in it
    assert result["xid_new_codes"] == [13, 48] and result["xid_window_codes"] == [13, 48]
    assert result["xid_action"] == "reset-gpu"  # Xid 48 (DBE), hidden behind the last value 13 (application)
    without = facts(TOTALS.replace("DCGM_EXP_XID_ERRORS_TOTAL{", "DCGM_EXP_SOMETHING_ELSE{"))
    assert without["xid_action"] == "restart-app" and without["xid_total_codes"] == []
    assert "totals count each code since the exporter started" in result["not_seen"]


def test_mig_lines_of_one_gpu_are_one_total_not_a_sum() -> None:
    line = 'DCGM_EXP_XID_ERRORS_TOTAL{gpu="0",UUID="GPU-x",GPU_I_ID="%s",xid="31"} 4\n'
    (gpu,) = facts(line % "3" + line % "4")["gpus"]
    assert gpu["xid_totals"] == {"31": 4}


Series = list[tuple[dict[str, str], list[tuple[float, float]]]]
LABELS = {"gpu": "0", "UUID": "GPU-a", "hostname": "gpu-17", "instance": "10.0.0.7:9400", "job": "dcgm"}


def window(series: Series, start: float = 700.0, end: float = 1000.0, step: float = 15.0) -> str:
    """A query_range answer; the clock series comes last, as Prometheus may order it."""
    ticks = [start + i * step for i in range(int((end - start) / step) + 1)]
    clock = {"metric": {"nightowl": "query_time"}, "values": [[t, str(t)] for t in ticks]}
    result = [{"metric": m, "values": [[t, str(v)] for t, v in pts]} for m, pts in series]
    return json.dumps({"status": "success", "data": {"resultType": "matrix", "result": [*result, clock]}})


def total(code: str, points: list[tuple[float, float]]) -> tuple[dict[str, str], list[tuple[float, float]]]:
    return ({"__name__": "DCGM_EXP_XID_ERRORS_TOTAL", **LABELS, "xid": code}, points)


XID_LAST = ({"__name__": "DCGM_FI_DEV_XID_ERRORS", **LABELS}, [(700.0, 13.0), (1000.0, 13.0)])


def test_in_a_window_only_the_xids_whose_total_grew_are_new() -> None:
    text = window(
        [
            XID_LAST,
            total("13", [(700.0, 2.0), (850.0, 2.0), (1000.0, 2.0)]),  # counted before the window: not new
            total("48", [(700.0, 1.0), (850.0, 2.0), (1000.0, 2.0)]),  # one more inside the window
            total("79", [(910.0, 1.0), (1000.0, 1.0)]),  # its series appeared inside the window: the first one
        ]
    )
    result = facts(text)
    assert result["xid_total_codes"] == [13, 48, 79]
    assert result["xid_new_codes"] == [48, 79]
    assert result["xid_new_gpus"] == [
        {"gpu": "GPU-a", "code": 48, "count": 1},
        {"gpu": "GPU-a", "code": 79, "count": 1},
    ]
    assert result["xid_window_codes"] == [48, 79] and result["xid_action"] == "reboot-node"


def test_an_exporter_restart_in_the_window_counts_from_zero_again() -> None:
    """The totals reset with the exporter: a drop from 5 to 1 is one new Xid, never a negative rise."""
    text = window([XID_LAST, total("48", [(700.0, 5.0), (850.0, 5.0), (880.0, 1.0), (1000.0, 1.0)])])
    assert facts(text)["xid_new_gpus"] == [{"gpu": "GPU-a", "code": 48, "count": 1}]


def test_a_flat_total_leaves_the_window_without_an_xid() -> None:
    text = window([({**XID_LAST[0]}, [(700.0, 0.0), (1000.0, 0.0)]), total("48", [(700.0, 3.0), (1000.0, 3.0)])])
    result = facts(text)
    assert result["xid_new_codes"] == [] and result["xid_window_codes"] == []
    assert result["xid_total_codes"] == [48] and result["xid_action"] == "none"


# ---- DCGM's library and host engine disagree ----------------------------------------------------------------

# One real line per row of knowledge/dcgm_errors.csv (its source says where each was seen).
REAL_ERROR_LINES = [
    "2026-09-21 15:58:36.273 ERROR [45265:45271] [[Health]] Error 'API version mismatch' while attempting to get"
    " entities for group 0 [/builds/dcgm/dcgm/modules/common/DcgmCoreProxy.cpp:667] [DcgmCoreProxy::GetGroupEntities]",
    "2026-09-21 15:58:36.273 ERROR [45265:45271] Version mismatch 2002028 != 300202c for module 0 subCommand 17"
    " [./modules/DcgmModule.cpp:35] [DcgmModule::CheckVersion]",
    "The API function (dcgmHealthSet etc.) all return DCGM_ST_VER_MISMATCH",
    "internal server error",
]


def test_every_error_row_matches_a_real_line_and_every_line_one_row() -> None:
    markers = dcgm_fields.error_markers()
    assert len(markers) == len(REAL_ERROR_LINES)
    for marker, line in zip(markers, REAL_ERROR_LINES, strict=True):
        assert marker.pattern.search(line), marker
        assert marker.source.startswith("[")
    assert dcgm_fields.dcgm_errors(['level=info msg="DCGM successfully initialized!"']) == []


@pytest.mark.parametrize("line", REAL_ERROR_LINES)
def test_a_scrape_beside_a_version_mismatch_is_not_reporting_health(line: str) -> None:
    t4 = (DCGM / "datadog-t4.prom").read_text()
    assert facts(t4)["health_reporting"]
    result = facts(t4 + line + "\n")
    assert not result["health_reporting"] and "cannot answer" in result["blind_reason"]
    assert result["dcgm_errors"][0]["line"] == line
    assert result["gpus"][0]["xid_last"] == 0  # the fields still read: they just say nothing about health


def test_an_xid_message_label_is_not_a_dcgm_error() -> None:
    text = 'DCGM_FI_DEV_XID_ERRORS{gpu="0",UUID="GPU-x",err_msg="API version mismatch"} 0\n'
    assert facts(text)["dcgm_errors"] == [] and facts(text)["health_reporting"]


def test_the_host_engine_log_alone_is_blind_and_says_why() -> None:
    result = facts((DCGM / "issue314-hostengine-log.txt").read_text())
    assert result["gpus"] == [] and not result["health_reporting"]
    lines = [e["line"] for e in result["dcgm_errors"]]
    assert len(lines) == 2
    assert lines[0].endswith("[DcgmModule::CheckVersion]") and lines[1].endswith("[DcgmCoreProxy::GetGroupEntities]")
    assert "host engine" in result["blind_reason"]


# ---- the runbooks on telemetry alone -------------------------------------------------------------------------


def run(runbook: str, scrape: str, tmp_path: Path) -> Any:
    host = tmp_path / "gpu-17"
    host.mkdir()
    shutil.copy(DCGM / scrape, host / "dcgm-metrics.out")
    case = {"host": "gpu-17", "params": {"dcgm_url": "http://10.0.0.7:9400/metrics"}}
    (result,) = replay_case(runbook, case, host_dirs={"gpu-17": host})
    return result


@pytest.mark.parametrize("runbook", ["xid", "node-health"])
def test_a_version_mismatch_ends_cannot_judge_dcgm_not_reporting_health(runbook: str, tmp_path: Path) -> None:
    result = run(runbook, "derived/api-version-mismatch-t4.prom", tmp_path)
    assert result.verdict is None and result.status == "incomplete"
    assert result.path[-1] == "dcgm-blind" and "DCGM is not reporting health" in result.error
    assert "Version mismatch" in result.error


@pytest.mark.parametrize("runbook", ["xid", "node-health"])
def test_an_xid_the_last_value_hides_is_judged_from_the_totals(runbook: str, tmp_path: Path) -> None:
    result = run(runbook, "derived/xid-totals-t4.prom", tmp_path)
    assert result.verdict["action"] == "reset-gpu"
    assert "Xids in its window: 13, 48" in result.verdict["summary"]
