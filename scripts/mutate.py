#!/usr/bin/env python3
"""A small AST mutator: how many one-change mutants of a module do the given tests kill?

Usage (from the project root):
    scripts/mutate nightowl/redact.py tests/test_redact.py tests/test_redact_property.py

Each mutant changes one thing (a comparison or boolean operator, an integer constant by +-1, True/False,
a string emptied, a returned value replaced by None, a condition negated or a `not` dropped, a statement
replaced by `pass`). The tests run on each mutant with `pytest -x -q -p no:cacheprovider` under a timeout
(a timeout counts as killed). Mutants run in a temporary copy of the tree, so the working tree is never
changed, even on Ctrl-C. Mutants listed in tests/mutation/equivalent.txt (ones no test could tell apart
from the original) are left out of the score and listed apart. Dependency-free; runs one process at a time.
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import copy
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
EQUIVALENT = ROOT / "tests" / "mutation" / "equivalent.txt"

COMPARE_SWAPS: dict[type[ast.cmpop], type[ast.cmpop]] = {
    ast.Eq: ast.NotEq,
    ast.NotEq: ast.Eq,
    ast.Lt: ast.LtE,
    ast.LtE: ast.Lt,
    ast.Gt: ast.GtE,
    ast.GtE: ast.Gt,
    ast.In: ast.NotIn,
    ast.NotIn: ast.In,
    ast.Is: ast.IsNot,
    ast.IsNot: ast.Is,
}
SYMBOL = {
    ast.Eq: "==", ast.NotEq: "!=", ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">=",
    ast.In: "in", ast.NotIn: "not in", ast.Is: "is", ast.IsNot: "is not", ast.And: "and", ast.Or: "or",
}  # fmt: skip
# Statements whose removal (replaced by `pass`) is a mutant; plain `name = ...` is left alone because
# removing it nearly always raises NameError, which costs a run and teaches nothing.
REMOVABLE = (ast.Expr, ast.Raise, ast.Continue, ast.Break, ast.AugAssign, ast.Assign, ast.Delete)


@dataclass(frozen=True)
class Mutant:
    index: int
    line: int
    change: str


@dataclass
class Outcome:
    mutant: Mutant
    status: str  # killed, survived, timeout
    seconds: float


def _snippet(source: str, node: ast.AST, width: int = 50) -> str:
    text = " ".join((ast.get_source_segment(source, node) or "").split())
    return text if len(text) <= width else text[: width - 3] + "..."


def _skipped_ids(tree: ast.Module) -> set[int]:
    """Nodes never mutated: docstrings, annotations, `__all__`, TYPE_CHECKING blocks, `__future__`."""
    skip: set[int] = set()

    def mark(node: ast.AST | None) -> None:
        if node is not None:
            skip.update(id(n) for n in ast.walk(node))

    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if isinstance(body, list) and body and isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef,
                                                                 ast.AsyncFunctionDef)):  # fmt: skip
            first = body[0]
            if (
                isinstance(first, ast.Expr)
                and isinstance(first.value, ast.Constant)
                and isinstance(first.value.value, str)
            ):
                mark(first)
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            mark(node.returns)
            for arg in [*node.args.args, *node.args.posonlyargs, *node.args.kwonlyargs,
                        node.args.vararg, node.args.kwarg]:  # fmt: skip
                if arg is not None:
                    mark(arg.annotation)
        elif isinstance(node, ast.AnnAssign):
            mark(node.annotation)
        elif (
            isinstance(node, ast.ImportFrom)
            or (isinstance(node, ast.If) and "TYPE_CHECKING" in ast.dump(node.test))
            or (
                isinstance(node, ast.Assign)
                and any(isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets)
            )  # fmt: skip
        ):
            mark(node)
        elif isinstance(node, ast.JoinedStr):
            # The literal parts of an f-string are Constant nodes that cannot be emptied on their own.
            skip.update(id(v) for v in node.values if isinstance(v, ast.Constant))
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in (
            "TypeVar", "cast", "NewType",
        ):  # fmt: skip
            mark(node)
    return skip


def _sites(tree: ast.Module, source: str) -> Iterator[tuple[ast.AST, str, object]]:
    """Every mutation point in a fixed order: (node, description, how to apply it)."""
    skip = _skipped_ids(tree)
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        if isinstance(node, ast.Compare):
            for i, op in enumerate(node.ops):
                new = COMPARE_SWAPS.get(type(op))
                if new is not None:
                    yield node, f"`{SYMBOL[type(op)]}` -> `{SYMBOL[new]}` in `{_snippet(source, node)}`", ("cmp", i)
        elif isinstance(node, ast.BoolOp):
            other = ast.Or if isinstance(node.op, ast.And) else ast.And
            yield node, f"`{SYMBOL[type(node.op)]}` -> `{SYMBOL[other]}` in `{_snippet(source, node)}`", ("bool",)
        elif isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
            yield node, f"`not` dropped in `{_snippet(source, node)}`", ("dropnot",)
        elif isinstance(node, ast.Constant):
            value = node.value
            if isinstance(value, bool):
                yield node, f"`{value}` -> `{not value}`", ("const", not value)
            elif isinstance(value, int):
                yield node, f"`{value}` -> `{value + 1}`", ("const", value + 1)
                yield node, f"`{value}` -> `{value - 1}`", ("const", value - 1)
            elif isinstance(value, str) and value:
                yield node, f"string `{_snippet(source, node, 40)}` -> `''`", ("const", "")
        if isinstance(node, (ast.If, ast.While, ast.IfExp)) and id(node.test) not in skip:
            yield node, f"condition negated: `{_snippet(source, node.test)}`", ("negate",)
        if (
            isinstance(node, ast.Return)
            and node.value is not None
            and not (isinstance(node.value, ast.Constant) and node.value.value is None)
        ):
            yield node, f"`return {_snippet(source, node.value, 40)}` -> `return None`", ("retnone",)
        if isinstance(node, REMOVABLE) and not (
            isinstance(node, ast.Assign) and all(isinstance(t, ast.Name) for t in node.targets)
        ):
            yield node, f"statement removed: `{_snippet(source, node)}`", ("remove",)


def _apply(node: ast.AST, how: tuple) -> ast.AST:
    kind = how[0]
    if kind == "cmp":
        assert isinstance(node, ast.Compare)
        node.ops[how[1]] = COMPARE_SWAPS[type(node.ops[how[1]])]()
    elif kind == "bool":
        assert isinstance(node, ast.BoolOp)
        node.op = ast.Or() if isinstance(node.op, ast.And) else ast.And()
    elif kind == "dropnot":
        assert isinstance(node, ast.UnaryOp)
        return node.operand
    elif kind == "const":
        assert isinstance(node, ast.Constant)
        node.value = how[1]
    elif kind == "negate":
        assert isinstance(node, (ast.If, ast.While, ast.IfExp))
        node.test = ast.UnaryOp(op=ast.Not(), operand=node.test)
    elif kind == "retnone":
        assert isinstance(node, ast.Return)
        node.value = ast.Constant(value=None)
    elif kind == "remove":
        return ast.Pass()
    return node


class _Replace(ast.NodeTransformer):
    def __init__(self, target: ast.AST, how: tuple) -> None:
        self.target, self.how = target, how

    def visit(self, node: ast.AST) -> ast.AST:
        if node is self.target:
            return _apply(node, self.how)
        return super().visit(node)


def mutants(source: str) -> list[Mutant]:
    """Every mutant; the same change twice on one line (two `1`s) is told apart by `(2nd)`, `(3rd)` ..."""
    tree = ast.parse(source)
    found: list[Mutant] = []
    seen: dict[tuple[int, str], int] = {}
    for i, (node, change, _how) in enumerate(_sites(tree, source)):
        line = getattr(node, "lineno", 0)
        count = seen[(line, change)] = seen.get((line, change), 0) + 1
        suffix = {2: "2nd", 3: "3rd"}.get(count, f"{count}th")
        found.append(Mutant(i, line, change if count == 1 else f"{change} ({suffix})"))
    return found


def mutated_source(source: str, index: int) -> str:
    tree = ast.parse(source)
    for i, (node, _change, how) in enumerate(_sites(tree, source)):
        if i == index:
            tree = _Replace(node, how).visit(copy.copy(tree))
            return ast.unparse(ast.fix_missing_locations(tree))
    raise IndexError(index)


def equivalent(module: str, path: Path = EQUIVALENT) -> dict[tuple[int, str], str]:
    """`module | line | change | why` rows for this module (comment lines start with #)."""
    found: dict[tuple[int, str], str] = {}
    if not path.exists():
        return found
    for raw in path.read_text(encoding="utf-8").splitlines():
        if not raw.strip() or raw.lstrip().startswith("#"):
            continue
        parts = [p.strip() for p in raw.split(" | ")]
        if len(parts) == 4 and parts[0] == module:
            found[(int(parts[1]), parts[2])] = parts[3]
    return found


def _copy_tree(dest: Path) -> None:
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT, capture_output=True, check=True,
    ).stdout.decode()  # fmt: skip
    for name in filter(None, listed.split("\0")):
        src = ROOT / name
        if src.is_file():
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / name)


