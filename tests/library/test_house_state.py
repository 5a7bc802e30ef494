"""scripts/house-state tells run state from caches: a name whose assignment carries ``# cache:`` is listed and
counted apart (issue 44 item 3); the runbook library keeps no run state."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _house_state(package: Path) -> tuple[list[str], list[str], str]:
    done = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "house-state"), str(package)],
        capture_output=True, text=True, check=True, cwd=package.parent,
    )  # fmt: skip
    state, _, caches = done.stdout.partition("# caches\n")
    return state.split(), caches.split(), done.stderr


def test_a_marked_cache_is_listed_apart_from_run_state(tmp_path: Path) -> None:
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "mod.py").write_text(
        "CHOSEN: dict = {}\n"
        "# cache: keyed by the input text,\n"
        "# which alone decides the answer\n"
        "_SEEN: dict = {}\n"
        "_ALSO: dict = {}  # cache: keyed by the file's version\n\n\n"
        "def choose(value):\n    CHOSEN['x'] = value\n    _SEEN[value] = 1\n    _ALSO.setdefault(value, 1)\n"
    )
    state, caches, counts = _house_state(package)
    assert "CHOSEN" in state and "_SEEN" not in state and "_ALSO" not in state
    assert "_SEEN" in caches and "_ALSO" in caches and "CHOSEN" not in caches
    assert "1 module-level names changed at run time (run state)" in counts
    assert "2 caches" in counts


def test_the_runbook_library_keeps_no_run_state() -> None:
    state, caches, _ = _house_state(ROOT / "nightowl")
    files = [word for word in state if word.endswith(".py")]
    assert not [f for f in files if "/nightowl/library/" in f], state
    assert "_LOADED" in caches  # still there, marked as a cache
