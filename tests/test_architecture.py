"""The shape of the house, checked: no import cycle (between modules or between subpackages), an
engine that knows nothing of GPUs or the CLI, and CLI options declared once in cli/common.py.

Imports are read with ``ast`` from every module, including those inside functions: an import
hidden in a function to break a cycle is still a cycle.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import networkx as nx
import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "nightowl"


def module_files(package: Path = PACKAGE) -> dict[str, Path]:
    """Dotted module name -> file, for every module of the package (``pkg/__init__.py`` is ``pkg``)."""
    modules = {}
    for path in sorted(package.rglob("*.py")):
        parts = list(path.relative_to(package.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        modules[".".join(parts)] = path
    return modules


def imported_names(module: str, path: Path) -> Iterator[str]:
    """Every dotted name an ``import`` or ``from ... import`` anywhere in the module may load.

    ``from a.b import c`` yields ``a.b`` and ``a.b.c`` (``c`` may be a submodule); relative imports
    are resolved against the module's own package.
    """
    is_package = path.name == "__init__.py"
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = module.split(".") if is_package else module.split(".")[:-1]
                base = base[: len(base) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            yield target
            yield from (f"{target}.{alias.name}" for alias in node.names)


def import_graph(modules: dict[str, Path]) -> nx.DiGraph:
    graph = nx.DiGraph()
    graph.add_nodes_from(modules)
    for module, path in modules.items():
        for target in imported_names(module, path):
            if target in modules and target != module:
                graph.add_edge(module, target)
    return graph


def group_graph(graph: nx.DiGraph, package: str) -> nx.DiGraph:
    """The import graph between the direct children of ``package`` (each subpackage is one node).

    The package's own ``__init__`` is left out: a registry that imports its members, which import
    a sibling, is not a cycle between siblings.
    """
    prefix = package + "."
    groups = nx.DiGraph()
    for source, target in graph.edges:
        if source.startswith(prefix) and target.startswith(prefix):
            a, b = source[len(prefix) :].split(".")[0], target[len(prefix) :].split(".")[0]
            if a != b:
                groups.add_edge(a, b, via=f"{source} -> {target}")
    return groups


def describe(cycles: list[list[str]], graph: nx.DiGraph) -> str:
    lines = []
    for cycle in sorted(cycles, key=len)[:20]:
        hops = zip(cycle, cycle[1:] + cycle[:1], strict=True)
        lines.append(" -> ".join(cycle) + "   (" + "; ".join(graph.edges[a, b].get("via", "") for a, b in hops) + ")")
    return "\n".join(lines)


GRAPH = import_graph(module_files())
PACKAGES = sorted(name for name, path in module_files().items() if path.name == "__init__.py")


def test_the_graph_sees_the_package() -> None:
    """A parser that read nothing would find no cycle: check it found the modules and their edges."""
    assert {"nightowl.cli.main", "nightowl.engine.runner", "nightowl.receiver.http"} <= set(GRAPH)
    assert GRAPH.has_edge("nightowl.cli.main", "nightowl.cli.sweep_cmd")
    # imports inside functions count (sweep reads the inventory lazily)
    assert GRAPH.has_edge("nightowl.cli.sweep_cmd", "nightowl.fleet.inventory")


def test_no_import_cycle_between_modules() -> None:
    cycles = list(nx.simple_cycles(GRAPH))
    assert not cycles, "import cycles:\n" + "\n".join(" -> ".join(c) for c in sorted(cycles, key=len)[:20])


@pytest.mark.parametrize("package", PACKAGES)
def test_no_import_cycle_between_subpackages(package: str) -> None:
    groups = group_graph(GRAPH, package)
    cycles = list(nx.simple_cycles(groups))
    assert not cycles, f"cycles between the parts of {package}:\n" + describe(cycles, groups)


def packages(root: Path, *folders: str) -> Path:
    """``root`` and each folder below it made a package (an empty ``__init__.py``) for a made-up tree."""
    for folder in ("", *folders):
        (root / folder).mkdir(parents=True, exist_ok=True)
        (root / folder / "__init__.py").write_text("")
    return root


def test_cycle_checks_can_fail(tmp_path: Path) -> None:
    """The same functions on a made-up package with a hidden (in-function) and a relative-import cycle."""
    pkg = packages(tmp_path / "demo", "a", "b")
    (pkg / "a" / "one.py").write_text("from . import two\n")
    (pkg / "a" / "two.py").write_text("def f():\n    from demo.a import one\n")
    (pkg / "a" / "three.py").write_text("from demo.b.four import x\n")
    (pkg / "b" / "four.py").write_text("def g():\n    from ..a import three\n")
    graph = import_graph(module_files(pkg))
    assert sorted(map(sorted, nx.simple_cycles(graph))) == [
        ["demo.a.one", "demo.a.two"],
        ["demo.a.three", "demo.b.four"],
    ]
    assert sorted(map(sorted, nx.simple_cycles(group_graph(graph, "demo")))) == [["a", "b"]]


# What the engine may import from the rest of nightowl: itself, and the transport interface it drives
# (not a transport: which host and how to reach it is the caller's business), with the head-and-tail
# buffer every transport cuts outputs with (a pure buffer: the parse cap cuts the same way).
ENGINE_MAY_IMPORT = (
    "nightowl.engine",
    "nightowl.transports.base",
    "nightowl.transports.capped",
    "nightowl.knowledge.actions",  # the verdict-action vocabulary, as data (no GPU code)
)


def test_engine_imports_nothing_from_gpu_code_or_the_cli() -> None:
    """STYLE: the engine knows nothing about GPUs; someone can drive a runbook without the CLI."""
    engine = {m: p for m, p in module_files().items() if m == "nightowl.engine" or m.startswith("nightowl.engine.")}
    assert len(engine) > 5
    bad = {
        f"{module} imports {name}"
        for module, path in engine.items()
        for name in imported_names(module, path)
        if (name.startswith("nightowl.") and not name.startswith(ENGINE_MAY_IMPORT))
        or name.split(".")[0] in ("click", "paramiko", "rich")
    }
    assert not bad, sorted(bad)


# Options every command takes from cli/common.py instead of declaring its own.
SHARED_OPTIONS = frozenset(
    {
        "--format",
        "--out",
        "--param",
        "--allow-invasive",
        "--known-hosts",
        "--ssh-config",
        "--accept-new",
        "--identity",
        "--connect-timeout",
        "--command-timeout",
        "--host-timeout",
    }
)


def test_shared_options_are_declared_once_in_cli_common() -> None:
    declared = []
    for module, path in module_files().items():
        if not module.startswith("nightowl.cli.") or module == "nightowl.cli.common":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr == "option"
                and any(isinstance(a, ast.Constant) and a.value in SHARED_OPTIONS for a in node.args)
            ):
                declared.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert not declared, f"declare these in nightowl/cli/common.py and use them from there: {declared}"


def test_every_format_option_is_the_shared_one() -> None:
    """Each command's --format is one from common (same parameter name), whatever its choices."""
    import click

    from nightowl.cli.main import main

    def commands(group: click.Group, prefix: str = "") -> Iterator[tuple[str, click.Command]]:
        for name, command in group.commands.items():
            if isinstance(command, click.Group):
                yield from commands(command, f"{prefix}{name} ")
            else:
                yield prefix + name, command

    seen = 0
    for name, command in commands(main):
        for param in command.params:
            if "--format" in getattr(param, "opts", ()):
                seen += 1
                assert param.name == "fmt", name
                assert isinstance(param.type, click.Choice) and param.default == param.type.choices[0], name
    assert seen >= 10


