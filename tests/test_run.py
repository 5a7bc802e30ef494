"""nightowl/run.py, the one way to run a runbook (issue 21): every caller gets the same steps.

The regression of the issue: an alert whose rule gives an `xid_policy` that cannot be read used to skip
the parameter checks triage makes and end "xid-informational -> none", exit 0, on a host whose kernel log
shows an application fault. Now it ends as triage does: refused, naming the file.
"""

from __future__ import annotations

import hashlib
import json
import time
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from nightowl.cli.main import main
from nightowl.library import runbooks
from nightowl.library.rehearse import replay_case
from nightowl.receiver.config import ConfigError, load_config
from nightowl.receiver.payload import parse_payload
from nightowl.receiver.queue import Receiver
from nightowl.run import RunRefused, RunSettings, run_and_save
from nightowl.transports.replay import ReplayTransport
from tests.postmortem.bundles import HOSTS
from tests.receiver.test_serve import TOKEN, payload

APP_FAULT = "xid13-app-fault"  # Xid 13 from one process: restart-app (fixtures/rehearsals/xid.yaml)


def alert_file(tmp_path: Path, hostname: str = APP_FAULT) -> Path:
    body = payload("alertmanager-xid-firing.json")
    body["alerts"] = [{**body["alerts"][0], "labels": {**body["alerts"][0]["labels"], "Hostname": hostname}}]
    path = tmp_path / "alert.json"
    path.write_text(json.dumps(body))
    return path


def rules(tmp_path: Path, params: dict[str, Any] | None = None, extra: str = "") -> Path:
    tmp_path.mkdir(parents=True, exist_ok=True)
    path = tmp_path / "rules.yaml"
    path.write_text(
        f"token: {TOKEN}\nout: {tmp_path / 'bundles'}\n{extra}rules:\n"
        f"  - name: gpu-xid\n    match: [alertname=GpuXidErrors]\n    runbook: xid\n"
        f'    host: "replay:{HOSTS}/{{{{ labels.Hostname }}}}"\n'
        + (f"    params: {json.dumps(params)}\n" if params else "")
    )
    return path


def triage_alert(tmp_path: Path, config: Path) -> Any:
    args = ["triage", "--alert", str(alert_file(tmp_path)), "--config", str(config), "--out", str(tmp_path / "out")]
    return CliRunner().invoke(main, [*args, "--format", "json"], catch_exceptions=False)


def test_the_alert_without_the_parameter_is_judged_an_application_fault(tmp_path: Path) -> None:
    """The control: the same alert and host give restart-app when the rule sets no policy."""
    result = triage_alert(tmp_path, rules(tmp_path))
    [capture] = json.loads(result.stdout)["captures"]
    assert capture["status"] == "captured" and capture["verdict"]["action"] == "restart-app"
    assert result.exit_code == 1


@pytest.mark.parametrize("content", [None, "overrides: [not, a, mapping]\n", "overrides: {63: {action: [\n"])
def test_triage_alert_refuses_an_unreadable_xid_policy_as_triage_does(tmp_path: Path, content: str | None) -> None:
    policy = tmp_path / "site-policy.yaml"
    if content is not None:
        policy.write_text(content)
    result = triage_alert(tmp_path, rules(tmp_path, {"xid_policy": str(policy)}))
    assert result.exit_code == 2, result.output
    [capture] = json.loads(result.stdout)["captures"]
    assert capture["status"] == "not_captured" and capture["input_error"] is True
    assert "xid_policy" in capture["reason"] and ("site-policy.yaml" in capture["reason"] or content)
    assert "xid_policy" in result.stderr and capture["verdict"] is None
    # triage refuses the same parameter the same way
    replay = CliRunner().invoke(
        main, ["triage", "xid", "--replay", str(HOSTS / APP_FAULT), "--param", f"xid_policy={policy}"]
    )
    assert replay.exit_code == 2 and "xid_policy" in replay.stderr


