"""Issue 30 item 26: a reader that closes the pipe early (`nightowl bundles | head -1`) is not a bug."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.postmortem.bundles import make_bundle

NIGHTOWL = str(Path(sys.executable).parent / "nightowl")


@pytest.mark.parametrize("args", [["bundles"], ["runbook", "list"], ["runbook", "show", "xid"]])
def test_a_closed_pipe_is_no_traceback(tmp_path: Path, args: list[str]) -> None:
    out = tmp_path / "out"
    for _ in range(3):
        make_bundle(out, ["xid79-fallen-off-bus"])
    # `true` closes the pipe before nightowl has started: its first write is EPIPE, as the write
    # after `head -1` has read its line.
    done = subprocess.run(
        f"NIGHTOWL_OUT={out} {NIGHTOWL} {' '.join(args)} | true; echo ${{PIPESTATUS[0]}} >&2",
        shell=True,
        executable="/bin/bash",
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert "internal error" not in done.stderr and "Traceback" not in done.stderr, done.stderr
    assert done.stderr.strip().splitlines()[-1] in ("0", "141"), done.stderr
