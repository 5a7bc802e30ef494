"""Issue "trust, round four", item 8: a tool call that does not finish answers an error within the server's
``tool_timeout`` and frees its caller (more stuck calls than a worker pool has threads included); the server
exits when its client closes stdin, a tool stuck or not; every answer and error text is scrubbed. The stuck
tool is a triage whose ``xid_policy`` is a FIFO nobody writes (nightowl opens the policy itself, and the open
blocks); every wait on the server runs under a watchdog."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

anyio = pytest.importorskip("anyio")
pytest.importorskip("mcp")

from nightowl.mcp import server  # noqa: E402
from nightowl.mcp.config import ServerConfig  # noqa: E402
from nightowl.mcp.hooks import RunRequest, ToolError  # noqa: E402
from nightowl.mcp.tools import Tool, Toolbox  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
XID79 = ROOT / "fixtures" / "hosts" / "xid79-fallen-off-bus"
WATCHDOG = 60.0
SECRET = "hf_abcdefghijklmnopqrstuvwxyzABCDEFGH"


def never_runs(request: RunRequest) -> dict[str, Any]:
    raise AssertionError("the run path was reached")


def test_a_call_past_its_deadline_answers_an_error_and_frees_the_caller() -> None:
    """45 calls stuck for good, more than anyio's 40 worker threads: each answers the deadline error, and a
    call after them still answers."""
    release = threading.Event()

    async def main() -> tuple[list[str], str]:
        errors: list[str] = []

        async def stuck(index: int) -> None:
            try:
                await server.in_thread(release.wait, 0.5, f"stuck-{index}")
            except ToolError as exc:
                errors.append(str(exc))

        with anyio.fail_after(WATCHDOG):
            async with anyio.create_task_group() as group:
                for index in range(45):
                    group.start_soon(stuck, index)
            after = await server.in_thread(lambda: "answered", 5.0, "after")
        return errors, after

    try:
        errors, after = anyio.run(main)
    finally:
        release.set()
    assert len(errors) == 45 and all("did not finish within 0.5 s" in e for e in errors), errors[:2]
    assert after == "answered"


def test_a_tools_own_failure_comes_back_from_its_thread() -> None:
    def fails() -> None:
        raise ToolError("refused")

    async def main() -> None:
        with anyio.fail_after(WATCHDOG):
            await server.in_thread(fails, 5.0, "fails")

    with pytest.raises(ToolError, match="refused"):
        anyio.run(main)


def test_every_answer_and_error_is_scrubbed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A secret planted where an error quotes it (a path, a parameter's value, an internal error) and in an
    answer: none reaches the client."""
    from nightowl.cli.mcp_cmd import run_for_mcp

    box = Toolbox(run_for_mcp, ServerConfig(), out_dir=tmp_path / "bundles")
    with pytest.raises(ToolError) as caught:
        box.call("parse", {"kind": "kernel-log", "path": str(tmp_path / f"HF_TOKEN={SECRET}")})
    assert "cannot read" in str(caught.value) and SECRET not in str(caught.value)
    with pytest.raises(ToolError) as caught:  # the run path's refusal quotes the value
        box.call(
            "triage", {"runbook": "xid", "replay": [str(XID79)], "params": {"expected_gpus": f"HF_TOKEN={SECRET}"}}
        )
    assert "expected_gpus" in str(caught.value) and SECRET not in str(caught.value)

    # a bug's message, and a tool's answer, through the server's own path
    def leaks(arguments: dict[str, Any], progress: Any) -> dict[str, Any]:
        if arguments.get("text") == "bug":
            raise RuntimeError(f"HF_TOKEN={SECRET}")
        return {"echo": f"HF_TOKEN={SECRET}"}

    tools = {**box.tools(), "parse": Tool("parse", "", box.tools()["parse"].input_schema, leaks)}
    monkeypatch.setattr(box, "tools", lambda: tools)

    async def main() -> list[Any]:
        answers = []
        for text in ("bug", "answer"):
            params = SimpleNamespace(name="parse", arguments={"kind": "kernel-log", "text": text})
            with anyio.fail_after(WATCHDOG):
                answers.append(await server._call_tool(box, SimpleNamespace(), params))
        return answers

    bug, answer = anyio.run(main)
    assert bug.is_error and "internal error" in bug.content[0].text
    for result in (bug, answer):
        assert SECRET not in result.model_dump_json(), result
    assert answer.structured_content == {"echo": "HF_TOKEN=[REDACTED]"}


