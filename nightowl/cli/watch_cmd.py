"""`nightowl watch`: follow the kernel log and run a runbook on this node within seconds of a trigger line.

The daemon itself is nightowl/watch (sources, triggers, bursts, the follower and the runner, and
``watch/judge.py``, the one place a watch calls the run path); this module parses options and builds it.
"""

from __future__ import annotations

import signal
import sys
from pathlib import Path
from typing import Any

import click

from nightowl.cli.common import (
    DEFAULT_OUT_HELP,
    HISTORY_OPTION,
    LOG_FORMAT_OPTION,
    PARAM_OPTION,
    TEXTFILE_OPTION,
    fail,
    limit_options,
    number_option,
    out_option,
)
from nightowl.cli.exit import ExitStatus

TRIGGER_HELP = (
    "what opens a burst, comma-separated or repeated; `default` is xid, sxid, fallen-off-bus, aer-fatal, "
    "edac-uncorrectable, gpu-init-failed, hung-task-after-xid, pattern-action (a line kernel_patterns.csv says "
    "needs a reset, reboot or ticket); also gpu-reset-required, gsp-error, "
    "aer-nonfatal, oom-kill, hung-task, driver-mismatch"
)

# A daemon's statuses, not a run's: each burst's verdict goes to the log, the bundle and the textfile.
WATCH_EXIT_HELP = """\b
Exit status:
  0    --probe: the follower is alive (health file fresh)
  1    --probe: no health file, a stale one, or the watch stopped
  2    usage or input error (bad option, invalid runbook or parameter, no readable kernel log)
  70   internal error (a bug): the runner stopped, so the watch stopped rather than follow unjudged
  130  interrupted (SIGINT): as 143
  143  terminated (SIGTERM): the run in progress finished, or after --grace was ended and its burst
       is judged again at the next start
"""


