"""`nightowl check` runs from a cron job or a DaemonSet on every node: what its path does not use stays
unimported (networkx: validation walks the graph itself; urllib.request, http.client, ssl: only
--history-from asks Prometheus; paramiko: no SSH)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

NOT_ON_THE_CHECK_PATH = ("networkx", "urllib.request", "http.client", "ssl", "paramiko", "rich")


def test_check_imports_nothing_it_does_not_use(tmp_path: Path) -> None:
    empty = tmp_path / "bin"
    empty.mkdir()  # no command found: every collector fails at once, the whole path still runs
    code = (
        "import sys\n"
        "from nightowl.cli.main import main\n"
        f"args = ['check', '--format', 'json', '--out', {str(tmp_path)!r}, '--history', {str(tmp_path / 'h.db')!r}]\n"
        "try:\n    main(args)\nexcept SystemExit:\n    pass\n"
        f"print([m for m in {NOT_ON_THE_CHECK_PATH!r} if m in sys.modules])\n"
    )
    env = {**os.environ, "PATH": str(empty), "NODE_NAME": "node-1"}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert '"node-1"' in done.stdout  # the check ran and reported this node
    assert done.stdout.strip().splitlines()[-1] == "[]"