WARM = (
    "pytest",
    "hypothesis",
    "yaml",
    "click",
    "pydantic",
    "jinja2",
    "networkx",
    "paramiko",
    "rich",
    "defusedxml",
    "psutil",
    "platformdirs",
    "prometheus_client",
    "jsonschema",
    "sqlite3",
    "asyncio",
)


def _module_name(tree: Path, path: Path) -> str:
    rel = path.relative_to(tree).with_suffix("")
    parts = rel.parts[:-1] if rel.name == "__init__" else rel.parts
    return ".".join(parts)


def _dependents(tree: Path, target: str) -> set[str]:
    """The project's modules that import `target`, directly or through others (any import statement,
    also one inside a function), found by reading their source. Those are imported afresh for each mutant."""
    imports: dict[str, set[str]] = {}
    for folder in ("nightowl", "tests"):
        for path in (tree / folder).rglob("*.py"):
            name = _module_name(tree, path)
            package = name if path.name == "__init__.py" else name.rpartition(".")[0]
            found: set[str] = set()
            try:
                parsed = ast.parse(path.read_text(encoding="utf-8"))
            except (SyntaxError, UnicodeDecodeError):
                continue
            for node in ast.walk(parsed):
                if isinstance(node, ast.Import):
                    found.update(alias.name for alias in node.names)
                elif isinstance(node, ast.ImportFrom):
                    base = node.module or ""
                    if node.level:
                        anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                        base = ".".join([*anchor, *([base] if base else [])])
                    found.add(base)
                    found.update(f"{base}.{alias.name}" for alias in node.names)
            imports[name] = found
    hit = {target}
    changed = True
    while changed:
        changed = False
        # A package imported afresh is a new module object without its submodules as attributes unless they
        # are imported afresh too (``pkg.catalog`` would be missing), so a hit package takes its submodules.
        packages = tuple(f"{name}." for name in hit if (tree / name.replace(".", "/") / "__init__.py").exists())
        for name, found in imports.items():
            if name not in hit and (found & hit or name.startswith(packages)):
                hit.add(name)
                changed = True
    return hit


