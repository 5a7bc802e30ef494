"""The README's jq recipe for a sweep (issue 45 item 9) picks the hosts a person must look at: those whose
verdict needs action and those that got none, never a healthy one. Run with the real jq on a real run's JSON."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner

from nightowl.cli.main import main as cli
from tests.postmortem.bundles import HOSTS

README = Path(__file__).resolve().parents[2] / "README.md"


def recipe() -> str:
    line = next(x for x in README.read_text().splitlines() if "sweep" in x and "--format json | jq '" in x)
    found = re.search(r"\| jq '([^']+)'", line)
    assert found, line
    return found.group(1)


@pytest.mark.skipif(shutil.which("jq") is None, reason="jq is not installed")
def test_the_jq_recipe_selects_hosts_that_need_action_and_hosts_without_a_verdict(tmp_path: Path) -> None:
    gone = tmp_path / "gpu-gone"
    gone.mkdir()
    (gone / "unreachable").write_text("ssh: connect to host gpu-gone port 22: Connection refused\n")
    healthy, acting = HOSTS / "fabric-in-progress-580", HOSTS / "xid79-sxid20034"
    args = ["triage", "xid", "--out", str(tmp_path / "out"), "--format", "json"]
    for host in (healthy, acting, gone):
        args += ["--replay", str(host)]
    result = CliRunner().invoke(cli, args)
    run = json.loads(result.output)
    statuses = {h["host"]: (h["status"], (h["verdict"] or {}).get("action")) for h in run["hosts"]}
    assert statuses == {
        healthy.name: ("ok", "none"),
        acting.name: ("ok", "reboot-node"),
        gone.name: ("unreachable", None),
    }
    picked = subprocess.run(["jq", "-c", recipe()], input=result.output, capture_output=True, text=True, check=True)
    assert [json.loads(x)["host"] for x in picked.stdout.splitlines()] == [acting.name, gone.name]
