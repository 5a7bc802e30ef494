"""dcgmi-diag collector: one JSON case per captured sample, plus the layouts the corpus lacks."""

from __future__ import annotations

from nightowl.collectors import get_collector
from nightowl.collectors.gpu import dcgmi_diag as dcgmi_module
from nightowl.collectors.gpu.dcgmi_diag import COLLECTOR, facts, parse


def test_collector_is_level_one_and_not_invasive() -> None:
    assert get_collector("dcgmi-diag") is COLLECTOR
    assert COLLECTOR.commands == (("dcgmi", "diag", "-r", "1"),)
    assert not COLLECTOR.invasive
    assert "level" in COLLECTOR.description and "invasive" in (dcgmi_module.__doc__ or "")


# A complete DCGM 3.x table (shape from DCGM dcgmi/Diag.cpp): skipped and warned tests, footer border.
FULL_3X = """Successfully ran diagnostic for group.
+---------------------------+------------------------------------------------+
| Diagnostic                | Result                                         |
+===========================+================================================+
|-----  Metadata  ----------+------------------------------------------------|
| DCGM Version              | 3.3.5                                          |
|-----  Deployment  --------+------------------------------------------------|
| Denylist                  | Pass                                           |
+-----  Integration  -------+------------------------------------------------+
| PCIe                      | Pass - All                                     |
+-----  Hardware  ----------+------------------------------------------------+
| GPU Memory                | Pass - All                                     |
| Diagnostic                | Skip - All                                     |
+-----  Stress  ------------+------------------------------------------------+
| Targeted Stress           | Warn - GPU: 1                                  |
|                           | Pass - GPUs: 0, 2, 3                           |
| Warning                   | GPU 1 Clocks are being throttled for GPU 1 be |
|                           | cause of HW slowdown                           |
+---------------------------+------------------------------------------------+
"""


def test_complete_table_with_warn_and_skip() -> None:
    derived = facts(parse(FULL_3X))
    assert derived["complete"] is True and derived["warnings"] == []
    assert derived["overall"] == "warn"
    assert derived["warned_tests"] == ["Targeted Stress"] and derived["skipped_tests"] == ["Diagnostic"]
    stress = derived["tests"][-1]
    assert stress["category"] == "Stress"
    assert stress["details"] == [
        {
            "severity": "warning",
            "gpu": 1,
            "text": "GPU 1 Clocks are being throttled for GPU 1 because of HW slowdown",
        }
    ]


def test_complete_pass_and_all_skipped() -> None:
    passing = FULL_3X.split("+-----  Stress")[0] + "+---------------------------+---+\n"
    assert facts(parse(passing))["overall"] == "pass"
    skipped = "\n".join(["+---+---+", "| Diagnostic | Result |", "+===+===+", "| Memtest | Skip - All |", "+---+---+"])
    assert parse(skipped).overall == "not_run"


DCGM4_JSON = """$ dcgmi diag -r long -j
{
  "DCGM Diagnostic": {"test_categories": [{"category": "Hardware", "tests": [{"name": "memory",
     "results": [{"entity_group": "GPU", "entity_group_id": 1, "entity_id": 0, "status": "Fail",
                  "warnings": [{"warning": "GPU 0 had uncorrectable memory errors", "error_id": 12,
                                "error_category": 1, "error_severity": 2}]},
                 {"entity_group": "GPU", "entity_group_id": 1, "entity_id": 1, "status": "Pass"}],
     "test_summary": {"status": "Fail"}}]}]},
  "metadata": {"version": "4.2.3", "Driver Version Detected": "570.148.08"}
}
"""

DCGM3_JSON = """{"DCGM GPU Diagnostic": {"test_categories": [{"category": "Deployment", "tests": [
  {"name": "Denylist", "results": [{"status": "Pass"}]},
  {"name": "Persistence Mode", "results": [{"gpu_ids": "0,1", "status": "Skip",
     "warnings": ["Persistence mode for GPU 0 is disabled."]}]}]}], "version": "3.3.1"}}
"""


def test_json_outputs_of_both_major_versions() -> None:
    four = facts(parse(DCGM4_JSON))
    assert (four["dcgm_version"], four["driver_version"], four["level"]) == ("4.2.3", "570.148.08", 3)
    assert four["overall"] == "fail" and four["failed_gpus"] == [0]
    assert four["tests"][0]["details"][0] == {
        "severity": "warning",
        "gpu": 0,
        "text": "GPU 0 had uncorrectable memory errors",
    }
    three = facts(parse(DCGM3_JSON))
    assert three["dcgm_version"] == "3.3.1" and three["overall"] == "pass"
    assert three["skipped_tests"] == ["Persistence Mode"]
    assert three["tests"][1]["gpus"] == [{"gpu": 0, "result": "skip"}, {"gpu": 1, "result": "skip"}]


HEALTH_TREE = """+---------------------------+------------------------------------------------+
| Health Monitor Report                                                      |
+===========================+================================================+
| Overall Health            | Warning                                        |
| GPU                       |                                                |
| -> 0                      | Warning                                        |
|    -> Errors              |                                                |
|       -> PCIe system      | Warning                                        |
|                           | Detected more than 8 PCIe replays per minute   |
+---------------------------+------------------------------------------------+
"""

HEALTH_JSON = """{"body": {"Overall Health": {"value": "Failure"},
 "GPU": {"children": {"3": {"value": "Failure",
 "children": {"Errors": {"children": {"Memory system": {"value": "Failure",
 "overflow": ["A volatile double-bit ECC error has occurred on GPU 3."]}}}}}}}},
 "header": ["Health Monitor Report"]}"""


def test_health_reports() -> None:
    tree = facts(parse(HEALTH_TREE))
    assert tree["health_overall"] == "warning" and tree["overall"] == "not_run"
    assert tree["health"]["incidents"] == [
        {
            "entity_group": "GPU",
            "entity_id": 0,
            "system": "PCIe system",
            "health": "warning",
            "messages": ["Detected more than 8 PCIe replays per minute"],
        }
    ]
    report = parse(HEALTH_JSON).health
    assert report is not None and report.overall == "failure"
    assert report.incidents[0].entity_id == 3 and report.incidents[0].health == "failure"
    assert report.incidents[0].messages == ["A volatile double-bit ECC error has occurred on GPU 3."]


def test_runtime_error_and_garbage() -> None:
    result = parse("Error: Diagnostic could not be run while DCGM is paused.\n")
    assert result.runtime_error == "Diagnostic could not be run while DCGM is paused."
    assert result.overall == "not_run"
    assert parse("no table\n").warnings