def _warm(tree: Path, tests: list[str]) -> None:
    """Import the libraries and the tests once in this process; each mutant's run forks from it and
    imports afresh only the mutated module, what depends on it, and the tests."""
    import importlib
    from importlib.metadata import entry_points

    plugins = [point.module for point in entry_points(group="pytest11")]
    for name in [*WARM, *plugins]:
        with contextlib.suppress(Exception):
            importlib.import_module(name)
    sys.path.insert(0, str(tree))
    for test in tests:
        path = tree / test.split("::")[0]
        if path.suffix == ".py" and path.exists():
            # A test that cannot be imported here is imported (and fails) in the run itself.
            with contextlib.suppress(Exception):
                importlib.import_module(_module_name(tree, path))
    sys.path.remove(str(tree))


def _evict(names: set[str]) -> None:
    """Forget the modules to import afresh, also as attributes of their parent package: ``from pkg import sub``
    reads ``pkg.sub`` before sys.modules, so a parent left holding the old ``sub`` would hand a test the old
    module beside a fresh one (``xid_catalog`` old, ``xid_catalog.rules`` new)."""
    for name in list(sys.modules):
        if name in names or name == "tests" or name.startswith("tests."):
            module = sys.modules.pop(name)
            parent, _, child = name.rpartition(".")
            holder = sys.modules.get(parent)
            if holder is not None and getattr(holder, child, None) is module:
                with contextlib.suppress(AttributeError):
                    delattr(holder, child)


