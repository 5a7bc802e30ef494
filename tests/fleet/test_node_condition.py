"""The node condition through node-problem-detector's custom-plugin contract, checked offline.

NPD's contract (pkg/custompluginmonitor): exit 0 OK, 1 NonOK, anything else Unknown; stdout is
whitespace-trimmed and cut at max_output_length bytes (default 80); a rule's timeout may not exceed
the global one, and a permanent rule's condition needs a default condition.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from nightowl.fleet.node_condition import NPD_DEFAULT_MAX_OUTPUT_LENGTH, PluginStatus, fit, plugin_result

DEPLOY = Path(__file__).resolve().parents[2] / "deploy" / "kubernetes"
REPORT = {
    "runbook": "node-health",
    "run_id": "20261201T211426Z-node-health-fe15ae",
    "bundle": "/var/lib/nightowl/bundles/20261201T211426Z-node-health-fe15ae",
    "hosts": [
        {
            "host": "gpu-17",
            "status": "ok",
            "verdict": {
                "id": "gpu-fell-off-bus",
                "action": "reboot-node",
                "summary": "GPU 0000:a1:00 fell off the bus",
            },
        }
    ],
}


def _npd_message(stdout: str, limit: int) -> str:
    """What NPD makes of a plugin's stdout (plugin.go: strings.TrimSpace, then output[:max_output_length])."""
    return stdout.strip().encode()[:limit].decode("utf-8", errors="replace")


@pytest.mark.parametrize(
    ("check_status", "expected"),
    [
        (0, PluginStatus.OK),
        (1, PluginStatus.NON_OK),
        (2, PluginStatus.UNKNOWN),
        (3, PluginStatus.UNKNOWN),
        (70, PluginStatus.UNKNOWN),
        (124, PluginStatus.UNKNOWN),
        (143, PluginStatus.UNKNOWN),
    ],
)
def test_exit_statuses_map_onto_npds_three(check_status: int, expected: PluginStatus) -> None:
    assert plugin_result(REPORT, check_status)[0] is expected
    assert [int(s) for s in PluginStatus] == [0, 1, 2]  # cpmtypes.OK, NonOK, Unknown


def test_message_leads_with_verdict_and_bundle_and_fits_npds_default_limit() -> None:
    _, message = plugin_result(REPORT, 1)
    assert message.startswith("gpu-fell-off-bus [20261201T211426Z-node-health-fe15ae] GPU")
    assert len(message.encode()) <= NPD_DEFAULT_MAX_OUTPUT_LENGTH == 80
    assert _npd_message(message + "\n", 80) == message  # NPD leaves it as it is


def test_message_is_cut_on_a_character_boundary() -> None:
    text = "x" * 79 + "é"  # é is two bytes: a byte cut at 80 would split it
    assert fit(text, 80) == "x" * 79
    assert fit("  a \n b  ", 80) == "a b"
    assert len(fit("ü" * 100, 81).encode()) == 80


def test_no_verdict_says_so() -> None:
    status, message = plugin_result({"run_id": "r1", "hosts": [{"host": "n", "error": "nvidia-smi hung"}]}, 3)
    assert status is PluginStatus.UNKNOWN and message == "no verdict (exit 3) [r1] nvidia-smi hung"


def test_npd_result_command(tmp_path: Path) -> None:
    nightowl = Path(sys.executable).parent / "nightowl"
    run = subprocess.run(
        [str(nightowl), "npd-result", "--check-status", "1", "--max-output-length", "40"],
        input=json.dumps(REPORT),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert run.returncode == 1 and len(run.stdout.strip().encode()) <= 40
    assert run.stdout.startswith("gpu-fell-off-bus [")
    broken = subprocess.run(
        [str(nightowl), "npd-result", "--check-status", "0"],
        input="{not json",
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert broken.returncode == 2 and "no report" in broken.stdout


def test_monitor_config_follows_npds_rules() -> None:
    config = json.loads((DEPLOY / "nightowl-npd-monitor.json").read_text())
    assert config["plugin"] == "custom"
    global_timeout = int(config["pluginConfig"]["timeout"].rstrip("s"))
    conditions = {c["type"] for c in config["conditions"]}
    for rule in config["rules"]:
        assert int(rule["timeout"].rstrip("s")) <= global_timeout  # Validate(): rule timeout <= global
        assert rule["type"] != "permanent" or rule["condition"] in conditions  # preset default condition
        assert Path(rule["path"]).name == "nightowl-npd-plugin.sh"
    script = (DEPLOY / "nightowl-npd-plugin.sh").read_text()
    assert f"NIGHTOWL_NPD_MAX_OUTPUT_LENGTH:-{config['pluginConfig']['max_output_length']}" in script
    # nightowl's deadline + grace + kill-after stays inside the rule's timeout
    deadline = int(re.search(r"NIGHTOWL_HOST_TIMEOUT:-(\d+)", script).group(1))  # type: ignore[union-attr]
    kill_after, grace = map(int, re.search(r'timeout -k (\d+) "\$\(\(HOST_TIMEOUT \+ (\d+)\)\)"', script).groups())  # type: ignore[union-attr]
    assert int(config["rules"][0]["timeout"].rstrip("s")) > deadline + grace + kill_after


def test_plugin_script_end_to_end_with_a_stand_in_check(tmp_path: Path) -> None:
    real = Path(sys.executable).parent / "nightowl"
    fake = tmp_path / "nightowl"
    fake.write_text(
        f'#!/bin/sh\n[ "$1" = npd-result ] && exec {real} "$@"\ncat <<\'EOF\'\n{json.dumps(REPORT)}\nEOF\nexit 1\n'
    )
    fake.chmod(0o755)
    env = {**os.environ, "NIGHTOWL": str(fake), "NIGHTOWL_OUT": str(tmp_path / "b")}
    run = subprocess.run(
        ["sh", str(DEPLOY / "nightowl-npd-plugin.sh")], env=env, capture_output=True, text=True, timeout=60
    )
    assert run.returncode == 1, run.stderr
    assert _npd_message(run.stdout, 80).startswith("gpu-fell-off-bus [20261201T211426Z-node-health-fe15ae]")
