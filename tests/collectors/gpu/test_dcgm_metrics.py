"""`dcgm-metrics`: every exporter release read to the same facts, the last Xid read as a code, and a blind
monitor never read as a healthy GPU (issue 47). The recorded scrapes and their expected facts are the cases
under tests/collectors/cases/dcgm-metrics/ (fixtures/dcgm/SOURCE.md names each source)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from nightowl import knowledge
from nightowl.collectors import get_collector
from nightowl.collectors.gpu import dcgm_fields, dcgm_metrics, dcgm_prometheus
from tests.helpers import facts_of

ROOT = Path(__file__).resolve().parents[3]
T4 = (ROOT / "fixtures/dcgm/datadog-t4.prom").read_text()
A30 = (ROOT / "fixtures/dcgm/issue317-a30-mig.prom").read_text()


def facts(text: str) -> dict[str, Any]:
    return facts_of("dcgm-metrics", text)


def gpus(text: str) -> list[dict[str, Any]]:
    return list(facts(text)["gpus"])


# The renames each release made, written from its release notes (not read from the data file under test).
ONE_X = {  # etc/1.x-compatibility-metrics.csv; the 1.x label was `uuid`
    "DCGM_FI_DEV_SM_CLOCK": "dcgm_sm_clock",
    "DCGM_FI_DEV_MEM_CLOCK": "dcgm_memory_clock",
    "DCGM_FI_DEV_GPU_TEMP": "dcgm_gpu_temp",
    "DCGM_FI_DEV_POWER_USAGE": "dcgm_power_usage",
    "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION": "dcgm_total_energy_consumption",
    "DCGM_FI_DEV_PCIE_REPLAY_COUNTER": "dcgm_pcie_replay_counter",
    "DCGM_FI_DEV_GPU_UTIL": "dcgm_gpu_utilization",
    "DCGM_FI_DEV_XID_ERRORS": "dcgm_xid_errors",
    "DCGM_FI_DEV_FB_FREE": "dcgm_fb_free",
    "DCGM_FI_DEV_FB_USED": "dcgm_fb_used",
    "DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL": "dcgm_nvlink_bandwidth_total",
}


def renamed(text: str, names: dict[str, str], labels: dict[str, str]) -> str:
    for old, new in names.items():
        text = re.sub(rf"\b{old}\b", new, text)
    for old, new in labels.items():
        text = re.sub(rf"([{{,]){old}=", rf"\1{new}=", text)
    return text


RELEASES = {
    "1.x names": (ONE_X, {"UUID": "uuid"}),
    "2.x-4.8.2 as recorded": ({}, {}),
    "4.8.3 hostname label": ({}, {"Hostname": "hostname"}),
    # DCGM 4.6.0's dcgm_fields.h deprecated-alias block (old name -> DCGM 4.7 name, same field id), which 4.9.0 adopted
    "4.9.0 DCGM 4.7 names and driver label": (
        {
            "DCGM_FI_DEV_GPU_TEMP": "DCGM_FI_DEV_GPU_TEMP_CELSIUS",
            "DCGM_FI_DEV_XID_ERRORS": "DCGM_FI_DEV_XID_ERROR",
            "DCGM_FI_DEV_POWER_USAGE": "DCGM_FI_DEV_BOARD_POWER_WATTS",
            "DCGM_FI_DEV_PCIE_REPLAY_COUNTER": "DCGM_FI_DEV_PCIE_REPLAY_TOTAL",
            "DCGM_FI_DEV_GPU_UTIL": "DCGM_FI_DEV_GPU_UTIL_RATIO",  # 0 % is a 0.0 ratio in this sample
            "DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL": "DCGM_FI_DEV_NVLINK_THROUGHPUT_TOTAL",
        },
        {"Hostname": "hostname", "DCGM_FI_DRIVER_VERSION": "DCGM_FI_SYSTEM_DRIVER_VERSION"},
    ),
}


def test_the_dcgm_4_7_remap_and_utilisation_names_read_as_the_old_ones() -> None:
    remap = (ROOT / "fixtures/dcgm/derived/remap-failure-a30.prom").read_text()
    assert gpus(remap.replace("DCGM_FI_DEV_ROW_REMAP_FAILURE", "DCGM_FI_DEV_ROW_REMAP_FAILED")) == gpus(remap)
    old = 'DCGM_FI_DEV_GPU_UTIL{gpu="0",UUID="GPU-x"} 87\n'
    assert gpus(old) == gpus('DCGM_FI_DEV_GPU_UTIL_RATIO{gpu="0",UUID="GPU-x"} 0.87\n')


@pytest.mark.parametrize("release", sorted(RELEASES))
def test_every_exporter_release_reads_to_the_same_facts(release: str) -> None:
    names, labels = RELEASES[release]
    expected = gpus(T4)
    got = gpus(renamed(T4, names, labels))
    if "uuid" in labels.values():  # the 1.x names carry no driver, host or model label in this sample's form
        got = [{**g, "driver_version": e["driver_version"]} for g, e in zip(got, expected, strict=True)]
    assert got == expected


def test_the_4_10_pcie_and_nvlink_rate_names_read_as_the_older_ones() -> None:
    line = 'DCGM_FI_PROF_PCIE_TX_BYTES{gpu="0",UUID="GPU-x"} 1.5e9\n'
    line += 'DCGM_FI_PROF_NVLINK_RX_BYTES{gpu="0",UUID="GPU-x"} 2e9\n'
    new = line.replace("_TX_BYTES{", "_TX_BYTES_PER_SECOND{").replace("_RX_BYTES{", "_RX_BYTES_PER_SECOND{")
    assert gpus(new) == gpus(line)
    assert gpus(line)[0]["pcie_tx_bytes_per_s"] == 1.5e9


def test_units_are_normalised() -> None:
    (gpu,) = gpus(T4)
    assert gpu["sm_clock_hz"] == 300 * 10**6  # MHz -> Hz
    assert gpu["energy_j"] == pytest.approx(128996.013)  # mJ -> J
    assert gpu["fb_free_bytes"] == 15109 * 2**20  # MiB -> bytes
    text = 'DCGM_FI_DEV_GPU_UTIL{gpu="0",UUID="GPU-x"} 87\n'
    text += 'DCGM_FI_DEV_POWER_VIOLATION{gpu="0",UUID="GPU-x"} 2500000000\n'
    (gpu,) = gpus(text)
    assert gpu["gpu_util"] == pytest.approx(0.87)  # percent -> ratio
    assert gpu["power_violation_s"] == pytest.approx(2.5)  # ns -> s


def test_the_last_xid_is_a_code_never_a_count() -> None:
    """Xid 79 on four MIG instance lines of one GPU is Xid 79 (not 316); two GPUs keep their own codes."""
    text = re.sub(r'(DCGM_FI_DEV_XID_ERRORS\{gpu="0".*\}) 0', r"\1 79", A30)
    text = re.sub(r'(DCGM_FI_DEV_XID_ERRORS\{gpu="1".*\}) 0', r"\1 13", text)
    result = facts(text)
    assert [g["xid_last"] for g in result["gpus"]] == [79, 13]
    assert result["xid_last_codes"] == [13, 79]
    assert result["fallen_off_bus_gpus"] == ["GPU-265c9814-6156-355b-e589-ff2064894f16"]
    assert result["xid_action"] == "reboot-node"


def test_a_gpu_named_by_its_pci_address_when_the_exporter_gives_one() -> None:
    text = 'DCGM_FI_DEV_XID_ERRORS{gpu="3",UUID="GPU-y",pci_bus_id="00000000:5A:00.0",hostname="gpu-17"} 48\n'
    result = facts(text)
    assert result["xid_last_gpus"] == [{"gpu": "0000:5a:00", "code": 48}]
    assert result["hostnames"] == ["gpu-17"]


@pytest.mark.parametrize(
    "value, blank",
    [
        ("9223372036854775794", "int64"),  # DCGM_INT64_BLANK + 2 (not supported), as the README's sample shows
        ("2147483632", "int32 blank"),
        ("2147483634", "int32 not supported"),
        ("140737488355328", "fp64 blank"),
        ("140737488355331", "fp64 not permissioned"),
        ("NaN", "nan"),
    ],
)
def test_dcgm_error_values_are_no_value_and_leave_the_gpu_unjudged(value: str, blank: str) -> None:
    assert facts(T4)["health_reporting"]  # the sample itself reports (its Xid field is there)
    text = re.sub(r"(DCGM_FI_DEV_XID_ERRORS\{.*\}) 0", rf"\1 {value}", T4)
    result = facts(text)
    assert result["gpus"][0]["xid_last"] is None
    assert blank.split()[0] in result["gpus"][0]["error_values"]["xid_last"].lower()
    assert not result["health_reporting"]
    assert "error value" in result["blind_reason"]


def test_absent_health_fields_are_not_a_healthy_gpu() -> None:
    stats_only = "\n".join(line for line in T4.splitlines() if "XID" not in line)
    result = facts(stats_only)
    assert result["gpus"][0]["power_w"] == pytest.approx(8.969)
    assert not result["health_reporting"]
    assert "no health field" in result["blind_reason"]
    assert result["unjudged_gpus"] == ["GPU-20c56d28-0da5-6d26-a36a-e7af1ce2586e"]


def test_one_blind_gpu_among_reporting_ones_is_still_blind() -> None:
    text = A30 + 'DCGM_FI_DEV_GPU_TEMP{gpu="2",UUID="GPU-z",Hostname="yg-data-k8s-gpu-a30-node-test-test0003.mt"} 40\n'
    result = facts(text)
    assert not result["health_reporting"]
    assert result["unjudged_gpus"] == ["GPU-z"]


def test_an_exporter_scrape_without_any_gpu_is_unreadable_and_a_blank_one_shows_nothing() -> None:
    collector = get_collector("dcgm-metrics")
    text = "go_goroutines 12\nprocess_start_time_seconds 1.7e9\n"
    assessed = collector.assess(text, collector.facts(collector.parse(text)))
    assert assessed["coverage"]["understood"] is False
    assert collector.shows_nothing is not None
    assert collector.shows_nothing("")
    assert collector.shows_nothing(json.dumps({"status": "success", "data": {"resultType": "matrix", "result": []}}))
    assert not collector.shows_nothing(T4)


# ---- a window from Prometheus -----------------------------------------------------------------------


Series = list[tuple[dict[str, str], list[tuple[float, float]]]]


def answer(series: Series, end: float = 1000.0, step: float = 15.0) -> str:
    clock = {"metric": {"nightowl": "query_time"}, "values": [[t, str(t)] for t in (end - 2 * step, end - step, end)]}
    result = [{"metric": m, "values": [[t, str(v)] for t, v in pts]} for m, pts in series]
    return json.dumps({"status": "success", "data": {"resultType": "matrix", "result": [*result, clock]}})


LABELS = {"gpu": "0", "UUID": "GPU-a", "Hostname": "gpu-17", "instance": "10.0.0.7:9400", "job": "dcgm"}


def test_a_prometheus_window_reads_the_last_value_of_each_series() -> None:
    text = answer(
        [
            ({"__name__": "DCGM_FI_DEV_XID_ERRORS", **LABELS}, [(970.0, 0), (985.0, 79), (1000.0, 79)]),
            ({"__name__": "DCGM_FI_DEV_SM_CLOCK", **LABELS}, [(970.0, 1980), (1000.0, 1410)]),
        ]
    )
    result = facts(text)
    assert result["source"] == "prometheus"
    assert result["window"] == {"end": 1000.0, "step": 15.0, "series": 2, "stale_series": 0}
    assert result["gpus"][0]["xid_last"] == 79 and result["gpus"][0]["sm_clock_hz"] == 1410 * 10**6
    assert result["health_reporting"] and result["fallen_off_bus_gpus"] == ["GPU-a"]


def test_a_health_series_that_stopped_is_not_read_and_the_gpu_is_unjudged() -> None:
    text = answer(
        [
            ({"__name__": "DCGM_FI_DEV_XID_ERRORS", **LABELS}, [(900.0, 0), (955.0, 0)]),  # 45 s old: 3 steps
            ({"__name__": "DCGM_FI_DEV_POWER_USAGE", **LABELS}, [(970.0, 300), (1000.0, 310)]),
        ]
    )
    result = facts(text)
    assert result["gpus"][0]["xid_last"] is None
    assert result["gpus"][0]["stale_fields"] == ["xid_last"]
    assert not result["health_reporting"] and "stopped" in result["blind_reason"]


def test_every_series_stopped_is_an_exporter_gone() -> None:
    text = answer([({"__name__": "DCGM_FI_DEV_XID_ERRORS", **LABELS}, [(800.0, 0), (815.0, 0)])])
    result = facts(text)
    assert not result["health_reporting"] and "exporter or its scrape is gone" in result["blind_reason"]


def test_a_series_one_step_old_is_fresh() -> None:
    text = answer([({"__name__": "DCGM_FI_DEV_XID_ERRORS", **LABELS}, [(970.0, 0), (985.0, 0)])])
    assert facts(text)["health_reporting"]


def test_a_prometheus_error_answer_is_a_warning_not_a_verdict() -> None:
    result = facts(json.dumps({"status": "error", "errorType": "bad_data", "error": "parse error"}))
    assert result["gpus"] == [] and not result["health_reporting"]
    assert "parse error" in result["warnings"][0]


def test_the_query_asks_both_hostname_labels_or_the_one_given_and_escapes_the_node() -> None:
    default = dcgm_prometheus.query('gpu-"17"')
    assert 'Hostname="gpu-\\"17\\""' in default and 'hostname="gpu-\\"17\\""' in default
    assert "vector(time())" in default
    assert dcgm_prometheus.query("gpu-17", "node").count("node=") == 1
    url = dcgm_prometheus.query_range_url("http://prom:9090/", "gpu-17", 3600, 15, 1000.0, None)
    assert url.startswith("http://prom:9090/api/v1/query_range?query=") and "start=-2600.000" in url
    assert "step=15" in url


# ---- the data files ----------------------------------------------------------------------------------


def test_every_field_of_the_table_is_a_gpu_fact_and_every_name_feeds_one_field() -> None:
    (gpu,) = gpus(T4)
    for name in dcgm_fields.fields():
        assert name in gpu or name in dcgm_metrics.KEYED, name
    metrics = [row.metric for row in dcgm_fields.names()]
    assert len(metrics) == len(set(metrics)), "a metric name maps to two fields"


UNIT_FACTORS = {
    ("MHz", "Hz"): 1e6,
    ("mJ", "J"): 1e-3,
    ("MiB", "bytes"): 2**20,
    ("%", "ratio"): 0.01,
    ("ns", "s"): 1e-9,
    ("MB/s", "B/s"): 1000 * 1024,  # DCGM's NVLink "MB/s" is NVML's KiB/s divided by 1000 (NVIDIA/dcgm-exporter#658)
}


def test_each_unit_change_has_its_one_factor() -> None:
    for row in dcgm_fields.names():
        if row.unit == row.unit_out:
            assert row.factor == 1, row
        else:
            assert row.factor == pytest.approx(UNIT_FACTORS[(row.unit, row.unit_out)]), row
        assert row.source.startswith("[")


def test_every_row_names_its_source_and_the_label_table_loads() -> None:
    rows = knowledge.read_csv("dcgm_labels.csv", required=("key", "label", "confidence", "source"))
    assert {row["key"] for row in rows} >= {"uuid", "hostname", "driver_version", "pci_bus_id", "gpu"}
    assert dcgm_fields.labels()["hostname"] == ("hostname", "Hostname")


WATCH = {**LABELS, "health_error_code": "DCGM_FR_OK"}


def test_health_watches_that_all_pass_while_error_counters_move_are_not_watching() -> None:
    """DCGM 4.7 answering "API version mismatch" to health calls while stats work (NVIDIA/DCGM#314): the
    exporter's watches stay at PASS while the Xid and ECC counters move. Those zeros say nothing."""
    series: Series = [
        ({"__name__": "DCGM_EXP_GPU_HEALTH_STATUS", **WATCH, "health_watch": w}, [(970.0, 0.0), (1000.0, 0.0)])
        for w in ("MEM", "PCIE")
    ]
    moving: Series = [({"__name__": "DCGM_FI_DEV_PCIE_REPLAY_COUNTER", **LABELS}, [(970.0, 10.0), (1000.0, 4000.0)])]
    result = facts(answer(series + moving))
    (gpu,) = result["gpus"]
    assert gpu["health_watches"] == {"MEM": 0, "PCIE": 0}
    assert gpu["health_watches_contradicted"] == ["pcie_replay"]
    assert not result["health_reporting"] and "not watching" in result["blind_reason"]
    # the same watches with the counter still: they report
    still: Series = [({"__name__": "DCGM_FI_DEV_PCIE_REPLAY_COUNTER", **LABELS}, [(970.0, 10.0), (1000.0, 10.0)])]
    result = facts(answer(series + still))
    assert result["health_reporting"] and result["gpus"][0]["health_fields"] == ["health_status"]


def test_a_failing_health_watch_is_a_fact() -> None:
    labels = 'gpu="0",UUID="GPU-a",health_watch'
    text = (
        f'DCGM_EXP_GPU_HEALTH_STATUS{{{labels}="MEM",health_error_code="DCGM_FR_VOLATILE_DBE_DETECTED"}} 20\n'
        f'DCGM_EXP_GPU_HEALTH_STATUS{{{labels}="PCIE",health_error_code="DCGM_FR_OK"}} 0\n'
    )
    result = facts(text)
    assert result["health_fail_gpus"] == ["GPU-a"] and result["health_reporting"]


def test_unmapped_names_are_the_exporters_own() -> None:
    """A counter family the exposition parser reads as ``X_total`` is listed as the exporter printed it."""
    assert "DCGM_FI_DEV_COUNT" in facts(T4)["unmapped"]


def test_a_saved_query_range_answer_is_read_by_parse_whole() -> None:
    """`nightowl parse dcgm-metrics answer.json`: a pretty-printed Prometheus answer is all known structure."""
    from nightowl.collectors.base import parse_document

    series: Series = [({"__name__": "DCGM_FI_DEV_XID_ERRORS", **LABELS}, [(970.0, 0.0), (1000.0, 79.0)])]
    text = json.dumps(json.loads(answer(series)), indent=2)
    document = parse_document(get_collector("dcgm-metrics"), text)
    assert document["coverage"]["understood"] and document["coverage"]["unread"] == []
    assert document["gpus"][0]["xid_last"] == 79