# The engine's public face and the collector protocol (gpud's components/types.go is the model:
# each type and method says what it is and what it guarantees).
DOCUMENTED = (
    "engine/runner.py",
    "engine/job.py",
    "engine/bundle_writer.py",
    "engine/bundle_summary.py",
    "engine/bundle_verify.py",
    "engine/layout.py",
    "engine/private_files.py",
    "engine/model.py",
    "engine/validate.py",
    "engine/session.py",
    "collectors/base.py",
    "run.py",
)


def undocumented(path: Path, root: Path = ROOT) -> list[str]:
    """Public classes, functions and methods of a module without a docstring, as ``file:line name``."""
    tree = ast.parse(path.read_text())
    missing = []

    def visit(body: list[ast.stmt], prefix: str) -> None:
        for node in body:
            if isinstance(node, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
                if node.name.startswith("_"):
                    continue
                if ast.get_docstring(node) is None:
                    missing.append(f"{path.relative_to(root)}:{node.lineno} {prefix}{node.name}")
                if isinstance(node, ast.ClassDef):
                    visit(node.body, f"{node.name}.")

    visit(tree.body, "")
    return missing


@pytest.mark.parametrize("relative", DOCUMENTED)
def test_engine_and_collector_protocol_are_documented(relative: str) -> None:
    assert not undocumented(PACKAGE / relative)


def test_the_docstring_check_can_fail(tmp_path: Path) -> None:
    module = tmp_path / "m.py"
    module.write_text(
        'class A:\n    """Doc."""\n\n    def run(self):\n        pass\n\n    def _hidden(self):\n        pass\n'
    )
    assert undocumented(module, tmp_path) == ["m.py:4 A.run"]


# The one way to run a runbook and save its bundle (issue 21): every caller goes through nightowl/run.py,
# so no caller can skip a step (the parameter checks an alert used to skip).
RUN_ENTRY = "nightowl.engine.session.run_runbook"
RUN_ENTRY_MAY_BE_CALLED_FROM = ("nightowl.run", "nightowl.engine.session")


def callers_of(name: str, modules: dict[str, Path]) -> list[str]:
    """``module:line`` of every import of ``name`` (``pkg.mod.func``) and every ``mod.func`` or
    ``pkg.mod.func`` attribute, outside the modules allowed to call it."""
    module_name, _, func = name.rpartition(".")
    short = module_name.rpartition(".")[2]
    found = []
    for module, path in modules.items():
        if module in RUN_ENTRY_MAY_BE_CALLED_FROM:
            continue
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            imported = (
                isinstance(node, ast.ImportFrom)
                and node.module == module_name
                and any(alias.name == func for alias in node.names)
            )
            used = (
                isinstance(node, ast.Attribute)
                and node.attr == func
                and ast.unparse(node.value) in (short, module_name)
            )
            if imported or used:
                found.append(f"{module}:{node.lineno}")
    return found


def test_only_nightowl_run_calls_the_engine_session_entry() -> None:
    assert not callers_of(RUN_ENTRY, module_files()), "run runbooks through nightowl.run.run_and_save"


def test_the_session_entry_check_can_fail(tmp_path: Path) -> None:
    pkg = packages(tmp_path / "nightowl", "cli")
    (pkg / "cli" / "a.py").write_text("def f():\n    from nightowl.engine.session import plan, run_runbook\n")
    (pkg / "cli" / "b.py").write_text("import nightowl.engine.session\nnightowl.engine.session.run_runbook()\n")
    (pkg / "cli" / "c.py").write_text("from nightowl.engine import session\nsession.run_runbook()\n")
    (pkg / "cli" / "d.py").write_text("from nightowl.engine.session import plan\n")
    (pkg / "run.py").write_text("from nightowl.engine.session import run_runbook\n")
    found = callers_of(RUN_ENTRY, module_files(pkg))
    assert found == ["nightowl.cli.a:2", "nightowl.cli.b:2", "nightowl.cli.c:2"]


# Use cases are library functions (issue 44): a command module parses options, calls, renders and exits; what
# two commands share lives in a module that is no command (cli/common.py, cli/sweep_report.py, cli/node_actions.py),
# and the libraries below the CLI never reach back up into it.
LIBRARIES_BELOW_THE_CLI = ("nightowl.fleet", "nightowl.watch", "nightowl.receiver", "nightowl.mcp")


def _is_command(module: str) -> bool:
    return module.startswith("nightowl.cli.") and module.endswith("_cmd")


def use_case_climbs(modules: dict[str, Path]) -> list[str]:
    """``a -> b`` for each command module importing another command module, and each module of a library
    below the CLI importing the CLI (imports inside functions count)."""
    found = set()
    for module, path in modules.items():
        below = any(module == lib or module.startswith(lib + ".") for lib in LIBRARIES_BELOW_THE_CLI)
        for name in imported_names(module, path):
            if name not in modules or name == module:
                continue
            if (_is_command(module) and _is_command(name)) or (
                below and (name == "nightowl.cli" or name.startswith("nightowl.cli."))
            ):
                found.add(f"{module} -> {name}")
    return sorted(found)


def test_no_command_module_imports_another_and_no_library_imports_the_cli() -> None:
    climbs = use_case_climbs(module_files())
    assert not climbs, "move what both need out of the command (or out of the CLI):\n" + "\n".join(climbs)


def test_the_use_case_check_can_fail(tmp_path: Path) -> None:
    pkg = packages(tmp_path / "nightowl", "cli", "fleet", "watch")
    (pkg / "cli" / "a_cmd.py").write_text("def f():\n    from nightowl.cli.b_cmd import X\n")
    (pkg / "cli" / "b_cmd.py").write_text("from nightowl.cli import common\nX = 1\n")
    (pkg / "cli" / "common.py").write_text("")
    (pkg / "fleet" / "sweep.py").write_text("from nightowl.cli.common import fail\n")
    (pkg / "watch" / "daemon.py").write_text("from ..cli import b_cmd\n")
    assert use_case_climbs(module_files(pkg)) == [
        "nightowl.cli.a_cmd -> nightowl.cli.b_cmd",
        "nightowl.fleet.sweep -> nightowl.cli.common",
        "nightowl.watch.daemon -> nightowl.cli",
        "nightowl.watch.daemon -> nightowl.cli.b_cmd",
    ]
