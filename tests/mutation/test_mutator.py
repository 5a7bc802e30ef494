"""scripts/mutate (the AST mutator behind docs/mutation.md): which mutants it makes, that each one is a
real one-change program, and that every row of tests/mutation/equivalent.txt still names a mutant."""

from __future__ import annotations

import ast
import importlib.util
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def mutate():  # type: ignore[no-untyped-def]
    spec = importlib.util.spec_from_file_location("nightowl_mutate", ROOT / "scripts" / "mutate.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["nightowl_mutate"] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


SOURCE = '''"""Docstring: never mutated."""
from __future__ import annotations

LIMIT = 3


def f(x: int, name: str = "n") -> bool:
    """Nor this one."""
    if x > LIMIT and not name:
        return True
    items = []
    items.append(x)
    return x == 1 or x in items
'''


def test_the_mutants_of_a_small_module(mutate) -> None:  # type: ignore[no-untyped-def]
    changes = [(m.line, m.change) for m in mutate.mutants(SOURCE)]
    assert (4, "`3` -> `4`") in changes and (4, "`3` -> `2`") in changes
    assert (9, "`>` -> `>=` in `x > LIMIT`") in changes
    assert (9, "`and` -> `or` in `x > LIMIT and not name`") in changes
    assert (9, "`not` dropped in `not name`") in changes
    assert (9, "condition negated: `x > LIMIT and not name`") in changes
    assert (10, "`True` -> `False`") in changes
    assert (12, "statement removed: `items.append(x)`") in changes
    assert (13, "`return x == 1 or x in items` -> `return None`") in changes
    assert (13, "`in` -> `not in` in `x in items`") in changes
    assert (7, "string `\"n\"` -> `''`") in changes
    # Docstrings, annotations and the __future__ import are left alone.
    assert not any("Docstring" in c or "Nor this" in c or "annotations" in c or "int" in c for _, c in changes)


def test_each_mutant_is_the_source_with_one_change(mutate) -> None:  # type: ignore[no-untyped-def]
    original = ast.dump(ast.parse(SOURCE))
    seen = set()
    for m in mutate.mutants(SOURCE):
        text = mutate.mutated_source(SOURCE, m.index)
        compile(text, "<mutant>", "exec")
        dumped = ast.dump(ast.parse(text))
        assert dumped != original, m
        seen.add(dumped)
    assert len(seen) == len(mutate.mutants(SOURCE))  # no two mutants are the same program


def test_every_equivalent_row_names_a_mutant_that_exists(mutate) -> None:  # type: ignore[no-untyped-def]
    rows = [
        line for line in mutate.EQUIVALENT.read_text(encoding="utf-8").splitlines()
        if line.strip() and not line.startswith("#")
    ]  # fmt: skip
    listed: dict[str, set[tuple[int, str]]] = {}  # a module's mutants, made once for all its rows
    for row in rows:
        parts = row.split(" | ")
        assert len(parts) == 4 and all(p.strip() for p in parts), row
        module, line, change = parts[0].strip(), int(parts[1]), parts[2].strip()
        if module not in listed:
            listed[module] = {(m.line, m.change) for m in mutate.mutants((ROOT / module).read_text(encoding="utf-8"))}
        assert (line, change) in listed[module], f"stale row (the code moved or changed): {row}"
        assert (line, change) in mutate.equivalent(module)


def test_the_same_change_twice_on_a_line_is_told_apart(mutate) -> None:  # type: ignore[no-untyped-def]
    changes = [m.change for m in mutate.mutants("x = 1 if y > 1 else 2\n")]
    assert "`1` -> `2`" in changes and "`1` -> `2` (2nd)" in changes
    assert len(changes) == len(set(changes))
