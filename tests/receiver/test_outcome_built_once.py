"""A run's Outcome is built in one place (nightowl/run.py, from what the caller describes): the capture and the
watch's judge read ``result.outcome``; neither rebuilds one from the run's pieces when it is missing (a
fallback only tests reached, which would let the two tell one run two ways). ``outcome_from_run(None, ...)``
stays: a capture that never ran has no result to read (``Capture.notice``)."""

from __future__ import annotations

import ast
from pathlib import Path

from tests.test_architecture import module_files

BUILDER = "nightowl.run"


def rebuilds(modules: dict[str, Path]) -> list[str]:
    """Each call ``outcome_from_run(<a run's result>, ...)`` outside nightowl/run.py, as module:line."""
    found = []
    for module, path in modules.items():
        if module == BUILDER:
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.Call):
                continue
            name = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
            first = node.args[0] if node.args else None
            if name == "outcome_from_run" and not (isinstance(first, ast.Constant) and first.value is None):
                found.append(f"{module}:{node.lineno}")
    return found


def test_only_run_and_save_builds_a_runs_outcome() -> None:
    assert not rebuilds(module_files()), "read result.outcome (nightowl/run.py builds it)"


def test_the_rebuild_check_can_fail(tmp_path: Path) -> None:
    (tmp_path / "capture.py").write_text(
        "def told(result):\n    return result.outcome or outcome_from_run(result, 'alert')\n"
        "def never_ran():\n    return outcome_from_run(None, 'alert', failure='queue full')\n"
    )
    (tmp_path / "run.py").write_text("def built(result):\n    return outcome_from_run(result, 'hand')\n")
    modules = {"pkg.capture": tmp_path / "capture.py", BUILDER: tmp_path / "run.py"}
    assert rebuilds(modules) == ["pkg.capture:2"]
