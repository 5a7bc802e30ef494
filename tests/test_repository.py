"""The repository holds the project alone: nothing `.gitignore` excludes, no big file outside fixtures/.

A committed virtualenv (thousands of files naming one machine's interpreter) is what these guard
against. Outside a git checkout (an sdist, a wheel's tests) there is nothing to check: skip.
"""

from __future__ import annotations

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