def test_serve_does_not_capture_an_alert_whose_rule_gives_an_unreadable_policy(tmp_path: Path) -> None:
    missing = tmp_path / "gone" / "policy.yaml"
    receiver = Receiver(load_config(rules(tmp_path, {"xid_policy": str(missing)})))
    receiver.start()
    try:
        [admitted] = receiver.submit(parse_payload(json.loads(alert_file(tmp_path).read_text())))
        assert admitted.status == "queued"
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and receiver.captures()[0]["status"] in ("queued", "running"):
            time.sleep(0.05)
    finally:
        receiver.stop(timeout=5)
    [capture] = receiver.captures()
    assert capture["status"] == "not_captured", capture
    assert str(missing) in capture["reason"] and capture["bundle"] is None and capture["verdict"] is None
    journal = [json.loads(line) for line in (tmp_path / "bundles" / "captures.jsonl").read_text().splitlines()]
    assert journal[-1]["status"] == "not_captured" and str(missing) in journal[-1]["reason"]


def test_a_rehearsal_case_gets_the_same_parameter_checks(tmp_path: Path) -> None:
    case = {"host": APP_FAULT, "params": {"xid_policy": str(tmp_path / "nope.yaml")}}
    with pytest.raises(RunRefused, match="nope.yaml"):
        replay_case("xid", case)
    assert replay_case("xid", {"host": APP_FAULT})[0].verdict["action"] == "restart-app"


def test_run_and_save_refuses_before_anything_runs(tmp_path: Path) -> None:
    loaded = runbooks.load("xid")
    opened: list[str] = []

    def opener() -> ReplayTransport:
        opened.append("yes")
        return ReplayTransport(HOSTS / APP_FAULT, "h")

    with pytest.raises(RunRefused, match="no parameter xid_polcy"):
        run_and_save(loaded, {"h": opener}, tmp_path, params={"xid_polcy": "x"})
    assert not opened and not list(tmp_path.iterdir())


def test_run_and_save_returns_the_bundle_summary_and_status_update(tmp_path: Path) -> None:
    result = run_and_save(runbooks.load("xid"), {"h": lambda: ReplayTransport(HOSTS / APP_FAULT, "h")}, tmp_path)
    assert result.bundle is not None and result.bundle.parent == tmp_path
    assert result.summary["bundle"] == str(result.bundle) and result.hosts[0]["verdict"]["action"] == "restart-app"
    assert result.status_update == result.bundle / "status-update.md" and result.status_update.is_file()
    assert (result.bundle / "postmortem.md").is_file() and result.runs[0].host == "h"
    bare = run_and_save(
        runbooks.load("xid"),
        {"h": lambda: ReplayTransport(HOSTS / APP_FAULT, "h")},
        tmp_path / "bare",
        settings=RunSettings(drafts=False, status_update=False),
    )
    assert bare.bundle is not None and bare.status_update is None
    assert not (bare.bundle / "postmortem.md").exists() and not (bare.bundle / "status-update.md").exists()


def test_the_runs_outcome_is_in_its_bundle_as_outcome_json(tmp_path: Path) -> None:
    """One Outcome per run (issue 44 item 1): built once by run_and_save, kept as outcome.json after the manifest
    it names, with the origin the caller gives; the status update is rendered from it."""
    from nightowl.engine.bundle_verify import verify_bundle

    def run(out: Path, **settings: Any) -> Any:
        hosts = {"h": lambda: ReplayTransport(HOSTS / APP_FAULT, "h")}
        return run_and_save(runbooks.load("xid"), hosts, out, settings=RunSettings(**settings))

    result = run(tmp_path / "hand")
    assert result.bundle is not None and result.outcome is not None
    kept = json.loads((result.bundle / "outcome.json").read_text(encoding="utf-8"))
    assert kept == result.outcome.as_json() and kept["origin"] == "hand"
    assert kept["verdict"] == result.hosts[0]["verdict"] and kept["host"] == "h"
    assert kept["sha256"] == hashlib.sha256((result.bundle / "manifest.json").read_bytes()).hexdigest()
    assert kept["status_update"] == str(result.status_update)
    assert result.outcome.status_update_text == result.status_update.read_text(encoding="utf-8")
    assert verify_bundle(result.bundle) == []  # written after the manifest: postmortem --verify still passes
    scheduled = run(tmp_path / "schedule", origin="schedule", status_update=False)
    assert scheduled.outcome.origin == "schedule" and scheduled.outcome.status_update is None
    assert json.loads((scheduled.bundle / "outcome.json").read_text())["origin"] == "schedule"
    # what verify can check of it: the manifest it names is this bundle's
    (scheduled.bundle / "outcome.json").write_text(json.dumps({**kept, "sha256": "0" * 64}))
    assert verify_bundle(scheduled.bundle) == ["changed: outcome.json (names another manifest's sha256)"]
    (scheduled.bundle / "outcome.json").write_text("{not json")
    assert verify_bundle(scheduled.bundle) == ["corrupt: outcome.json is not the run's outcome record"]


