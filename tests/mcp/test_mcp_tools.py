"""The MCP tools in-process (no SDK): bundles read as untrusted input, the history hook, the config, and
argument checks that name what was wrong."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from nightowl.collectors import get_collector
from nightowl.collectors.base import parse_document
from nightowl.mcp.config import ConfigError, load_config
from nightowl.mcp.hooks import RunRequest, ToolError
from nightowl.mcp.tools import Toolbox
from nightowl.outcome import outcome_from_run

ROOT = Path(__file__).resolve().parents[2]
XID79 = ROOT / "fixtures" / "hosts" / "xid79-fallen-off-bus"


def never_runs(request: RunRequest) -> dict[str, Any]:
    raise AssertionError("the run path was reached")


@pytest.fixture(scope="module")
def bundle(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("bundles")
    subprocess.run(
        [sys.executable, "-m", "nightowl.cli.main", "triage", "xid", "--replay", str(XID79), "--out", str(out)],
        capture_output=True,
        cwd=ROOT,
        timeout=120,
    )
    (found,) = out.iterdir()
    return found


def copy(bundle: Path, tmp_path: Path) -> Path:
    target = tmp_path / bundle.name
    shutil.copytree(bundle, target)
    return target


def test_read_bundle_cites_every_evidence_file_by_its_sha256(bundle: Path) -> None:
    answer = Toolbox(never_runs).call("read_bundle", {"bundle": str(bundle)})
    assert answer["verified"] is True and answer["bundle_id"] == bundle.name
    files = {f["path"]: f["sha256"] for f in answer["files"]}
    for item in answer["hosts"][0]["verdict"]["evidence"]:
        assert item["source_sha256"] == files[item["source"]]


def test_a_tampered_bundle_is_read_but_not_verified(bundle: Path, tmp_path: Path) -> None:
    tampered = copy(bundle, tmp_path)
    log = next(tampered.glob("hosts/*/kernel-log.out"))
    log.write_text(log.read_text().replace("79", "31"))
    answer = Toolbox(never_runs).call("read_bundle", {"bundle": str(tampered)})
    assert answer["verified"] is False and any("kernel-log.out" in p for p in answer["verify_problems"])


def test_a_hostile_bundle_is_refused_or_reported_never_followed(bundle: Path, tmp_path: Path) -> None:
    hostile = copy(bundle, tmp_path)
    secret = tmp_path / "secret.md"
    secret.write_text("the operator's secret")
    (hostile / "postmortem.md").unlink()
    os.symlink(secret, hostile / "postmortem.md")
    (hostile / "verdicts.json").write_text("{not json")
    answer = Toolbox(never_runs).call("read_bundle", {"bundle": str(hostile)})
    assert answer["postmortem"] is None  # a symlink out of the bundle is not read
    assert "the operator's secret" not in json.dumps(answer)
    assert any("verdicts.json" in p for p in answer["problems"]) and answer["hosts"] == []
    assert answer["verified"] is False
    (hostile / "manifest.json").write_text("[1, 2]")
    with pytest.raises(ToolError, match="not a JSON object"):
        Toolbox(never_runs).call("read_bundle", {"bundle": str(hostile)})
    with pytest.raises(ToolError, match="not a bundle"):
        Toolbox(never_runs).call("read_bundle", {"bundle": str(tmp_path / "nowhere")})


def test_history_without_a_store_is_a_tool_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "nightowl.history", None)  # as in a build without nightowl/history/
    with pytest.raises(ToolError, match="no history store in this build"):
        Toolbox(never_runs).call("history", {"host": "gpu-17"})


def test_arguments_are_checked_before_any_work() -> None:
    box = Toolbox(never_runs)
    cases = [
        ("triage", {"runbook": "xid", "replay": [str(XID79)], "allow_invasive": True}, "no argument allow_invasive"),
        ("triage", {"replay": [str(XID79)]}, "needs the argument runbook"),
        ("triage", {"runbook": "xid", "replay": str(XID79)}, "argument replay of tool triage expects a list"),
        ("triage", {"runbook": "xid", "hosts": ["gpu-17"]}, "not allowed by the server's config"),
        ("triage", {"runbook": "xid", "replay": [str(XID79)], "params": {"since": {"a": 1}}}, "parameter since"),
        ("plan", {"runbook": "xid", "params": {"expected_gpus": "many"}}, "parameter expected_gpus"),
        ("explain_xid", {}, "give codes or a kernel log"),
        ("parse", {"kind": "kernel-log", "text": "", "path": "/etc/hostname"}, "either text or path"),
        ("no_such_tool", {}, "no tool named"),
    ]
    for tool, arguments, message in cases:
        with pytest.raises(ToolError, match=message):
            box.call(tool, arguments)


def test_the_config_lists_hosts_and_refuses_what_it_does_not_know(tmp_path: Path) -> None:
    path = tmp_path / "mcp.yaml"
    path.write_text("hosts: [local, ssh://root@gpu-17:22]\nknown_hosts: ~/kh\n")
    config = load_config(path)
    assert config.hosts == ("local", "ssh://root@gpu-17:22") and config.known_hosts == Path("~/kh").expanduser()
    assert load_config(None).hosts == ()
    for text, message in [("allow_invasive: true\n", "unknown key allow_invasive"), ("hosts: 3\n", "hosts")]:
        path.write_text(text)
        with pytest.raises(ConfigError, match=message):
            load_config(path)


def test_triage_hands_the_run_path_a_read_only_request(tmp_path: Path) -> None:
    seen: list[RunRequest] = []

    def fake_run(request: RunRequest) -> dict[str, Any]:
        seen.append(request)
        return {"runbook": "xid", "run_id": "r", "bundle": None, "hosts": []}

    config = tmp_path / "mcp.yaml"
    config.write_text("hosts: [gpu-17]\n")
    box = Toolbox(fake_run, load_config(config), out_dir=tmp_path)
    answer = box.call("triage", {"runbook": "xid", "hosts": ["gpu-17"], "params": {"expected_gpus": 4}})
    (request,) = seen
    assert request.hosts == ("gpu-17",) and request.replays == () and request.params == {"expected_gpus": 4}
    assert not hasattr(request, "allow_invasive")  # the run path decides that, and says no
    assert answer["bundle_id"] == "r" and answer["bundle_sha256"] is None


def test_the_one_call_into_the_run_path_refuses_invasive_collectors(monkeypatch: pytest.MonkeyPatch) -> None:
    from nightowl.cli import mcp_cmd, running
    from nightowl.library import runbooks

    calls: list[dict[str, Any]] = []

    def spy(*args: Any, **kwargs: Any) -> Any:
        calls.append({"args": args, **kwargs})
        summary = {"runbook": "xid", "run_id": "r", "bundle": None, "hosts": []}
        unwritten = {"bundle": None, "bundle_error": None, "status_update": None}
        result = SimpleNamespace(summary=summary, runbook="xid", runs=[], **unwritten)
        result.outcome = outcome_from_run(result, "hand", title="the run's own")  # as run_and_save builds it
        return result

    monkeypatch.setattr(running, "run_or_exit", spy)
    request = RunRequest(runbooks.load("xid"), (XID79,), (), {}, Path("unused"))
    summary = mcp_cmd.run_for_mcp(request)
    assert calls[0]["allow_invasive"] is False and summary["exit_status"] == 0
    assert summary["outcome"]["origin"] == "hand" and summary["outcome"]["sha256"] is None  # the run's Outcome
    assert summary["outcome"]["title"] == "the run's own"  # taken from the run, not built again


def test_a_refusal_of_the_run_path_comes_back_with_its_message(tmp_path: Path) -> None:
    from nightowl.cli import mcp_cmd
    from nightowl.library import runbooks

    missing = str(tmp_path / "no-policy.yaml")
    request = RunRequest(runbooks.load("xid"), (XID79,), (), {"xid_policy": missing}, tmp_path)
    with pytest.raises(ToolError, match="xid_policy .*cannot read it"):
        mcp_cmd.run_for_mcp(request)
    assert not list(tmp_path.glob("*T*Z-xid-*")), "a refused run wrote a bundle"


def test_read_roots_keep_the_paths_a_model_gives_inside_them(bundle: Path, tmp_path: Path) -> None:
    config = tmp_path / "mcp.yaml"
    config.write_text(f"read_roots: [{bundle.parent}]\n")
    box = Toolbox(never_runs, load_config(config))
    assert box.call("read_bundle", {"bundle": str(bundle)})["verified"] is True
    outside = [
        ("read_bundle", {"bundle": str(tmp_path)}),
        ("read_bundle", {"bundle": f"{bundle}/../../{tmp_path.name}"}),
        ("parse", {"kind": "kernel-log", "path": "/etc/hostname"}),
        ("triage", {"runbook": "xid", "replay": [str(XID79)]}),
    ]
    for tool, arguments in outside:
        with pytest.raises(ToolError, match="outside the folders"):
            box.call(tool, arguments)
    # the server's own bundles stay readable: where it writes them counts as a root
    writes_elsewhere = Toolbox(never_runs, load_config(config), out_dir=tmp_path / "own")
    copy(bundle, tmp_path / "own")
    assert writes_elsewhere.call("read_bundle", {"bundle": str(tmp_path / "own" / bundle.name)})["verified"]


def test_history_answers_from_the_store_naming_each_bundle(tmp_path: Path) -> None:
    """A triage recorded into the store, then the tool: the Xid 79 event with the bundle id and sha256."""
    from click.testing import CliRunner

    from nightowl.cli.main import main

    store = tmp_path / "history.sqlite3"
    recorded = ROOT / "fixtures" / "hosts" / "xid79-fallen-off-bus"
    args = ["triage", "xid", "--replay", str(recorded), "--out", str(tmp_path / "b"), "--history", str(store)]
    result = CliRunner().invoke(main, [*args, "--format", "json"])
    assert result.exit_code == 1, result.output
    toolbox = Toolbox(never_runs, history=store)  # the store the server's command chose
    answer = toolbox.call("history", {"host": "xid79-fallen-off-bus"})
    events = [row for row in answer["timeline"] if row.get("code") == 79]
    assert events, answer
    assert all(row["bundle_sha256"] and row["bundle_id"] for row in events)
    assert toolbox.call("history", {"host": "another-host"})["timeline"] == []
    with pytest.raises(ToolError, match="expected an age"):
        toolbox.call("history", {"host": "gpu-17", "since": "soon"})


def test_parse_reads_regular_files_only_and_scrubs_its_answer(tmp_path: Path) -> None:
    """Issue "trust, round four", item 8: a FIFO never blocks a worker, and a parse answer keeps no secret a
    bundle would not."""
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    toolbox = Toolbox(never_runs)
    with pytest.raises(ToolError, match="not a regular file"):
        toolbox.call("parse", {"kind": "kernel-log", "path": str(fifo)})  # returns at once: no writer needed
    secret = "hf_abcdefghijklmnopqrstuvwxyzABCDEFGH"
    leaked = f"INFO: Started server process\nValueError: could not log in with HF_TOKEN={secret}\n"
    plain = json.dumps(parse_document(get_collector("engine-log"), leaked))
    assert secret in plain  # the parse echoes the error line: the check can fail
    answer = json.dumps(toolbox.call("parse", {"kind": "engine-log", "text": leaked}))
    assert secret not in answer and "HF_TOKEN=[REDACTED]" in answer
