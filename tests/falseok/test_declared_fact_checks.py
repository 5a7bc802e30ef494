"""`runbook validate` knows every fact: a path no collector produces is an error with a "did you mean"."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from nightowl.cli.main import main
from nightowl.collectors import MODULES, get_collector
from nightowl.engine.validate import RunbookInvalid, load_runbook
from tests.engine.runbook_texts import XID_CHECK, variant, write_runbook
from tests.helpers import ROOT


def readme_runbook() -> str:
    """The README's minimal runbook, as a new user copies it."""
    readme = (ROOT / "README.md").read_text()
    block = re.search(r"A minimal runbook:\n\n```yaml\n(.*?)```", readme, re.S)
    assert block, "README has no minimal runbook"
    return block.group(1)


def validate(tmp_path: Path, text: str):  # noqa: ANN201
    path = tmp_path / "gpu-count.yaml"
    path.write_text(text)
    return CliRunner().invoke(main, ["runbook", "validate", str(path)]), path


def test_readme_runbook_validates(tmp_path: Path) -> None:
    result, _ = validate(tmp_path, readme_runbook())
    assert result.exit_code == 0, result.output


def test_readme_runbook_with_a_typo_fails_with_did_you_mean(tmp_path: Path) -> None:
    text = readme_runbook().replace("(nvidia_smi.gpu_count | default(0))", "nvidia_smi.gpu_cnt", 1)
    assert "gpu_cnt" in text
    result, path = validate(tmp_path, text)
    assert result.exit_code == 2, result.output
    line = next(i for i, row in enumerate(text.splitlines(), 1) if "gpu_cnt" in row)
    assert f"{path}:{line}: [node judge]" in result.output
    assert "nvidia_smi.gpu_cnt" in result.output and "did you mean 'gpu_count'" in result.output


BASE = variant(
    XID_CHECK,
    ("title: test\n", "title: t\nparameters:\n  limit: {default: 1}\n"),
    ("length > 0", "length > params.limit"),
    (
        '    verdict: {id: bad, severity: critical, action: reset-gpu, summary: "xids {{ kernel_log.xid_codes }}"}\n',
        "    verdict:\n      id: bad\n      severity: critical\n      action: reset-gpu\n"
        '      summary: "xids {{ kernel_log.xid_codes }}"\n'
        '      gpus: "kernel_log.fallen_off_bus_gpus"\n      evidence: [kernel_log.xids_by_gpu]\n',
    ),
)


def issues(tmp_path: Path, text: str) -> list:
    path = write_runbook(tmp_path, text)
    with pytest.raises(RunbookInvalid) as info:
        load_runbook(path, known_collectors=MODULES, lookup=get_collector)
    return info.value.issues


def test_base_loads(tmp_path: Path) -> None:
    path = tmp_path / "rb.yaml"
    path.write_text(BASE)
    load_runbook(path, known_collectors=MODULES, lookup=get_collector)


@pytest.mark.parametrize(
    ("good", "bad", "suggestion"),
    [
        ("kernel_log.xid_codes | length", "kernel_log.xid_code | length", "xid_codes"),  # condition
        ('"xids {{ kernel_log.xid_codes }}"', '"xids {{ kernel_log.xidcodes }}"', "xid_codes"),  # template
        ('gpus: "kernel_log.fallen_off_bus_gpus"', 'gpus: "kernel_log.fallen_off_gpus"', "fallen_off_bus_gpus"),
        ("evidence: [kernel_log.xids_by_gpu]", "evidence: [kernel_log.xid_by_gpu]", "xids_by_gpu"),
        ("params.limit", "params.limt", "limit"),
    ],
)
def test_every_place_a_fact_is_read_is_checked(tmp_path: Path, good: str, bad: str, suggestion: str) -> None:
    assert good in BASE
    found = issues(tmp_path, BASE.replace(good, bad, 1))
    assert len(found) == 1, found
    line = next(i for i, row in enumerate(BASE.replace(good, bad, 1).splitlines(), 1) if bad.split()[-1] in row)
    assert found[0].line == line and "did you mean" in found[0].message
    assert repr(suggestion) in found[0].message.partition("did you mean")[2]


def test_a_default_guard_does_not_hide_a_fact_no_collector_produces(tmp_path: Path) -> None:
    found = issues(
        tmp_path, BASE.replace("kernel_log.xid_codes | length", "kernel_log.xid_code | default([]) | length")
    )
    assert "does not produce" in found[0].message


OPTIONAL_PATH = variant(
    XID_CHECK,
    ("title: test", "title: t"),
    ("goto: bad\n    default: good\n", "goto: more\n    default: verdict\n"),
    (
        XID_CHECK[XID_CHECK.index("  bad:\n") :],  # both verdicts give way to a collect and one verdict
        "  more:\n    collect: [nvidia-smi]\n    next: verdict\n"
        '  verdict:\n    verdict: {id: v, severity: info, action: none, summary: "{{ READ }}"}\n',
    ),
)


def test_verdict_reading_a_fact_not_collected_on_every_path_is_flagged_unless_guarded(tmp_path: Path) -> None:
    found = issues(tmp_path, OPTIONAL_PATH.replace("READ", "nvidia_smi.gpu_count"))
    assert found[0].node == "verdict" and "not every path" in found[0].message
    path = tmp_path / "guarded.yaml"
    path.write_text(OPTIONAL_PATH.replace("READ", "nvidia_smi.gpu_count | default('not read')"))
    load_runbook(path, known_collectors=MODULES, lookup=get_collector)
