"""Expressions run from the code the runbook cache stored (expressions.install_precompiled) walk every
rehearsal to its expected path and verdict, with Jinja's compiler never asked."""

from __future__ import annotations

import contextlib
import marshal
from collections.abc import Iterator
from typing import Any

import pytest

from nightowl.engine import expressions
from nightowl.library import runbooks
from nightowl.library.rehearse import rehearsal_cases, rehearse

CASES = [(name, case) for name in runbooks.builtin_paths() for case in rehearsal_cases(name)]


def _clear() -> None:
    expressions._compiled.cache_clear()
    expressions._template.cache_clear()


@pytest.fixture(scope="module")
def stored() -> dict[str, Any]:
    """The code of every expression of every built-in runbook, as a cache entry holds it once runs have
    evaluated them all (marshal bytes; library/runbooks.py stores what a run compiled)."""
    merged: dict[str, Any] = {"expressions": {}, "templates": {}, "fact_paths": {}}
    for name in runbooks.builtin_paths():
        conditions, values, templates = runbooks.expression_sources(runbooks.load(name))
        for source in conditions | values:
            with contextlib.suppress(Exception):  # a params value that is text, not an expression
                merged["expressions"][source] = marshal.dumps(expressions.expression_code(source))
        merged["templates"].update({s: marshal.dumps(expressions.template_code(s)) for s in templates})
        merged["fact_paths"].update({source: expressions.fact_paths(source) for source in conditions})
    return merged


@pytest.fixture
def only_stored_code(stored: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setattr(expressions, "_PRECOMPILED", {})
    monkeypatch.setattr(expressions, "_KNOWN_FACT_PATHS", {})
    expressions.install_precompiled(stored["expressions"], stored["templates"], stored["fact_paths"])
    env = expressions.environment()

    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError(f"compiled at run time: {args[:1]}")

    monkeypatch.setattr(env, "compile_expression", refuse)
    monkeypatch.setattr(env, "from_string", refuse)
    monkeypatch.setattr(env, "compile", refuse)  # what a run compiles without stored code goes through
    monkeypatch.setattr(expressions, "_fact_paths", refuse)
    _clear()
    yield
    _clear()


def test_every_expression_of_every_runbook_has_stored_code(stored: dict[str, Any]) -> None:
    assert len(stored["expressions"]) > 100 and len(stored["templates"]) > 50
    for code in [*stored["expressions"].values(), *stored["templates"].values()]:
        assert marshal.loads(code).co_filename == "<template>"


@pytest.mark.parametrize(("runbook", "case"), CASES, ids=[f"{n}:{c.get('name', c.get('host'))[:60]}" for n, c in CASES])
def test_rehearsal_from_stored_code(runbook: str, case: dict, only_stored_code: None) -> None:
    result = rehearse(runbook, case)
    assert result.passed, f"{result.name}: {'; '.join(result.problems)} (path {result.path})"


@pytest.mark.parametrize(
    ("source", "context"),
    [
        ("x > 2", {"x": 3}),
        ("x > 2", {"x": 1}),
        ("(xs | default([])) | length > 0", {}),
        ("'a' in name", {"name": "abc"}),
        ("y.z == 1", {"y": {"z": 1}}),
    ],
)
def test_stored_code_gives_what_compiling_gives(source: str, context: dict, monkeypatch: pytest.MonkeyPatch) -> None:
    _clear()
    compiled = expressions.evaluate_condition(source, context)
    monkeypatch.setattr(expressions, "_PRECOMPILED", {})
    expressions.install_precompiled({source: marshal.dumps(expressions.expression_code(source))}, {}, {})
    monkeypatch.setattr(expressions.environment(), "compile_expression", None)  # stored code or a TypeError
    _clear()
    try:
        assert expressions.evaluate_condition(source, context) is compiled
    finally:
        _clear()


def test_the_sandbox_holds_in_stored_code(monkeypatch: pytest.MonkeyPatch) -> None:
    source = "x.__class__.__mro__ | length > 0"
    monkeypatch.setattr(expressions, "_PRECOMPILED", {})
    expressions.install_precompiled({source: marshal.dumps(expressions.expression_code(source))}, {}, {})
    monkeypatch.setattr(expressions.environment(), "compile_expression", None)
    _clear()
    try:
        with pytest.raises(expressions.ExpressionError):
            expressions.evaluate_condition(source, {"x": 1})
    finally:
        _clear()
