"""nccl-tests collector: one JSON case per corpus sample, format variants, and the busbw judge."""

# ruff: noqa: E501 - log and table lines are kept verbatim, one per source line

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from nightowl.collectors.nccl.nccl_tests import (
    BUSBW_PROFILES,
    COLLECTOR,
    facts,
    judge_busbw,
    nccl_version_string,
    parse,
)
from tests.helpers import ROOT, assert_subset


def facts_of(text: str) -> dict:
    return facts(parse(text))


def sample(name: str) -> str:
    return (ROOT / "fixtures" / "corpus" / "nccl" / name).read_text()


def test_collector_declaration() -> None:
    from nightowl.collectors.nccl.nccl_tests import RUN_COLLECTOR

    assert COLLECTOR.kind == "nccl-tests" and COLLECTOR.invasive is False  # reads a saved result
    assert COLLECTOR.commands == (("cat", "--", "{nccl_tests_file}"),)
    assert RUN_COLLECTOR.invasive is True and RUN_COLLECTOR.commands[0][0] == "all_reduce_perf"


# --- table variants not in the corpus -------------------------------------------------------

HEADER = "#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong\n"


def test_check_disabled_prints_na_wrong_columns() -> None:
    text = (
        HEADER
        + "        1024           256     float     sum      -1    12.50    0.08    0.14    N/A    12.40    0.08    0.14    N/A\n"
    )
    result = facts_of(text)
    assert_subset(
        result["rows"],
        [{"size": 1024, "out_of_place": {"wrong": None, "busbw": 0.14}, "in_place": {"wrong": None}}],
    )
    assert result["wrong_total"] is None
    assert result["failed"] is False


def test_old_header_without_root_column() -> None:
    text = (
        "#       size         count    type   redop     time   algbw   busbw  error     time   algbw   busbw  error\n"
        "           8             2   float     sum    12.34    0.00    0.00  0e+00    12.01    0.00    0.00  0e+00\n"
        "# Avg bus bandwidth    : 0.00123\n"
    )
    result = facts_of(text)
    # "error" (before 2.10) is the largest absolute error, a float: not a count of wrong elements
    assert_subset(
        result["rows"],
        [
            {
                "size": 8,
                "root": None,
                "redop": "sum",
                "out_of_place": {"time_us": 12.34, "wrong": None, "max_error": 0.0},
            }
        ],
    )
    assert result["wrong_total"] is None and result["max_error"] == 0.0
    assert result["avg_busbw"] == 0.00123
    assert result["out_of_bounds"] is None


def test_per_iteration_columns_and_timestamps() -> None:
    text = (
        "#       size         count      type   redop    root     time   algbw   busbw  #wrong    i_min    i_max    i_p99    i_cv%"
        "     time   algbw   busbw  #wrong    i_min    i_max    i_p99    i_cv%\n"
        "     1048576        262144     float     sum      -1    20.10   52.17   97.82       0    19.80    21.00    20.90     1.20"
        "    20.00   52.43   98.31       0    19.70    20.80    20.70     1.10  2025-01-02 03:04:05\n"
    )
    row = facts_of(text)["rows"][0]
    assert_subset(
        row,
        {
            "out_of_place": {"busbw": 97.82, "per_iter": {"min_us": 19.8, "cv_pct": 1.2}},
            "in_place": {"busbw": 98.31, "per_iter": {"p99_us": 20.7}},
        },
    )


def test_all_gather_rows_have_no_redop_and_binary_names_the_collective() -> None:
    text = (
        "+ mpirun -np 16 ./build/all_gather_perf -b 1M -e 1G -f 2\n"
        + HEADER
        + "     1048576         16384     float    none      -1    40.10   26.15   24.51      0    39.00   26.89   25.21      0\n"
    )
    result = facts_of(text)
    assert result["collective"] == "all_gather"
    assert_subset(result["rows"], [{"redop": "none", "count": 16384}])


def test_harness_failure_is_reported_and_run_not_completed() -> None:
    text = HEADER + " host: Test NCCL failure common.cu:961 'unhandled system error'\n"
    result = facts_of(text)
    assert result["errors"] == ["Test NCCL failure common.cu:961 'unhandled system error'"]
    assert result["completed"] is False


JSON_OUTPUT = {  # shape written by nccl-tests src/util.cu, JSON_FILE_VERSION 2
    "version": 2,
    "start_time": "2025-01-01 00:00:00",
    "args": ["./build/all_reduce_perf", "-b", "8", "-e", "16", "-J", "out.json"],
    "env": [],
    "nccl_version": 22703,
    "config": {
        "nthreads": 1,
        "ngpus": 2,
        "minimum_bytes": 8,
        "maximum_bytes": 16,
        "step_factor": 2,
        "blocking_collectives": "false",
        "devices": [
            {
                "rank": 0,
                "group": 0,
                "pid": 10,
                "hostname": "gpu1",
                "device": 0,
                "device_hex": "0000:1b:00",
                "device_info": "NVIDIA H100 80GB HBM3",
            },
            {
                "rank": 1,
                "group": 0,
                "pid": 10,
                "hostname": "gpu1",
                "device": 1,
                "device_hex": "0000:43:00",
                "device_info": "NVIDIA H100 80GB HBM3",
            },
        ],
    },
    "results": [
        {
            "size": 8,
            "count": 2,
            "type": "float",
            "redop": "sum",
            "root": "    -1",
            "out_of_place": {"time": 10.5, "alg_bw": 0.0, "bus_bw": 0.0, "nwrong": 0.0},
            "in_place": {"time": 10.1, "alg_bw": 0.0, "bus_bw": 0.0, "nwrong": None},
            "actual_iterations": 20,
            "experiment_name": "all_reduce",
        },
        {
            "size": 16,
            "count": 4,
            "type": "float",
            "redop": "sum",
            "root": "    -1",
            "out_of_place": None,
            "in_place": {"time": 10.2, "alg_bw": "nan", "bus_bw": 0.01, "nwrong": 2.0},
        },
    ],
    "out_of_bounds": {"count": 2, "okay": "false"},
    "average_bus_bandwidth": {"bandwidth": 0.005, "okay": "unchecked"},
    "errors": [],
}