def _patch(target: str, path: Path) -> None:
    """Run the mutated source in the already imported module and point every other project module's
    same-named reference (`from target import f`) at the new object. Classes keep their identity (objects
    made at import time stay instances of them); their new methods are copied onto the old class."""
    module = sys.modules[target]
    old = dict(module.__dict__)
    # Start from an empty namespace, as an import does: a removed assignment must leave its name unbound.
    for name in [n for n in module.__dict__ if not (n.startswith("__") and n.endswith("__"))]:
        del module.__dict__[name]
    exec(compile(path.read_text(encoding="utf-8"), str(path), "exec"), module.__dict__)  # noqa: S102
    swapped: dict[str, tuple[object, object]] = {}
    for name, new in list(module.__dict__.items()):
        before = old.get(name)
        if before is new or name not in old:
            continue
        if isinstance(before, type) and isinstance(new, type):
            for key, value in vars(new).items():
                if key not in ("__dict__", "__weakref__"):
                    with contextlib.suppress(AttributeError, TypeError):
                        setattr(before, key, value)
            module.__dict__[name] = before
        else:
            swapped[name] = (before, new)
    for other in list(sys.modules.values()):
        space = getattr(other, "__dict__", None)
        if other is module or not isinstance(space, dict):
            continue
        if not str(getattr(other, "__name__", "")).startswith("nightowl"):
            continue
        for name, (before, new) in swapped.items():
            if name in space and space[name] is before:
                space[name] = new


def _child(tree: Path, tests: list[str], fresh: set[str], patch: tuple[str, Path] | None) -> None:
    os.setsid()
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    _evict(fresh)
    devnull = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(devnull, fd)
    os.chdir(tree)
    sys.path.insert(0, str(tree))
    os.environ["PYTHONPATH"] = str(tree)
    rc = 70
    try:
        if patch is not None:
            _patch(*patch)
        import pytest

        rc = int(pytest.main(["-x", "-q", "-p", "no:cacheprovider", "-m", "not integration", "-o", "addopts=",
                              *tests]))  # fmt: skip
    finally:
        os._exit(rc)