def test_the_status_update_tells_the_verdict_the_outcome_names(tmp_path: Path) -> None:
    """The status update reads the verdict from the run's Outcome, not from the hosts again."""
    import dataclasses

    from nightowl.reports import status_update

    result = run_and_save(runbooks.load("xid"), {"h": lambda: ReplayTransport(HOSTS / APP_FAULT, "h")}, tmp_path)
    assert result.outcome is not None and result.outcome.verdict is not None
    other = {**result.outcome.verdict, "action": "reboot-node", "summary": "Another verdict. More."}
    told = status_update.context(result.summary, 0.0, dataclasses.replace(result.outcome, verdict=other))
    assert told["action"] == "reboot-node: Another verdict."
    assert status_update.context(result.summary, 0.0, result.outcome) == status_update.context(result.summary, 0.0)


# --- the receiver's timeouts ------------------------------------------------------------------------
def test_a_rule_sets_its_own_timeouts_over_the_configs_default(tmp_path: Path) -> None:
    path = rules(tmp_path, extra="command_timeout: 30\nhost_timeout: 120\n")
    path.write_text(path.read_text() + "    host_timeout: 45\n")
    config = load_config(path)
    limits = config.limits_for("gpu-xid")
    assert (limits.command_timeout, limits.host_timeout) == (30.0, 45.0)
    assert (config.limits_for(None).command_timeout, config.limits_for(None).host_timeout) == (30.0, 120.0)
    bare = load_config(rules(tmp_path / "bare"))
    assert (bare.limits_for("gpu-xid").command_timeout, bare.limits_for("gpu-xid").host_timeout) == (None, None)


@pytest.mark.parametrize("value", ["-1", "0", "ten", "true", "1e9"])
def test_a_timeout_that_is_not_a_positive_number_of_seconds_is_refused(tmp_path: Path, value: str) -> None:
    path = rules(tmp_path)
    path.write_text(path.read_text() + f"    command_timeout: {value}\n")
    with pytest.raises(ConfigError, match=r"rules\[0\]: command_timeout"):
        load_config(path)
    with pytest.raises(ConfigError, match="host_timeout"):
        load_config(rules(tmp_path, extra=f"host_timeout: {value}\n"))


def test_the_rules_timeouts_reach_the_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import nightowl.run

    seen: dict[str, Any] = {}
    real = nightowl.run.run_and_save

    def spy(*args: Any, **kwargs: Any) -> Any:
        seen.update(kwargs)
        return real(*args, **kwargs)

    monkeypatch.setattr(nightowl.run, "run_and_save", spy)
    path = rules(tmp_path, extra="command_timeout: 7\n")
    path.write_text(path.read_text() + "    host_timeout: 9\n")
    result = triage_alert(tmp_path, path)
    assert json.loads(result.stdout)["captures"][0]["status"] == "captured"
    assert (seen["settings"].command_timeout, seen["settings"].host_timeout) == (7.0, 9.0)


def test_a_rehearsal_whose_parameters_are_refused_fails_with_the_reason(tmp_path: Path) -> None:
    from nightowl.library.rehearse import rehearse

    result = rehearse("xid", {"name": "bad policy", "host": APP_FAULT, "params": {"xid_policy": str(tmp_path / "x")}})
    assert (
        not result.passed and "parameters refused" in result.problems[0] and str(tmp_path / "x") in result.problems[0]
    )
