"""The size budget: no module of the package over 800 lines, no function or method over 80.

What is over today is listed in ``tests/size_budget.txt`` with its size; the list may only shrink: an
entry fails when its item grows, when it is back within budget (delete the line), and when it shrank
(lower the number), so a split is kept. A new module or function over budget fails at once.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "nightowl"
ALLOW_LIST = Path(__file__).resolve().parent / "size_budget.txt"
MAX_MODULE_LINES = 800
MAX_FUNCTION_LINES = 80


def function_sizes(path: Path, root: Path = ROOT) -> Iterator[tuple[str, int]]:
    """``file::Qualified.name`` and its length in lines (``def`` to last line, decorators excluded), for
    every function and method, nested ones included (their lines count toward the enclosing one too)."""
    rel = path.relative_to(root).as_posix()

    def walk(node: ast.AST, prefix: str) -> Iterator[tuple[str, int]]:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                name = prefix + child.name
                yield f"{rel}::{name}", (child.end_lineno or child.lineno) - child.lineno + 1
                yield from walk(child, name + ".")
            elif isinstance(child, ast.ClassDef):
                yield from walk(child, prefix + child.name + ".")
            else:
                yield from walk(child, prefix)

    yield from walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path)), "")


def measure(package: Path = PACKAGE, root: Path = ROOT) -> dict[str, int]:
    """Every module over MAX_MODULE_LINES and every function over MAX_FUNCTION_LINES, with its size."""
    over: dict[str, int] = {}
    for path in sorted(package.rglob("*.py")):
        lines = len(path.read_text(encoding="utf-8").splitlines())
        if lines > MAX_MODULE_LINES:
            over[path.relative_to(root).as_posix()] = lines
        over.update((name, size) for name, size in function_sizes(path, root) if size > MAX_FUNCTION_LINES)
    return over


def read_allow_list(path: Path = ALLOW_LIST) -> dict[str, int]:
    """``<item> <lines>`` per line; ``#`` starts a comment."""
    allowed: dict[str, int] = {}
    for number, raw in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        item, _, size = line.rpartition(" ")
        assert item and size.isdigit(), f"{path.name}:{number}: expected '<item> <lines>', got {raw!r}"
        assert item.strip() not in allowed, f"{path.name}:{number}: {item.strip()} listed twice"
        allowed[item.strip()] = int(size)
    return allowed


def budget_problems(over: dict[str, int], allowed: dict[str, int]) -> list[str]:
    """What breaks the budget: a new item over it, an allowed item that grew, shrank or is within it."""
    problems = []
    for item, size in sorted(over.items()):
        limit = MAX_MODULE_LINES if "::" not in item else MAX_FUNCTION_LINES
        if item not in allowed:
            problems.append(f"{item}: {size} lines, over the budget of {limit} (split it)")
        elif size > allowed[item]:
            problems.append(f"{item}: grew from {allowed[item]} to {size} lines (the allow-list only shrinks)")
        elif size < allowed[item]:
            problems.append(f"{item}: shrank to {size} lines: lower its number in {ALLOW_LIST.name} to {size}")
    for item in sorted(set(allowed) - set(over)):
        problems.append(f"{item}: within budget now (or gone): delete its line from {ALLOW_LIST.name}")
    return problems


def test_the_package_keeps_its_size_budget() -> None:
    problems = budget_problems(measure(), read_allow_list())
    assert not problems, "size budget:\n" + "\n".join(problems)


def test_the_budget_check_can_fail(tmp_path: Path) -> None:
    """The same functions on a made-up package: a long module, a long method, a nested long function."""
    package = tmp_path / "demo"
    package.mkdir()
    body = "\n".join(f"        x{i} = {i}" for i in range(MAX_FUNCTION_LINES))  # a method's (or inner) body
    (package / "small.py").write_text(f"def fine():\n    return 1\n\n\nclass K:\n    def long(self):\n{body}\n")
    (package / "big.py").write_text("\n".join(f"v{i} = {i}" for i in range(MAX_MODULE_LINES + 1)) + "\n")
    (package / "nested.py").write_text(f"def outer():\n    def inner():\n{body}\n")
    over = measure(package, tmp_path)
    assert over == {
        "demo/big.py": MAX_MODULE_LINES + 1,
        "demo/small.py::K.long": MAX_FUNCTION_LINES + 1,
        "demo/nested.py::outer": MAX_FUNCTION_LINES + 2,
        "demo/nested.py::outer.inner": MAX_FUNCTION_LINES + 1,
    }
    assert budget_problems(over, dict(over)) == []
    grown = budget_problems(over, {**over, "demo/big.py": MAX_MODULE_LINES})
    assert grown == [
        f"demo/big.py: grew from {MAX_MODULE_LINES} to {MAX_MODULE_LINES + 1} lines (the allow-list only shrinks)"
    ]
    new = budget_problems(over, {k: v for k, v in over.items() if k != "demo/small.py::K.long"})
    assert new == [
        f"demo/small.py::K.long: {MAX_FUNCTION_LINES + 1} lines, over the budget of {MAX_FUNCTION_LINES} (split it)"
    ]
    stale = budget_problems(over, {**over, "demo/gone.py::f": 90, "demo/nested.py::outer": MAX_FUNCTION_LINES + 9})
    assert any("gone.py::f: within budget now" in p for p in stale)
    assert any("outer: shrank to" in p for p in stale)
