"""``run_or_exit`` (cli/running.py) takes the run's own signature, not a copy of it: it is ``exiting`` around
fleet/sweep.py's ``run_and_save`` (the shape every command calls ``nightowl.run.run_and_save`` in), so an option
added there reaches a command's run without a second declaration. A context not handed in is the command's;
a refusal exits 2 and an interrupt 130/143, as before."""

from __future__ import annotations

import inspect
from pathlib import Path
from typing import Any

import pytest

from nightowl.cli import running
from nightowl.fleet import sweep
from nightowl.run import Interrupted, RunRefused


def test_run_or_exit_is_the_runners_own_signature() -> None:
    assert running.run_or_exit.__wrapped__ is sweep.run_and_save  # type: ignore[attr-defined]
    assert inspect.signature(running.run_or_exit) == inspect.signature(sweep.run_and_save)


def runner(calls: list[dict[str, Any]]) -> Any:
    """A run in the runner's shape with one option it alone takes (``new_option``): what ``exiting`` hands it."""

    def run(
        loaded: Any,
        transports: dict[str, Any],
        params: dict[str, Any],
        out_dir: Path,
        allow_invasive: bool,
        limits: dict[str, float | None] | None = None,
        context: Any = None,
        *,
        new_option: int = 0,
        **options: Any,
    ) -> Any:
        calls.append({"context": context, "new_option": new_option, "limits": limits, **options})
        return "result"

    return run


@pytest.fixture
def command_context(monkeypatch: pytest.MonkeyPatch) -> object:
    chosen = object()
    monkeypatch.setattr("nightowl.cli.common.run_context", lambda: chosen)
    return chosen


def test_a_new_option_reaches_the_run_and_the_context_is_the_commands(command_context: object) -> None:
    calls: list[dict[str, Any]] = []
    run_or_exit = running.exiting(runner(calls))
    assert run_or_exit("rb", {}, {}, Path("out"), False, new_option=7, forks=3) == "result"
    assert calls[-1] == {"context": command_context, "new_option": 7, "limits": None, "forks": 3}
    mine = object()
    run_or_exit("rb", {}, {}, Path("out"), False, {"host_timeout": 1.0}, mine)  # a context handed in, by position
    assert calls[-1]["context"] is mine and calls[-1]["limits"] == {"host_timeout": 1.0}
    run_or_exit("rb", {}, {}, Path("out"), False, context=mine)  # ... and by name
    assert calls[-1]["context"] is mine
    with pytest.raises(TypeError):
        run_or_exit("rb", {}, {}, Path("out"))  # type: ignore[call-arg]  # the run's own signature is checked


def raising(exc: BaseException) -> Any:
    def run(*args: Any, context: Any = None, **kwargs: Any) -> Any:
        raise exc

    return run


def test_a_refusal_exits_2_with_the_reason(command_context: object, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        running.exiting(raising(RunRefused("xid_policy: no such file")))("rb", {}, {}, Path("out"), False)
    assert exited.value.code == 2 and "nightowl: xid_policy: no such file" in capsys.readouterr().err


@pytest.mark.parametrize(("terminated", "status"), [(False, 130), (True, 143)])
def test_an_interrupt_exits_130_or_143_naming_the_partial_bundle(
    command_context: object,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    terminated: bool,
    status: int,
) -> None:
    monkeypatch.setattr(running, "_ignore_stop_signals", lambda: None)  # not in the test process
    with pytest.raises(SystemExit) as exited:
        running.exiting(raising(Interrupted([], Path("b1"), terminated)))("rb", {}, {}, Path("out"), False)
    assert exited.value.code == status and "partial bundle saved at b1" in capsys.readouterr().err
