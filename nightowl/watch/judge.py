"""One burst judged: the run on this node (its kernel-log evidence holding the burst's lines), the textfile, a
log line, and the run's Outcome for the notify targets.

The run is triage's (``nightowl.run.run_and_save``: bundle with postmortem draft, secrets scrubbed, history
recorded in the store the command chose); its summary is docs/reference.md#run-json. This used to live in the
CLI, so the watch's runner thread called back up into ``cli/watch_cmd`` for every burst (and the CLI built
what the notifier was told); now the CLI builds a :class:`BurstJudge` once and the runner calls it, never the
CLI.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from nightowl.watch.burst import Burst, burst_description, trigger_record

if TYPE_CHECKING:
    from nightowl.outcome import Outcome

Log = Callable[..., None]  # log(text, level="info", **fields)


@dataclass(frozen=True)
class BurstJudge:
    """What every burst's run takes: the runbook, this node (its name and transport opener), the checked
    parameters, the timeouts, where the bundle and textfile go, and the followed source's name."""

    loaded: Any  # engine.validate.LoadedRunbook
    host: str
    opener: Callable[[], Any]
    params: dict[str, Any]
    limits: dict[str, float | None]
    out_dir: Path
    textfile: Path | None
    source_name: str
    log: Log
    notifier: Any | None = None  # receiver.notify.Notifier, started: told each run's Outcome
    context: Any = None  # engine.context.RunContext: the history store and readers the command chose (None: none)

    def __call__(self, burst: Burst) -> dict[str, Any]:
        """Judge the burst, queue its Outcome for the notify targets (never waited on; their results go to
        the log), and return the run's record for the health file."""
        record, outcome = self.judge(burst)
        if self.notifier is not None:
            from nightowl.receiver.notify import summary

            self.notifier.submit(outcome, lambda results: self.log(f"notify: {summary(results)}"))
        return record

    def judge(self, burst: Burst) -> tuple[dict[str, Any], Outcome]:
        """The run's record for the health file (bundle, status, verdict, action, problems, finding) and its
        Outcome. A refused parameter raises (checked at start, so only a changed policy file gets here)."""
        from nightowl.engine.context import RunContext
        from nightowl.run import RunHooks, RunSettings, run_and_save
        from nightowl.watch.evidence import BurstTransport

        def open_with_burst() -> Any:
            return BurstTransport(self.opener(), burst.lines, self.source_name, burst.dropped_note())

        trigger = {"trigger": trigger_record(burst, self.source_name)}  # the postmortem's Detection: not by hand
        settings = RunSettings(
            command_timeout=self.limits.get("command_timeout"),
            host_timeout=self.limits.get("host_timeout"),
            origin="watch",
        )
        run = run_and_save(
            self.loaded,
            {self.host: open_with_burst},
            self.out_dir,
            params=self.params,
            settings=settings,
            hooks=RunHooks(extra_manifest=trigger, describe=lambda _runs: burst_description(self.host, burst)),
            context=self.context or RunContext(),  # the store and readers the command's options chose
        )
        assert run.outcome is not None, "run_and_save builds every run's Outcome"
        return self._told(run.summary), run.outcome  # built by the run with what the burst told it (describe)

    def _told(self, summary: dict[str, Any]) -> dict[str, Any]:
        """The textfile written, the verdict logged; the record of the run."""
        problems = [summary["bundle_error"]] if summary.get("bundle_error") else []
        if self.textfile:
            from nightowl.fleet.textfile import write_textfile

            try:
                write_textfile(self.textfile, summary, self.context.history if self.context is not None else None)
            except OSError as exc:
                problems.append(f"cannot write the textfile {self.textfile}: {exc.strerror or exc}")
        entry = (summary.get("hosts") or [{}])[0]
        verdict = entry.get("verdict") or {}
        said = f"{verdict.get('id')} -> {verdict.get('action')}" if verdict else f"no verdict: {entry.get('error')}"
        from nightowl.logline import verdict_level

        level = verdict_level(entry.get("status"), verdict)
        self.log(f"{self.host} {self.loaded.id}: {said}", level=level, status=entry.get("status"),
                 bundle=summary.get("bundle"), verdict=verdict.get("id"), action=verdict.get("action"),
                 reason=entry.get("error"))  # fmt: skip
        for problem in problems:
            self.log(f"nightowl: {problem}", level="error")
        return {
            "bundle": summary.get("bundle"),
            "status": entry.get("status"),
            "verdict": verdict.get("id"),
            "action": verdict.get("action"),
            "problems": problems,
            "finding": verdict or None,  # the whole verdict (GPUs, why, first action)
        }