def test_json_output_file() -> None:
    result = facts_of(json.dumps(JSON_OUTPUT))
    assert_subset(
        result,
        {
            "collective": "all_reduce",
            "nccl_version": "2.27.3",
            "nranks": 2,
            "ngpus": 2,
            "devices": [
                {"rank": 0, "host": "gpu1", "bus_id": "0000:1b:00"},
                {"rank": 1, "bus_id": "0000:43:00"},
            ],
            "rows": [
                {
                    "size": 8,
                    "root": -1,
                    "out_of_place": {"time_us": 10.5, "wrong": 0},
                    "in_place": {"wrong": None},
                },
                {"size": 16, "out_of_place": None, "in_place": {"algbw": None, "busbw": 0.01, "wrong": 2}},
            ],
            "out_of_bounds": 2,
            "avg_busbw": 0.005,
            "wrong_total": 2,
            "failed": True,
            "warnings": [],
        },
    )


@pytest.mark.parametrize(
    "document",
    [
        {"results": 5, "config": 5},
        {"results": [None, 3, {"size": "x"}], "config": {"devices": [{"rank": 1, "device": "x"}, 7]}},
        {"nccl_version": -5, "results": [{"size": 1e300, "count": "NaN"}], "out_of_bounds": []},
        {"average_bus_bandwidth": {"bandwidth": "nan"}, "out_of_bounds": {"count": True}},
    ],
)
def test_malformed_json_never_raises(document: dict) -> None:
    assert facts_of(json.dumps(document))["kind"] == "nccl-tests"


def test_nccl_version_codes() -> None:
    assert nccl_version_string(22907) == "2.29.7"
    assert nccl_version_string(2804) == "2.8.4"


# --- judge_busbw ----------------------------------------------------------------------------


def test_healthy_h100_node_meets_its_profile() -> None:
    verdict = judge_busbw(
        parse(sample("nccl-tests_all_reduce_h100_8gpu_single_node_nvswitch.txt")), "h100-sxm-8gpu-single-node"
    )
    # only sizes >= 1 GiB are compared: 466.57 and 470.73 GB/s against 450
    assert verdict["status"] == "ok"
    assert verdict["compared"] == 2
    assert verdict["worst_ratio"] == pytest.approx(466.57 / 450, abs=1e-4)


def test_p2p_disabled_box_is_slow_against_the_profile() -> None:
    verdict = judge_busbw(
        parse(sample("nccl-tests_all_reduce_a40_4gpu_sys_boundary_p2p_disabled_slow.txt")),
        "h100-sxm-8gpu-single-node",
    )
    assert verdict["status"] == "slow"
    assert [row["size"] for row in verdict["rows_below"]] == [1073741824, 2147483648, 4294967296, 8589934592]


def test_single_placement_dip_is_not_a_slow_curve() -> None:
    result = parse(sample("nccl-tests_all_reduce_a100_4gpu_nvswitch_one_slow_row.txt"))
    baseline = {1073741824: 225.0, 2147483648: 230.0, 4294967296: 232.0, 8589934592: 234.0}
    assert judge_busbw(result, baseline)["status"] == "ok"  # in-place 164 at 4 GB, out-of-place 232.81
    slow = judge_busbw(facts(result), {"4294967296": 300.0})  # facts dicts and string sizes work too
    assert_subset(slow, {"status": "slow", "compared": 1, "rows_below": [{"size": 4294967296, "busbw": 232.81}]})


def test_nothing_comparable_is_unknown() -> None:
    result = parse(sample("nccl-tests_all_reduce_a40_2gpu_node_boundary_p2p_disabled.txt"))
    assert judge_busbw(result, {8: 1.0})["status"] == "unknown"
    assert judge_busbw(result, "no-such-profile")["status"] == "unknown"
    assert set(BUSBW_PROFILES) == {"h100-sxm-8gpu-single-node", "h100-8x400g-ib-multi-node"}


# --- never raises ----------------------------------------------------------------------------

FAST = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@FAST
@given(
    st.recursive(
        st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=5),
        lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
        max_leaves=20,
    )
)
def test_random_json(document: object) -> None:
    assert facts_of(json.dumps({"results": document, "config": document}))["kind"] == "nccl-tests"


def test_busbw_judgement_against_the_job_median_and_a_baseline() -> None:
    from nightowl.collectors.nccl.busbw_judgement import judge_members

    hosts = {h: {"nccl_tests": {"large_msg_busbw": v}} for h, v in (("a", 450.0), ("b", 440.0), ("c", 234.72))}
    median = judge_members({"hosts": hosts}, {"busbw_tolerance": 0.2})
    assert median["reference"] == 440.0 and median["reference_kind"] == "job median"
    assert median["below_hosts"] == ["c"] and median["at_baseline_hosts"] == ["a", "b"]
    fixed = judge_members({"hosts": hosts}, {"busbw_baseline": 600, "busbw_tolerance": 0.2})
    assert fixed["below_hosts"] == ["a", "b", "c"] and fixed["at_baseline_hosts"] == []
    assert judge_members({"hosts": {}}, {})["warnings"]
