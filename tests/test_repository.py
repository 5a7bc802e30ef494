"""The repository holds the project alone: nothing `.gitignore` excludes, no big file outside fixtures/.

A committed virtualenv (thousands of files naming one machine's interpreter) is what these guard
against. Outside a git checkout (an sdist, a wheel's tests) there is nothing to check: skip.
"""

from __future__ import annotations

import ast
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
MAX_BYTES = 1 << 20  # 1 MiB; recorded outputs in fixtures/ may be larger, code and docs may not
BIG_FILES_ALLOWED_UNDER = ("fixtures/",)


def git(*args: str) -> list[str]:
    """Lines of a git command run at the repository root; skips the test outside a git checkout."""
    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    inside = subprocess.run(
        ["git", "-C", str(ROOT), "rev-parse", "--show-toplevel"], capture_output=True, text=True, check=False
    )
    if inside.returncode != 0 or Path(inside.stdout.strip()).resolve() != ROOT:
        pytest.skip("not a git checkout of nightowl")
    out = subprocess.run(["git", "-C", str(ROOT), *args], capture_output=True, text=True, check=True)
    return [line for line in out.stdout.split("\0" if "-z" in args else "\n") if line]


def test_no_tracked_file_is_one_gitignore_excludes() -> None:
    ignored = git("ls-files", "-z", "--cached", "--ignored", "--exclude-standard")
    assert not ignored, f"tracked but ignored (git rm --cached them): {ignored[:20]}"


def test_no_big_file_outside_fixtures() -> None:
    tracked = git("ls-files", "-z")
    assert "pyproject.toml" in tracked
    big = [
        f"{name} ({(ROOT / name).stat().st_size} bytes)"
        for name in tracked
        if not name.startswith(BIG_FILES_ALLOWED_UNDER)
        and (ROOT / name).is_file()
        and (ROOT / name).stat().st_size > MAX_BYTES
    ]
    assert not big, f"over {MAX_BYTES} bytes outside fixtures/: {big}"


def test_the_checks_see_an_ignored_file(tmp_path: Path) -> None:
    """The same git query on a scratch repository with a committed virtualenv finds it."""
    if shutil.which("git") is None:
        pytest.skip("git is not installed")

    def run(*args: str) -> str:
        return subprocess.run(["git", "-C", str(tmp_path), *args], capture_output=True, text=True, check=True).stdout

    run("init", "-q")
    (tmp_path / ".venv").mkdir()
    (tmp_path / ".venv" / "pyvenv.cfg").write_text("home = /usr/bin\n")
    run("add", ".venv/pyvenv.cfg")
    (tmp_path / ".gitignore").write_text(".venv/\n")
    assert run("ls-files", "--cached", "--ignored", "--exclude-standard").split() == [".venv/pyvenv.cfg"]


TOP_LEVEL = {
    ".ci",
    ".dockerignore",
    ".gitignore",
    "Dockerfile",
    "LICENSE",
    "README.md",
    "bench",
    "deploy",
    "docs",
    "fixtures",
    "integrations",
    "nightowl",
    "pyproject.toml",
    "runbooks",
    "scripts",
    "templates",
    "tests",
}  # what a checkout holds at its root; a profile, a scratch JSON or an empty `kh` left by a session is not


def test_nothing_stray_at_the_root() -> None:
    tracked = {name.split("/", 1)[0] for name in git("ls-files", "-z")}
    stray = sorted(tracked - TOP_LEVEL)
    assert not stray, f"tracked at the repository root but not part of the project: {stray}"


# --- tests mirror the code (STYLE.md) ----------------------------------------------------------------------------

COLLECTOR_TESTS = ROOT / "tests" / "collectors"
PACKAGE = ROOT / "nightowl" / "collectors"
COLLECTOR_DOMAINS = {path.name for path in PACKAGE.iterdir() if (path / "__init__.py").is_file()}
PLUMBING = {"", "base"}  # the registry's get_collector and base's to_jsonable serve every domain's tests alike


def _domain_of(module: str) -> str | None:
    """`gpu` for nightowl.collectors.gpu.*, `package` for the package's own modules (readonly, escapes, ...)."""
    if module != "nightowl.collectors" and not module.startswith("nightowl.collectors."):
        return None
    first = module.removeprefix("nightowl.collectors").lstrip(".").split(".")[0]
    if first in PLUMBING:
        return None
    return first if first in COLLECTOR_DOMAINS else "package"


def collector_domains(source: str) -> set[str]:
    """The collector domains a test module reads: its imports from nightowl.collectors and the kinds it names (a
    string that is a registered kind, as in get_collector("nvidia-smi")); walking the registry (MODULES) counts as
    testing the package."""
    from nightowl.collectors import MODULES

    domains: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            domains.update(d for alias in node.names if (d := _domain_of(alias.name)))
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            domains.update(d for d in [_domain_of(node.module)] if d)
            if node.module == "nightowl.collectors":
                names = {alias.name for alias in node.names}
                modules = {name for name in names if name in COLLECTOR_DOMAINS or (PACKAGE / f"{name}.py").is_file()}
                domains.update(d for name in modules if (d := _domain_of(f"nightowl.collectors.{name}")))
                if "MODULES" in names:
                    domains.add("package")
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in MODULES:
            domains.update(d for d in [_domain_of(MODULES[node.value].partition(":")[0])] if d)
    return domains


def test_a_collector_test_reading_one_domain_lives_in_that_domains_folder() -> None:
    """A test at the top of tests/collectors/ whose collectors all lie in one domain (gpu, nccl, ...) belongs in
    tests/collectors/<domain>/; the top keeps tests of the package as a whole or of several domains."""
    misplaced = {
        path.name: domains.pop()
        for path in sorted(COLLECTOR_TESTS.glob("test_*.py"))
        if len(domains := collector_domains(path.read_text(encoding="utf-8"))) == 1 and "package" not in domains
    }
    assert not misplaced, f"move each into tests/collectors/<domain>/: {misplaced}"


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("from nightowl.collectors.gpu import nvlink\nfrom nightowl.collectors import get_collector", {"gpu"}),
        ("from nightowl.collectors import get_collector\nNVSMI = get_collector('nvidia-smi')", {"gpu"}),
        ("import nightowl.collectors.nccl.nccl_log\nx = get_collector('metrics')", {"nccl", "serving"}),
        ("from nightowl.collectors import MODULES\nfrom nightowl.collectors.gpu import kernel_log", {"gpu", "package"}),
        ("from nightowl.collectors import base, escapes", {"package"}),
        ("from nightowl.collectors.base import to_jsonable\nfrom nightowl.llmperf import p99", set()),
    ],
)
def test_the_domains_a_test_reads(source: str, expected: set[str]) -> None:
    assert collector_domains(source) == expected