@click.command(epilog=WATCH_EXIT_HELP)
@click.option(
    "--file",
    "file_path",
    type=click.Path(dir_okay=False, path_type=Path),
    help="follow this file across rotation (as tail -F) instead of the kernel's own log",
)
@click.option(
    "--source",
    type=click.Choice(["auto", "kmsg", "journal"]),
    default="auto",
    show_default=True,
    help="without --file: /dev/kmsg, `journalctl -k -f`, or auto (kmsg when it can be read, else the journal)",
)
@click.option("--from-start", is_flag=True, help="--file with no saved position: read it from its start, not its end")
@click.option("--runbook", default="xid", show_default=True, help="the runbook each burst runs on this node")
@PARAM_OPTION
@number_option("--debounce", click.FloatRange(min=0.0), 1.0, "seconds without a trigger line that close a burst")
@number_option(
    "--max-burst", click.FloatRange(min=0.1), 30.0, "seconds after which a burst still firing is judged anyway"
)
@click.option("--trigger", "triggers", multiple=True, help=TRIGGER_HELP)
@out_option(f"where each burst's bundle goes [default: {DEFAULT_OUT_HELP}]")
@TEXTFILE_OPTION
@click.option(
    "--state-dir",
    type=click.Path(file_okay=False, path_type=Path),
    help="where the position of the last judged line is kept [default: the state dir's watch/]",
)
@click.option(
    "--health-file",
    type=click.Path(dir_okay=False, path_type=Path),
    help="the health file the follower rewrites every 5 s [default: <state dir>/health.json]",
)
@number_option("--grace", click.FloatRange(min=0.0), 20.0, "seconds a run in progress may take to finish after SIGTERM")
@click.option(
    "--notify-config",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="a YAML file whose `notify:` section (as in serve's config: chat, webhook) is told each verdict",
)
@click.option(
    "--probe",
    is_flag=True,
    help="do not watch: exit 0 if the health file was written within --max-age seconds (a liveness probe)",
)
@number_option("--max-age", float, 30.0, "--probe: oldest health file that passes")
@limit_options
@LOG_FORMAT_OPTION
@HISTORY_OPTION
def watch(
    file_path: Path | None,
    source: str,
    from_start: bool,
    runbook: str,
    params: tuple[str, ...],
    debounce: float,
    max_burst: float,
    triggers: tuple[str, ...],
    out_dir: Path | None,
    textfile: Path | None,
    state_dir: Path | None,
    health_file: Path | None,
    grace: float,
    notify_config: Path | None,
    probe: bool,
    max_age: float,
    limits: dict[str, float | None],
    log_format: str,
) -> None:
    """Follow the kernel log and run a runbook on this node for each burst of trigger lines.

    Reads /dev/kmsg from its current end (or `journalctl -k -f`, or --file PATH followed across
    rotation). A trigger line (any Xid or SXid, a GPU off the bus, a fatal AER, an uncorrectable EDAC
    error, a GPU that failed to initialise, a hung task after an Xid; --trigger) opens a burst; once
    --debounce seconds pass without another, the runbook (--runbook, default xid) runs here with the
    burst's lines added to its kernel-log evidence, and writes one bundle per burst under --out, as
    triage does, and the textfile if --textfile. One run at a time: a burst that closes while a run is in
    progress waits, and a newer one joins it.

    A burst keeps every trigger line; context lines past 2,000 are dropped first (but for those beside
    a trigger line), and what was not kept is counted in the bundle's kernel-log.err.

    The position of the last judged line is kept in the state dir, so a restart never judges a line
    twice (and judges again a burst whose run did not finish). With --file, a restart after a rotation
    first reads the rest of the rotated file (PATH.1, PATH.N or PATH-*, or copytruncate's copy), then
    PATH from its start; a file truncated and written past the saved offset is read from its start.
    SIGTERM stops following, gives the run in progress --grace seconds, and exits 143. The follower
    rewrites the health file every 5 s; `nightowl watch --probe` is the liveness probe. Logs one JSON
    line per event to stderr.
    """
    from nightowl.paths import state_dir as default_state_dir

    state = state_dir or default_state_dir() / "watch"
    health = health_file or state / "health.json"
    if probe:
        sys.exit(int(_probe(health, max_age)))
    from nightowl.cli.common import load_runbook_or_exit, local_transports, param_values, run_context, stderr_logger
    from nightowl.paths import default_out_dir
    from nightowl.watch import triggers as trigger_table
    from nightowl.watch.judge import BurstJudge

    try:
        chosen = trigger_table.resolve(triggers)
    except ValueError as exc:
        fail(str(exc))
    loaded = load_runbook_or_exit(runbook)
    values = param_values(params, None)
    _check_params(loaded, values)
    host, opener = next(iter(local_transports().items()))
    log = _logger(stderr_logger(log_format, "nightowl.watch"), host, loaded.id)
    notifier = _notifier(notify_config)
    followed, cursor = _open_source(file_path, source, from_start, state)
    _warm_up()
    out = out_dir or default_out_dir()
    judge = BurstJudge(loaded, host, opener, values, limits, out, textfile, followed.name, log, notifier, run_context())
    try:
        status = _follow(followed, cursor, chosen, judge, health, debounce, max_burst, grace, log)
    finally:
        if notifier is not None:
            notifier.stop()
    sys.exit(int(status))


def _follow(
    followed: Any,
    cursor: Any,
    chosen: tuple[str, ...],
    run_burst: Any,
    health: Path,
    debounce: float,
    max_burst: float,
    grace: float,
    log: Any,
) -> ExitStatus:
    from nightowl.engine.session import close_live_transports
    from nightowl.watch.burst import BurstTracker
    from nightowl.watch.daemon import Watcher, WatchOptions
    from nightowl.watch.triggers import LineJudge

    options = WatchOptions(debounce=debounce, max_age=max_burst, grace=grace)
    tracker = BurstTracker(LineJudge(chosen), debounce, max_burst)
    watcher = Watcher(followed, cursor, tracker, run_burst, health, options, log, abort=close_live_transports)
    received: list[int] = []

    def on_signal(signum: int, _frame: Any) -> None:
        received.append(signum)
        watcher.stop.set()

    for number in (signal.SIGINT, signal.SIGTERM):
        signal.signal(number, on_signal)
    log(f"following {followed.name}; triggers: {', '.join(chosen)}", source=followed.name)
    watcher.follow()
    if watcher.failed:
        return ExitStatus.SOFTWARE
    if not received:
        return ExitStatus.OK
    log("stopped by SIGTERM" if signal.SIGTERM in received else "interrupted", source=followed.name)
    return ExitStatus.TERMINATED if signal.SIGTERM in received else ExitStatus.INTERRUPTED