def _run_tests(
    tree: Path, tests: list[str], timeout: float, fresh: set[str], patch: tuple[str, Path] | None = None
) -> tuple[str, float]:
    started = time.monotonic()
    sys.stdout.flush()
    pid = os.fork()
    if pid == 0:
        _child(tree, tests, fresh, patch)
    try:
        while True:
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                rc = os.waitstatus_to_exitcode(status)
                return ("survived" if rc == 0 else "killed"), time.monotonic() - started
            if time.monotonic() - started > timeout:
                os.killpg(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
                return "timeout", time.monotonic() - started
            time.sleep(0.02)
    except BaseException:
        os.killpg(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        raise


def _write(target: Path, text: str) -> None:
    """Compiled files are kept (the tests' rewritten ones save seconds a run) except the mutated
    module's: a mutant of the same size written within the same second would look up to date."""
    target.write_text(text, encoding="utf-8")
    for stale in (target.parent / "__pycache__").glob(f"{target.stem}.*.pyc"):
        stale.unlink()


def _measure(
    module: str,
    source: str,
    chosen: list[Mutant],
    tree: Path,
    tests: list[str],
    timeout: float,
    fresh: set[str],
    patch: tuple[str, Path] | None,
    confirm: bool = False,
) -> list[Outcome]:
    """Run each mutant. The in-place run can only err towards "survived" (a reference to the module
    it could not re-point still holds the original); with ``confirm`` a survivor is run again with its
    dependents imported afresh, so no survivor is false."""
    target = tree / module
    outcomes: list[Outcome] = []
    try:
        for done, m in enumerate(chosen):
            if done and done % 10 == 0:
                print(f"  {done}/{len(chosen)} run", flush=True)
            _write(target, mutated_source(source, m.index))
            state, seconds = _run_tests(tree, tests, timeout, set() if patch else fresh, patch)
            if state == "survived" and patch is not None and confirm:
                _write(target, mutated_source(source, m.index))
                state, again = _run_tests(tree, tests, timeout, fresh)
                seconds += again
            outcomes.append(Outcome(m, state, seconds))
            if state == "survived":
                print(f"  survived {module}:{m.line}: {m.change}", flush=True)
    except KeyboardInterrupt:
        print("interrupted: figures so far", file=sys.stderr)
    finally:
        _write(target, source)
    return outcomes


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("module", help="the module to mutate, e.g. nightowl/redact.py")
    parser.add_argument("tests", nargs="*", help="test files (or node ids) that exercise it")
    parser.add_argument("--list", action="store_true", help="list the mutants, run nothing")
    parser.add_argument("--lines", help="only mutants on these lines, e.g. 40-80")
    parser.add_argument("--sample", type=int, help="run only this many mutants, spread evenly over the module")
    parser.add_argument("--timeout", type=float, help="seconds per mutant (default 3x the clean run + 5)")
    parser.add_argument(
        "--no-warm",
        dest="warm",
        action="store_false",
        help="import everything afresh for each mutant (slower; to cross-check)",
    )
    parser.add_argument(
        "--confirm", action="store_true", help="run each survivor again with what imports the module imported afresh"
    )
    parser.add_argument("--json", type=Path, help="write every outcome to this file")
    parser.add_argument(
        "--rerun",
        type=Path,
        help="an earlier --json file: run again only the mutants that survived it (added tests cannot "
        "revive a killed mutant) and report the figures of the whole earlier set",
    )
    args = parser.parse_args(argv)
    # Stopped by SIGTERM (or SIGINT where a background start ignores it): report the figures so far and
    # remove the temporary tree, as on Ctrl-C.
    signal.signal(signal.SIGTERM, _interrupt)
    signal.signal(signal.SIGINT, _interrupt)

    module = Path(args.module).as_posix()
    source = (ROOT / module).read_text(encoding="utf-8")
    skipped = equivalent(module)
    every = mutants(source)
    if args.lines:
        low, _, high = args.lines.partition("-")
        every = [m for m in every if int(low) <= m.line <= int(high or low)]
    chosen = [m for m in every if (m.line, m.change) not in skipped]
    if args.sample and args.sample < len(chosen):
        step = len(chosen) / args.sample
        chosen = [chosen[int(i * step)] for i in range(args.sample)]
    earlier: list[Outcome] = []
    if args.rerun:
        rows = json.loads(args.rerun.read_text(encoding="utf-8"))["outcomes"]
        by_key = {(m.line, m.change): m for m in every}
        again = {(r["line"], r["change"]) for r in rows if r["status"] == "survived"}
        earlier = [
            Outcome(by_key.get((r["line"], r["change"]), Mutant(-1, r["line"], r["change"])), r["status"], r["seconds"])
            for r in rows
            if r["status"] != "survived" and (r["line"], r["change"]) not in skipped
        ]
        chosen = [m for m in every if (m.line, m.change) in again and (m.line, m.change) not in skipped]
    excluded = [m for m in every if (m.line, m.change) in skipped]
    if args.list:
        for m in every:
            mark = "  (equivalent)" if m in excluded else ""
            print(f"{module}:{m.line}: {m.change}{mark}")
        print(f"{len(every)} mutants, {len(excluded)} marked equivalent")
        return 0
    if not args.tests:
        parser.error("name the test files that exercise the module")

    with tempfile.TemporaryDirectory(prefix="nightowl-mutate-") as tmp:
        tree = Path(tmp)
        _copy_tree(tree)
        target = tree / module
        name = _module_name(tree, target)
        fresh = _dependents(tree, name)
        patch = (name, target) if args.warm else None
        if args.warm:
            _warm(tree, [module, *args.tests])
        status, clean = _run_tests(tree, args.tests, 600, fresh)
        if status != "survived":
            print(f"the tests do not pass on the unchanged tree ({status}); nothing measured", file=sys.stderr)
            return 2
        if patch is not None and _run_tests(tree, args.tests, 600, set(), patch)[0] != "survived":
            print("the tests fail when the module is re-run in place; importing afresh for each mutant")
            patch = None
        timeout = args.timeout or 3 * clean + 5
        print(f"{module}: {len(chosen)} mutants ({len(excluded)} equivalent left out), "
              f"clean run {clean:.1f}s, timeout {timeout:.0f}s", flush=True)  # fmt: skip
        outcomes = earlier + _measure(module, source, chosen, tree, args.tests, timeout, fresh, patch, args.confirm)

    killed = sum(o.status == "killed" for o in outcomes)
    timed_out = sum(o.status == "timeout" for o in outcomes)
    survived = sum(o.status == "survived" for o in outcomes)
    ran = len(outcomes)
    share = 100.0 * (killed + timed_out) / ran if ran else 100.0
    print(f"{module}: {ran} mutants, killed {killed}, timeout {timed_out}, survived {survived}, "
          f"equivalent {len(excluded)}: {share:.0f}% killed")  # fmt: skip
    if args.json:
        rows = [dict(asdict(o.mutant), status=o.status, seconds=round(o.seconds, 2)) for o in outcomes]
        args.json.write_text(json.dumps({"module": module, "share": round(share, 1), "outcomes": rows}, indent=1))
    return 0 if survived == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
