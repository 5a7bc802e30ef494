"""The ablation's own machinery: cases ablated in worker processes, and the runs it may leave out."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from nightowl.library.rehearse import _already_empty, _recorded_outputs, ablate_cases, ablation_pool, rehearsal_cases
from nightowl.paths import data_dir
from tests.runbooks.test_ablation import node_health_without_kernel_log_guard


def test_cases_ablated_in_worker_processes_report_every_run_and_finding_in_order(tmp_path: Path, monkeypatch) -> None:  # noqa: ANN001
    """The workers resolve the runbook as the caller does (a site folder here, the kernel-log guard dropped);
    every run is counted and the findings come back in case order, as one process gives them
    (test_ablation_catches_a_runbook_that_calls_absence_healthy: the same two findings for one case)."""
    folder = tmp_path / "site"
    folder.mkdir()
    (folder / "node-health.yaml").write_text(node_health_without_kernel_log_guard())
    monkeypatch.setenv("NIGHTOWL_RUNBOOK_PATH", str(folder))
    case = next(c for c in rehearsal_cases("node-health") if c.get("host") == "healthy-l40s")
    cases = tmp_path / "rehearsals.yaml"
    cases.write_text(yaml.safe_dump([{**case, "name": "first"}, {**case, "name": "second"}]))
    with ablation_pool(2) as workers:  # started here: the site folder is set in this test's environment
        runs, findings = ablate_cases(["node-health"], cases, pool=workers)
    outputs = _recorded_outputs(data_dir("fixtures") / "hosts" / "healthy-l40s")
    assert runs == 2 * sum(1 if _already_empty(output) else 2 for output in outputs)  # both cases, every run
    assert [(f.case, f.output, f.mode) for f in findings] == [
        (name, "kernel-log.out", mode) for name in ("first", "second") for mode in ("removed", "emptied")
    ]


@pytest.mark.parametrize(
    ("files", "empty"),
    [
        ({"k.out": "", "k.rc": "0\n"}, True),
        ({"k.out": ""}, True),  # no .rc: exit 0
        ({"k.out": "", "k.rc": "0", "k.err": ""}, True),
        ({"k.out": "x", "k.rc": "0"}, False),
        ({"k.out": "", "k.rc": "1"}, False),
        ({"k.out": "", "k.rc": ""}, False),  # an empty .rc is unreadable, not exit 0
        ({"k.out": "", "k.err": "curl: (7) refused"}, False),
        ({"k.out": "", "k.timeout": ""}, False),
    ],
)
def test_only_an_output_that_emptied_is_itself_skips_the_emptied_run(
    tmp_path: Path, files: dict[str, str], empty: bool
) -> None:
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    assert _already_empty(tmp_path / "k.out") is empty
