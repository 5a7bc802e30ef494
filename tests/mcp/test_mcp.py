"""`nightowl mcp` through the SDK's own client over stdio: the tool list, a triage that agrees with the
CLI (verdict and bundle hash), refusals as tool errors naming what was wrong, and no way to an invasive
collector or to a command outside the read-only allow-list. Every client call runs under a watchdog."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import threading
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

mcp = pytest.importorskip("mcp")
anyio = pytest.importorskip("anyio")

from mcp import ClientSession, StdioServerParameters  # noqa: E402
from mcp.client.stdio import stdio_client  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
XID79 = ROOT / "fixtures" / "hosts" / "xid79-fallen-off-bus"
TOOLS = {"list_runbooks", "plan", "triage", "parse", "explain_xid", "read_bundle", "history"}
WATCHDOG = 60.0  # seconds any one client call may take (the box is shared; a run takes well under one)


@asynccontextmanager
async def served(tmp_path: Path, *args: str, env: dict[str, str] | None = None) -> AsyncIterator[ClientSession]:
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "nightowl.cli.main", "mcp", "--out", str(tmp_path / "bundles"), *args],
        cwd=str(ROOT),
        env={"NIGHTOWL_RUNBOOK_PATH": "", "XDG_CONFIG_HOME": str(tmp_path / "xdg"), **(env or {})},
    )
    with open(tmp_path / "server.log", "w") as errlog:
        async with stdio_client(params, errlog=errlog) as (read, write), ClientSession(read, write) as session:
            with anyio.fail_after(WATCHDOG):
                await session.initialize()
            yield session


async def call(session: ClientSession, name: str, arguments: dict[str, Any], **kwargs: Any) -> Any:
    with anyio.fail_after(WATCHDOG):
        return await session.call_tool(name, arguments, **kwargs)


def run(coroutine: Any) -> Any:
    return anyio.run(coroutine)


def cli_triage(tmp_path: Path, *args: str) -> dict[str, Any]:
    out = subprocess.run(
        [sys.executable, "-m", "nightowl.cli.main", "triage", *args, "--format", "json", "--out", str(tmp_path)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=WATCHDOG,
    )
    assert out.returncode in (0, 1, 3), out.stderr
    return json.loads(out.stdout)


def test_the_tool_list_and_schemas_derived_from_the_runbooks(tmp_path: Path) -> None:
    async def main() -> Any:
        async with served(tmp_path) as session:
            with anyio.fail_after(WATCHDOG):
                return (await session.list_tools()).tools

    tools = {tool.name: tool for tool in run(main)}
    assert set(tools) == TOOLS
    assert all(tool.annotations and tool.annotations.read_only_hint for tool in tools.values())
    triage = tools["triage"].input_schema
    assert triage["additionalProperties"] is False and "allow_invasive" not in triage["properties"]
    assert {"xid", "node-health", "nccl-hang"} <= set(triage["properties"]["runbook"]["enum"])
    assert not {"allOf", "anyOf", "oneOf", "if"} & set(triage)  # function-calling APIs refuse them at the root
    params = next(p for p in triage["properties"]["params"]["anyOf"] if p["title"] == "xid")
    assert params["additionalProperties"] is False
    assert "integer" in params["properties"]["expected_gpus"]["type"]  # the type of its default, 8
    assert params["properties"]["xid_policy"]["pattern"].startswith("^[^@")  # declared `type: path`
    assert tools["triage"].input_schema["properties"]["hosts"]["items"] == {"type": "string"}


def test_triage_of_a_recorded_host_gives_the_clis_verdict_and_bundle_hash(tmp_path: Path) -> None:
    cli = cli_triage(tmp_path / "cli", "xid", "--replay", str(XID79))
    progress: list[tuple[float, float | None, str | None]] = []

    async def on_progress(done: float, total: float | None, message: str | None) -> None:
        progress.append((done, total, message))

    async def main() -> tuple[Any, Any]:
        async with served(tmp_path) as session:
            arguments = {"runbook": "xid", "replay": [str(XID79)]}
            ours = await call(session, "triage", arguments, progress_callback=on_progress)
            theirs = await call(session, "read_bundle", {"bundle": cli["bundle"]})
            return ours, theirs

    ours, theirs = run(main)
    assert not ours.is_error, ours.content[0].text
    answer = ours.structured_content
    assert json.loads(ours.content[0].text) == answer
    assert answer["verdicts_by"] == "nightowl"
    for mine, cli_host in zip(answer["hosts"], cli["hosts"], strict=True):
        assert mine["verdict"] == cli_host["verdict"] and mine["verdict"]["id"] == "gpu-fell-off-bus"
        assert (mine["path"], mine["status"]) == (cli_host["path"], cli_host["status"])
    assert answer["exit_status"] == 1  # as the CLI's: a host needs action
    # the bundle hash is the one nightowl records for the bundle (manifest.sha256) and verifies
    bundle = Path(answer["bundle"])
    assert answer["bundle_id"] == answer["run_id"] == bundle.name
    manifest_sha = hashlib.sha256((bundle / "manifest.json").read_bytes()).hexdigest()
    assert answer["bundle_sha256"] == manifest_sha == (bundle / "manifest.sha256").read_text().split()[0]
    # and the CLI's own bundle, read through the server, has the CLI's id and hash and verifies
    read = theirs.structured_content
    cli_bundle = Path(cli["bundle"])
    assert read["bundle_id"] == cli["run_id"]
    assert read["bundle_sha256"] == (cli_bundle / "manifest.sha256").read_text().split()[0]
    assert read["verified"] is True and read["verify_problems"] == []
    assert read["hosts"][0]["verdict"]["id"] == "gpu-fell-off-bus"
    cited = read["hosts"][0]["verdict"]["evidence"][0]
    assert cited["source_sha256"] == hashlib.sha256((cli_bundle / cited["source"]).read_bytes()).hexdigest()
    assert read["postmortem"] and "gpu-fell-off-bus" in read["postmortem"]
    assert progress and progress[-1][0] == progress[-1][1] == 1.0


def test_refusals_are_tool_errors_naming_what_was_wrong(tmp_path: Path) -> None:
    replay = [str(XID79)]
    cases = [
        ({"runbook": "no-such-runbook", "replay": replay}, "no-such-runbook"),
        ({"runbook": str(ROOT / "runbooks" / "xid.yaml"), "replay": replay}, "no runbook named"),
        ({"runbook": "xid", "replay": replay, "params": {"bogus": "1"}}, "no parameter bogus"),
        ({"runbook": "xid", "replay": replay, "params": {"expected_gpus": "eight"}}, "expected_gpus"),
        ({"runbook": "xid", "replay": replay, "params": {"xid_policy": "@/etc/shadow"}}, "xid_policy"),
        ({"runbook": "xid", "replay": replay, "params": {"since": ["-r"]}}, "since"),
        ({"runbook": "xid", "replay": replay, "allow_invasive": True}, "allow_invasive"),
        ({"runbook": "xid", "hosts": ["local"]}, "not allowed"),
        ({"runbook": "xid", "replay": [str(tmp_path / "missing")]}, "missing"),
        ({"runbook": "xid"}, "give at least one host or replay"),
    ]

    async def main() -> list[Any]:
        async with served(tmp_path) as session:
            results = [await call(session, "triage", arguments) for arguments, _ in cases]
            results.append(await call(session, "plan", {"runbook": "oom", "params": {"nope": 1}}))
            results.append(await call(session, "parse", {"kind": "no-such-kind", "text": ""}))
            results.append(await call(session, "history", {"host": "gpu-17", "since": "soon"}))
            return results

    results = run(main)
    expected = [needle for _, needle in cases] + ["no parameter nope", "no-such-kind", "since 'soon'"]
    for result, needle in zip(results, expected, strict=True):
        assert result.is_error, needle
        assert needle in result.content[0].text, (needle, result.content[0].text)
    assert not list((tmp_path / "bundles").glob("*")), "a refused call wrote a bundle"


def test_parse_explain_and_plan_answer_as_the_cli(tmp_path: Path) -> None:
    kernel_log = XID79 / "kernel-log.out"
    xid_cli = subprocess.run(
        [sys.executable, "-m", "nightowl.cli.main", "xid", str(kernel_log), "--format", "json"],
        capture_output=True,
        text=True,
        check=True,
        timeout=WATCHDOG,
    )
    parse_cli = subprocess.run(
        [sys.executable, "-m", "nightowl.cli.main", "parse", "kernel-log", str(kernel_log)],
        capture_output=True,
        text=True,
        check=True,
        timeout=WATCHDOG,
    )

    async def main() -> list[Any]:
        async with served(tmp_path) as session:
            return [
                await call(session, "explain_xid", {"log": kernel_log.read_text()}),
                await call(session, "explain_xid", {"codes": [79, 48, 999999]}),
                await call(session, "parse", {"kind": "kernel-log", "path": str(kernel_log)}),
                await call(session, "plan", {"runbook": "nccl-hang", "params": {"gpus_per_node": 8}}),
            ]

    explained_log, explained_codes, parsed, planned = (r.structured_content for r in run(main))
    assert explained_log["events"] == json.loads(xid_cli.stdout)["events"]
    assert explained_log["bundle_id"] is None and explained_log["bundle_sha256"] is None
    actions = [e["action"] for e in explained_codes["events"]]
    assert actions[0] == "reboot-node" and actions[2] == "escalate"  # an unknown code is never "none"
    assert parsed["result"] == json.loads(parse_cli.stdout)
    invasive = [s for s in planned["steps"] if s["invasive"]]
    assert invasive and all(s["skipped"] for s in invasive)


# --- read-only, tried hard ------------------------------------------------------------------------

# One write per line: collectors run at once, and printf's pieces of two stand-ins must not interleave.
FAKE = '#!/bin/sh\nline=$(printf "%s\\037" "${0##*/}" "$@")\nprintf "%s\\n" "$line" >> "$NIGHTOWL_ARGV_LOG"\nexit 1\n'
HOSTILE_TEXT = ("-rf", "@/etc/shadow", "$(reboot)", "; reboot", "--data-binary=@/etc/passwd", "/dev/sda")


# Text a shell would act on, but that passes the parameter checks: it must reach an argv element as data.
SHELL_BAIT = "$(reboot); rm -rf / #"


def hostile_params(parameters: dict[str, Any], text: str) -> dict[str, Any]:
    values: dict[str, Any] = {}
    for name, spec in parameters.items():
        if spec["type"] in ("integer", "number"):
            values[name] = 0 if "seconds" in name else 3  # no waiting; level 3 would be an hour of DCGM load
        elif name == "probe_file":
            continue  # refused on live hosts: tested below
        elif name.endswith("_policy") and text == SHELL_BAIT:
            continue  # a file nightowl itself reads (refused when missing), never a command's argument
        elif name == "history_window" and text == SHELL_BAIT:
            continue  # an age nightowl itself reads (refused when not one), never a command's argument
        elif spec["type"] in ("string", "path"):
            values[name] = text
        elif spec["type"] == "json":
            values[name] = json.dumps(text)
        elif spec["type"] == "url":
            values[name] = "http://127.0.0.1:9/?$(reboot)"
    return values


def test_no_tool_reaches_an_invasive_collector_or_an_argv_off_the_allow_list(tmp_path: Path) -> None:
    """Every runbook on `local` (allowed by the config) with hostile parameters, every command the server
    starts caught by a stand-in on PATH: each is one of the allow-list's shapes, none an invasive one."""
    from nightowl.collectors import MODULES, get_collector
    from nightowl.collectors.readonly import ALLOWED, allowed_shape
    from nightowl.mcp.schemas import runbook_parameters

    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name in {shape[0] for shape in ALLOWED} | {"timeout", "sudo", "bash", "python3", "nsenter", "reboot"}:
        (bin_dir / name).write_text(FAKE)
        (bin_dir / name).chmod(0o755)
    log = tmp_path / "argv.log"
    log.touch()
    config = tmp_path / "mcp.yaml"
    config.write_text("hosts: [local]\n")
    runbooks = runbook_parameters()
    invasive_shapes = {
        argv for kind in MODULES if get_collector(kind).invasive for argv in get_collector(kind).commands
    }
    # recorded outputs of the invasive collectors too: a replay must not take them either
    recorded = tmp_path / "recorded"
    recorded.mkdir()
    for kind in ("nccl-tests-run", "dcgmi-diag-drained", "nvidia-smi", "kernel-log"):
        (recorded / f"{kind}.out").write_text("")

    async def main() -> list[Any]:
        env = {"PATH": str(bin_dir), "NIGHTOWL_ARGV_LOG": str(log)}
        async with served(tmp_path, "--config", str(config), env=env) as session:
            answers = []
            for attempt, (name, info) in enumerate(sorted(runbooks.items())):
                for text in (HOSTILE_TEXT[attempt % len(HOSTILE_TEXT)], SHELL_BAIT):
                    params = hostile_params(info["parameters"], text)
                    arguments = {"runbook": name, "hosts": ["local"], "replay": [str(recorded)], "params": params}
                    answers.append((name, await call(session, "triage", arguments)))
            return answers

    answers = run(main)
    ran = [line.split("\x1f")[:-1] for line in log.read_text().splitlines() if line]
    assert ran, "the stand-ins caught nothing: the test would pass whatever ran"
    for argv in ran:
        assert allowed_shape(tuple(argv), resolved=True) is not None, f"ran an argv off the allow-list: {argv}"
        assert not any(allowed_shape(tuple(argv), resolved=True) == shape for shape in invasive_shapes), argv
        assert argv[0] not in ("all_reduce_perf", "reboot", "nsenter", "bash"), argv
        assert argv[:3] != ["dcgmi", "diag", "-r"] or argv == ["dcgmi", "diag", "-r", "1"], argv  # level 1: seconds
    refused = [(name, a.content[0].text[:200]) for name, a in answers[1::2] if a.is_error]
    assert not refused, "text that passes the parameter checks must run (as data): " + repr(refused)
    for name, answer in answers:
        if answer.is_error:
            continue
        manifest = json.loads((Path(answer.structured_content["bundle"]) / "manifest.json").read_text())
        kinds = {command["kind"] for command in manifest["commands"]}
        assert not kinds & {"nccl-tests-run", "dcgmi-diag-drained"}, (name, kinds)


