"""deploy/prometheus: promtool accepts and unit-tests the rules; every alert names a runbook that exists.

promtool comes with Debian's `prometheus` package (apt-get install -y prometheus), amtool with
`prometheus-alertmanager`; the tests that need them skip, saying so, when they are missing.
"""

from __future__ import annotations

import re
import shutil
import subprocess

import pytest
import yaml

from nightowl.collectors.serving.metrics import ALIASES
from nightowl.library import runbooks
from tests.helpers import ROOT

DEPLOY = ROOT / "deploy" / "prometheus"
RULE_FILES = sorted(DEPLOY.glob("*.rules.yml"))
PROMTOOL = shutil.which("promtool")
AMTOOL = shutil.which("amtool")
needs_promtool = pytest.mark.skipif(PROMTOOL is None, reason="promtool not installed (apt-get install -y prometheus)")


def alerts() -> list[dict]:
    found = []
    for path in RULE_FILES:
        for group in yaml.safe_load(path.read_text())["groups"]:
            found += [rule for rule in group["rules"] if "alert" in rule]
    return found


@needs_promtool
def test_promtool_check_rules() -> None:
    run = subprocess.run(
        [PROMTOOL, "check", "rules", *map(str, RULE_FILES)], capture_output=True, text=True, timeout=60
    )
    assert run.returncode == 0, run.stdout + run.stderr


@needs_promtool
def test_promtool_unit_tests() -> None:
    tests = sorted((DEPLOY / "tests").glob("*.yml"))
    assert tests
    run = subprocess.run(
        [PROMTOOL, "test", "rules", *map(str, tests)], capture_output=True, text=True, timeout=120, cwd=DEPLOY / "tests"
    )
    assert run.returncode == 0, run.stdout + run.stderr


@pytest.mark.skipif(AMTOOL is None, reason="amtool not installed (apt-get install -y prometheus-alertmanager)")
def test_alertmanager_example_is_valid() -> None:
    run = subprocess.run(
        [AMTOOL, "check-config", str(DEPLOY / "alertmanager.yml")], capture_output=True, text=True, timeout=60
    )
    assert run.returncode == 0, run.stdout + run.stderr


def test_every_alert_names_an_existing_runbook() -> None:
    known = set(runbooks.builtin_paths())
    for alert in alerts():
        runbook = alert.get("labels", {}).get("nightowl_runbook")
        if alert["alert"] == "NightowlSweepStale":
            assert runbook is None  # fix the cron job; no runbook triages it
            continue
        assert runbook in known, f"{alert['alert']}: runbook {runbook!r} not in runbooks/"
        assert alert["annotations"]["nightowl_runbook"] == runbook
        assert (
            f"nightowl triage {runbook}" in alert["annotations"].get("nightowl_command", "")
            or alert["alert"] == "GpuXidOnManyHosts"
        )


def test_serve_example_routes_every_alert(monkeypatch: pytest.MonkeyPatch) -> None:
    from nightowl.receiver.config import load_config
    from nightowl.receiver.payload import Alert
    from nightowl.receiver.rules import render_host

    monkeypatch.setenv("NIGHTOWL_SERVE_TOKEN", "test-token-of-real-strength")
    config = load_config(DEPLOY / "nightowl-serve.yml")
    for alert in alerts():
        labels = {"alertname": alert["alert"], **alert.get("labels", {}), "instance": "gpu-17:8000", "host": "gpu-17"}
        if alert["alert"] in ("NightowlSweepStale", "GpuXidOnManyHosts"):
            labels.pop("host")
        fired = Alert("alertmanager", "firing", labels, {"nightowl_host": "gpu-17"}, None, None, "f")
        rule = config.rule_for(fired)
        if "host" not in labels:
            assert rule is None, f"{alert['alert']}: fleet-level alerts capture nothing"
            continue
        assert rule is not None and rule.runbook == labels["nightowl_runbook"], alert["alert"]
        assert render_host(rule, fired) == "ssh://root@gpu-17"


def test_rules_read_the_metric_names_the_parser_knows() -> None:
    known = {alias.metric for alias in ALIASES}
    text = "\n".join(path.read_text() for path in RULE_FILES)
    used = set(re.findall(r"\b((?:vllm|sglang):[a-z_]+?)(?:_bucket|_count|_sum|_total)?\b", text))
    assert used, "no engine metric found in the rules"
    assert used <= known, f"not in collectors/prometheus.py ALIASES: {sorted(used - known)}"
