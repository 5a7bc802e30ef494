"""A `nightowl check` whose runbook is in the cache (nightowl/library/runbook_cache.py) imports no pydantic:
the runbook comes back as plain data (engine/runbook_data.py), its expressions as compiled code."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path


def _check(tmp_path: Path, env: dict[str, str]) -> list[str]:
    code = (
        "import sys\n"
        "from nightowl.cli.main import main\n"
        f"args = ['check', '--format', 'json', '--out', {str(tmp_path / 'out')!r}, "
        f"'--history', {str(tmp_path / 'h.db')!r}]\n"
        "try:\n    main(args)\nexcept SystemExit:\n    pass\n"
        "print(sorted({m.split('.')[0] for m in sys.modules} & {'pydantic', 'pydantic_core'}))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert '"node-1"' in done.stdout, done.stderr[-2000:]  # the check ran and reported this node
    return done.stdout.strip().splitlines()[-1]


def test_a_check_from_the_cache_imports_no_pydantic(tmp_path: Path) -> None:
    empty = tmp_path / "bin"
    empty.mkdir()  # no command found: every collector fails at once, the whole path still runs
    env = {**os.environ, "PATH": str(empty), "NODE_NAME": "node-1", "NIGHTOWL_CACHE_DIR": str(tmp_path / "cache")}
    env.pop("NIGHTOWL_CACHE", None)
    assert _check(tmp_path, env) == "['pydantic', 'pydantic_core']"  # validated: the schema pass needs it
    assert _check(tmp_path, env) == "[]"
    assert _check(tmp_path, {**env, "NIGHTOWL_CACHE": "off"}) == "['pydantic', 'pydantic_core']"