def test_a_parameter_whose_file_a_collector_would_upload_is_refused_on_live_hosts(tmp_path: Path) -> None:
    from nightowl.mcp.tools import upload_params

    assert upload_params() == {"probe_file"}  # the known-answer probe: curl --data-binary @{probe_file}
    config = tmp_path / "mcp.yaml"
    config.write_text("hosts: [local]\n")
    arguments = {
        "runbook": "silent-corruption",
        "hosts": ["local"],
        "params": {"probe_file": "/etc/shadow", "endpoint": "http://collector.example/"},
    }

    async def main() -> Any:
        async with served(tmp_path, "--config", str(config), env={"PATH": str(tmp_path)}) as session:
            return await call(session, "triage", arguments)

    result = run(main)
    assert result.is_error and "probe_file" in result.content[0].text


def test_a_config_with_a_key_it_does_not_know_is_refused(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("hosts: [local]\nallow_invasive: true\n")
    out = subprocess.run(
        [sys.executable, "-m", "nightowl.cli.main", "mcp", "--config", str(bad)],
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        timeout=WATCHDOG,
        env={**os.environ},
    )
    assert out.returncode == 2 and "allow_invasive" in out.stderr


# --- the front (answers while the SDK loads) and the SDK answer alike ----------------------------------


def raw_session(front: bool, version: str, tmp_path: Path) -> list[dict[str, Any]]:
    """initialize, initialized, tools/list, ping and one tools/call over plain pipes; the answers in order."""
    hello = {"protocolVersion": version, "capabilities": {}, "clientInfo": {"name": "test", "version": "0"}}
    messages = [
        {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": hello},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
        {"jsonrpc": "2.0", "id": 3, "method": "ping"},
        {
            "jsonrpc": "2.0",
            "id": 4,
            "method": "tools/call",
            "params": {"name": "explain_xid", "arguments": {"codes": [79]}},
        },
    ]
    proc = subprocess.Popen(
        [sys.executable, "-m", "nightowl.cli.main", "mcp", "--out", str(tmp_path)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        cwd=ROOT,
        env={**os.environ, "NIGHTOWL_MCP_FRONT": "1" if front else "0"},
    )
    assert proc.stdin is not None and proc.stdout is not None
    answers: list[dict[str, Any]] = []
    try:
        proc.stdin.write("".join(json.dumps(m) + "\n" for m in messages))
        proc.stdin.flush()
        # stdin stays open until the last answer is read, as a client keeps it; the watchdog ends a hang
        watchdog = threading.Timer(WATCHDOG, proc.kill)
        watchdog.start()
        try:
            while not any(a.get("id") == 4 for a in answers) and (line := proc.stdout.readline()):
                answers.append(json.loads(line))
            proc.stdin.close()
            answers += [json.loads(line) for line in proc.stdout if line.strip()]  # nothing more is expected
        finally:
            watchdog.cancel()
    finally:
        proc.kill()
        proc.wait(timeout=WATCHDOG)
    return sorted(answers, key=lambda m: m.get("id", 0))


@pytest.mark.parametrize("version", ["2025-11-25", "2025-06-18"])
def test_the_front_answers_as_the_sdk_would(tmp_path: Path, version: str) -> None:
    from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS

    from nightowl.mcp.front import HANDSHAKE_VERSIONS

    assert tuple(HANDSHAKE_VERSIONS) == tuple(HANDSHAKE_PROTOCOL_VERSIONS)
    fronted = raw_session(True, version, tmp_path / "a")
    sdk_only = raw_session(False, version, tmp_path / "b")
    assert [m["id"] for m in fronted] == [1, 2, 3, 4], fronted  # one answer each: the SDK's duplicate dropped
    assert fronted == sdk_only
    assert fronted[0]["result"]["protocolVersion"] == version
    assert not fronted[3]["result"].get("isError")