def _notifier(path: Path | None) -> Any:
    """The notify targets of ``path`` (a serve-style config's `notify:` section), started; None without."""
    if path is None:
        return None
    import yaml

    from nightowl.receiver.notify import Notifier, parse_notify

    try:
        doc = yaml.safe_load(path.read_text()) or {}
        config = parse_notify(doc.get("notify") if isinstance(doc, dict) else None, str(path))
    except (OSError, ValueError, yaml.YAMLError) as exc:
        fail(f"cannot read the notify config: {exc}")
    if not config.targets:
        fail(f"{path}: no notify targets (a `notify:` section with chat or webhook)")
    notifier = Notifier(config)
    notifier.start()
    return notifier


def _open_source(file_path: Path | None, source: str, from_start: bool, state: Path) -> tuple[Any, Any]:
    """The source to follow and its saved position (one cursor file per source, under the state dir)."""
    import hashlib

    from nightowl.watch.state import Cursor

    if file_path is not None:
        from nightowl.watch.file_source import FileSource

        resolved = file_path.expanduser().absolute()
        key = hashlib.sha256(str(resolved).encode()).hexdigest()[:16]
        cursor = Cursor(state / f"file-{key}.json", f"file:{resolved}")
        return FileSource(resolved, cursor.load(), from_start), cursor
    if source in ("auto", "kmsg"):
        from nightowl.watch.kmsg_source import KMSG, KmsgSource

        cursor = Cursor(state / "kmsg.json", "kmsg")
        try:
            return KmsgSource(cursor.load()), cursor
        except OSError as exc:
            if source == "kmsg":
                fail(f"cannot read {KMSG}: {exc.strerror or exc}")
    import shutil

    from nightowl.watch.journal_source import JournalSource

    if shutil.which("journalctl") is None:
        fail("neither /dev/kmsg nor journalctl can be read: give --file PATH")
    cursor = Cursor(state / "journal.json", "journal")
    return JournalSource(cursor.load()), cursor


def _warm_up() -> None:
    """Import what a run needs now, not in the first burst's latency (seconds on a loaded node)."""
    import nightowl.collectors  # noqa: F401
    import nightowl.engine.session  # noqa: F401
    import nightowl.fleet.textfile  # noqa: F401
    import nightowl.redact  # noqa: F401
    import nightowl.reports.status_update  # noqa: F401
    from nightowl.postmortem.render import warm_templates

    warm_templates()


def _check_params(loaded: Any, values: dict[str, Any]) -> None:
    """Parameter errors at start (exit 2), never in the first run minutes later."""
    from nightowl.run import RunRefused, resolve_params

    try:
        resolve_params(loaded, values)
    except RunRefused as exc:
        fail(str(exc))


def _logger(emit: Any, node: str, runbook: str) -> Any:
    from nightowl.logline import LogLine

    def log(text: str, level: str = "info", **fields: Any) -> None:
        emit(LogLine(text, level=level, node=node, runbook=runbook, **fields))

    return log


def _probe(health: Path, max_age: float) -> ExitStatus:
    from nightowl.watch.state import health_age

    age, doc = health_age(health)
    if age is None or doc is None:
        click.echo(f"nightowl: no readable health file at {health}", err=True)
        return ExitStatus.ACTION_NEEDED
    if age > max_age or doc.get("state") == "stopped" or not doc.get("runner_alive", True):
        click.echo(f"nightowl: watch unhealthy: {doc.get('state')}, health file {age:.0f}s old", err=True)
        return ExitStatus.ACTION_NEEDED
    click.echo(f"watch {doc.get('state')}: {doc.get('source')}, {doc.get('lines_read')} lines, {doc.get('runs')} runs")
    return ExitStatus.OK