# --- the server as a client starts it ----------------------------------------------------------------------


def start(tmp_path: Path, timeout: float, extra: str = "") -> subprocess.Popen[str]:
    config = tmp_path / "mcp.yaml"
    config.write_text(f"tool_timeout: {timeout}\n{extra}")
    return subprocess.Popen(
        [sys.executable, "-m", "nightowl.cli.main", "mcp", "--config", str(config), "--out", str(tmp_path / "b")],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        cwd=ROOT,
        env={**os.environ, "NIGHTOWL_HISTORY": "off", "XDG_CONFIG_HOME": str(tmp_path / "xdg")},
    )


def send(proc: subprocess.Popen[str], *messages: dict[str, Any]) -> None:
    assert proc.stdin is not None
    proc.stdin.write("".join(json.dumps(m) + "\n" for m in messages))
    proc.stdin.flush()


def answer_to(proc: subprocess.Popen[str], id_: int) -> dict[str, Any]:
    assert proc.stdout is not None
    while line := proc.stdout.readline():
        message = json.loads(line)
        if message.get("id") == id_:
            return dict(message)
    raise AssertionError(f"the server closed its output before answering {id_}")


def opening() -> list[dict[str, Any]]:
    hello = {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "test", "version": "0"}}
    return [
        {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": hello},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
    ]


def stuck_triage(id_: int, fifo: Path) -> dict[str, Any]:
    arguments = {"runbook": "xid", "replay": [str(XID79)], "params": {"xid_policy": str(fifo)}}
    return {"jsonrpc": "2.0", "id": id_, "method": "tools/call", "params": {"name": "triage", "arguments": arguments}}


@contextlib.contextmanager
def watched(tmp_path: Path, timeout: float, extra: str = "") -> Iterator[subprocess.Popen[str]]:
    """The server (``start``), killed by a watchdog past WATCHDOG seconds and, whatever the test did, at its end."""
    proc = start(tmp_path, timeout=timeout, extra=extra)
    watchdog = threading.Timer(WATCHDOG, proc.kill)
    watchdog.start()
    try:
        yield proc
    finally:
        watchdog.cancel()
        proc.kill()
        proc.wait(timeout=WATCHDOG)


@pytest.mark.integration
def test_a_stuck_tool_answers_the_deadline_error_and_the_server_goes_on(tmp_path: Path) -> None:
    fifo = tmp_path / "policy.fifo"
    os.mkfifo(fifo)
    with watched(tmp_path, timeout=2) as proc:
        send(proc, *opening(), stuck_triage(2, fifo))
        stuck = answer_to(proc, 2)
        explain = {"name": "explain_xid", "arguments": {"codes": [79]}}
        send(proc, {"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": explain})
        after = answer_to(proc, 3)
    assert stuck["result"]["isError"] is True, stuck
    assert "did not finish within 2 s" in stuck["result"]["content"][0]["text"]
    assert not after["result"].get("isError") and after["result"]["structuredContent"]["events"]


@pytest.mark.integration
def test_the_server_exits_when_stdin_closes_while_a_tool_is_stuck(tmp_path: Path) -> None:
    fifo = tmp_path / "policy.fifo"
    os.mkfifo(fifo)
    with watched(tmp_path, timeout=600) as proc:
        # the ping is read after the call, so its answer says the call was handed to its thread
        send(proc, *opening(), stuck_triage(2, fifo), {"jsonrpc": "2.0", "id": 3, "method": "ping"})
        assert answer_to(proc, 3)["result"] == {}
        assert proc.stdin is not None
        proc.stdin.close()
        rc = proc.wait(timeout=WATCHDOG)  # the watchdog kills it first: rc -9
    assert rc == 0, f"the server outlived its client (rc {rc})"


def test_the_deadline_is_the_configs_tool_timeout(tmp_path: Path) -> None:
    from nightowl.mcp.config import DEFAULT_TOOL_TIMEOUT, ConfigError, load_config

    path = tmp_path / "mcp.yaml"
    path.write_text("tool_timeout: 5\n")
    assert load_config(path).tool_timeout == 5.0 and load_config(None).tool_timeout == DEFAULT_TOOL_TIMEOUT
    for bad in ("0", "-1", "five", ".nan", ".inf", "true"):
        path.write_text(f"tool_timeout: {bad}\n")
        with pytest.raises(ConfigError, match="tool_timeout"):
            load_config(path)


def test_a_stuck_run_holds_neither_the_next_nor_its_refusal_message(monkeypatch: pytest.MonkeyPatch) -> None:
    """run_for_mcp captures the run path's refusal from stderr: one run stuck for good must not hold the next
    (a process-wide redirect held a lock for the whole run), and the next's message is its own."""
    from nightowl.cli import mcp_cmd, running
    from nightowl.cli.exit import fail
    from nightowl.library import runbooks

    entered, release = threading.Event(), threading.Event()

    def run_or_exit(loaded: Any, transports: Any, params: dict[str, Any], *args: Any, **kwargs: Any) -> Any:
        if params.get("stuck"):
            print("nightowl: the stuck run's own line", file=sys.stderr)
            entered.set()
            release.wait()  # set by the test when it is done
        fail("refused here")

    monkeypatch.setattr(running, "run_or_exit", run_or_exit)
    xid = runbooks.load("xid")
    errors: list[str] = []

    def call(params: dict[str, Any]) -> None:
        try:
            mcp_cmd.run_for_mcp(RunRequest(xid, (XID79,), (), params, Path("unused")))
        except ToolError as exc:
            errors.append(str(exc))

    stuck = threading.Thread(target=call, args=({"stuck": True},), daemon=True)
    stuck.start()
    try:
        assert entered.wait(WATCHDOG)
        after = threading.Thread(target=call, args=({},), daemon=True)
        after.start()
        after.join(WATCHDOG)
        assert not after.is_alive(), "a stuck run held the next one"
        assert errors == ["refused here"]
    finally:
        release.set()
        stuck.join(WATCHDOG)


@pytest.mark.integration
def test_the_server_exits_past_a_collector_stuck_on_a_live_host(tmp_path: Path) -> None:
    """A command on `local` that never ends (tail on a FIFO nobody writes) holds the triage: the server exits
    all the same when stdin closes (and the tail, orphaned, is let go by the test)."""
    fifo = tmp_path / "engine.log"
    os.mkfifo(fifo)
    arguments = {"runbook": "engine-start", "hosts": ["local"], "params": {"engine_log_file": str(fifo)}}
    call = {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "triage", "arguments": arguments}}
    try:
        with watched(tmp_path, timeout=600, extra="hosts: [local]\n") as proc:
            send(proc, *opening(), call, {"jsonrpc": "2.0", "id": 3, "method": "ping"})
            assert answer_to(proc, 3)["result"] == {}
            assert proc.stdin is not None
            proc.stdin.close()
            rc = proc.wait(timeout=WATCHDOG)
    finally:
        with contextlib.suppress(OSError):  # let a tail still waiting on the FIFO see its end
            os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
    assert rc == 0, f"the server outlived its client (rc {rc})"


def test_a_thread_interpreter_shutdown_would_wait_for_does_not_hold_the_exit(monkeypatch: pytest.MonkeyPatch) -> None:
    """Past the end of serving, a thread interpreter shutdown would join (not a daemon, or a tool call's own,
    whose engine pools concurrent.futures joins at exit) means os._exit after a flush; none, the ordinary exit."""
    import io

    exits: list[int] = []
    monkeypatch.setattr(server.os, "_exit", exits.append)
    # Only this test's threads count: the whole suite leaves other tests' pool threads alive in this process.
    everything = threading.enumerate
    before = set(everything())
    monkeypatch.setattr(server.threading, "enumerate", lambda: [t for t in everything() if t not in before])
    server._exit_past_stuck_threads(io.BytesIO())
    assert exits == []
    release = threading.Event()
    for thread in (
        threading.Thread(target=release.wait, name="collect_0"),
        threading.Thread(target=release.wait, name=f"{server.TOOL_THREAD}triage", daemon=True),
    ):
        thread.start()
        try:
            server._exit_past_stuck_threads(io.BytesIO())
        finally:
            release.set()
            thread.join(WATCHDOG)
            release.clear()
    assert exits == [0, 0]
