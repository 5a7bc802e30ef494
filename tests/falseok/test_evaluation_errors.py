"""Issue examples: a rule that cannot be evaluated is "cannot judge", never false; a verdict field
that cannot be rendered leaves the verdict standing and says why."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from click.testing import CliRunner

from nightowl.cli.main import main
from tests.engine.runbook_texts import variant
from tests.falseok.test_declared_fact_checks import readme_runbook
from tests.helpers import ROOT

HOSTS = ROOT / "fixtures" / "hosts"

# The README's minimal runbook with a condition a user gets wrong: a version string against a number.
WRONG_TYPE_RUNBOOK = variant(
    readme_runbook(),
    ("(nvidia_smi.gpu_count | default(0)) < params.expected_gpus", "nvidia_smi.driver_version < params.expected_gpus"),
)


def invoke(*args: str):  # noqa: ANN201
    return CliRunner().invoke(main, list(args))


def test_condition_that_fails_to_evaluate_is_cannot_judge_not_ok(tmp_path: Path) -> None:
    runbook = tmp_path / "gpu-count.yaml"
    runbook.write_text(WRONG_TYPE_RUNBOOK)
    host = tmp_path / "one-gpu"
    host.mkdir()
    shutil.copy(HOSTS / "healthy-l40s" / "nvidia-smi.out", host / "nvidia-smi.out")
    result = invoke("triage", str(runbook), "--replay", str(host), "--out", str(tmp_path / "b"))
    assert result.exit_code == 3, result.output
    assert "all GPUs visible" not in result.output and "OK" not in result.output.split()
    assert "NO VERDICT" in result.output
    assert "node judge" in result.output and "driver_version" in result.output


def test_xid64_without_nvidia_smi_keeps_the_verdict_and_says_what_is_missing(tmp_path: Path) -> None:
    host = tmp_path / "xid64"
    host.mkdir()
    lines = (HOSTS / "xid48-xid64-dbe" / "kernel-log.out").read_text().splitlines()
    (host / "kernel-log.out").write_text("\n".join(line for line in lines if "): 64," in line) + "\n")
    result = invoke("triage", "xid", "--replay", str(host), "--out", str(tmp_path / "b"), "--format", "json")
    assert result.exit_code == 1, result.output
    verdict = json.loads(result.output)["hosts"][0]["verdict"]
    assert verdict["id"] == "row-remap-failed" and verdict["action"] == "hardware-ticket"
    # the GPU comes from the Xid 64 line itself (kernel_log.remap_failed_gpus); nvidia-smi's part is named missing
    assert verdict["gpus"] == ["0000:07:00"]
    missing = [e for e in verdict["evidence"] if e["fact"] == "nvidia_smi.remap_failure_gpus"]
    assert missing and "nvidia-smi" in missing[0]["reason"]


def test_a_crash_exits_70_with_one_line_naming_the_traceback_and_bundle(tmp_path: Path, monkeypatch) -> None:  # noqa: ANN001
    from nightowl.engine.runner import HostRunner

    def boom(self, node_id, node):  # noqa: ANN001, ANN202
        raise RuntimeError("simulated bug")

    monkeypatch.setattr(HostRunner, "_conclude", boom)
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", None)
    result = invoke("triage", "xid", "--replay", str(HOSTS / "healthy-l40s"), "--out", str(tmp_path / "b"))
    assert result.exit_code == 70
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1 and "bug" in lines[0] and "simulated bug" in lines[0]
    saved = next(tmp_path.glob("nightowl-crash-*.txt"))
    assert saved.name in lines[0] and "RuntimeError" in saved.read_text()
    assert "partial bundle at" in lines[0]
    assert any((tmp_path / "b").iterdir())
