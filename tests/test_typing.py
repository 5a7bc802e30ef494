"""The package stays mypy-clean (STYLE: type hints everywhere, py.typed)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def test_package_is_mypy_clean() -> None:
    if shutil.which("mypy", path=str(Path(sys.executable).parent)) is None:
        pytest.skip("mypy is not installed in this environment (pip install -e '.[test]')")
    run = subprocess.run(
        [sys.executable, "-m", "mypy", "nightowl"], cwd=ROOT, capture_output=True, text=True, timeout=300
    )
    assert run.returncode == 0, run.stdout[-3000:]
