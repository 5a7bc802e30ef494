"""The `nightowl` command. A thin layer: parse options, call the engine, print.

Heavy modules (engine, paramiko, jinja2, networkx, pydantic) are imported inside
the commands so `nightowl --help` answers at once.
"""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path
from typing import Any

import click

from nightowl import __version__
from nightowl.cli.exit import EXIT_HELP, ExitStatus, fail, status_for
from nightowl.cli.options import SSHArgs, limit_options, ssh_options
from nightowl.paths import default_out_dir

DEFAULT_OUT = default_out_dir()
FORMAT_OPTION = click.option(
    "--format",
    "fmt",
    type=click.Choice(["text", "json"]),
    default="text",
    show_default=True,
    help="text for people, json for scripts (CONTRACT s4)",
)
OUT_OPTION = click.option(
    "--out",
    "out_dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help=f"where bundles go [default: $NIGHTOWL_OUT, else {DEFAULT_OUT}; with --alert, the rules file's `out`]",
)


@click.group(context_settings={"help_option_names": ["-h", "--help"]}, epilog=EXIT_HELP)
@click.version_option(__version__, prog_name="nightowl")
def main() -> None:
    """nightowl: incident runbooks for GPU servers and LLM-serving fleets.

    Runs read-only collectors (nvidia-smi, kernel log, engine metrics, NCCL logs) on hosts,
    walks a decision tree, prints the verdict with its evidence and the first action,
    and saves an evidence bundle before anyone restarts anything.
    """


def load_runbook_or_exit(name: str) -> Any:
    from nightowl import runbooks
    from nightowl.engine.validate import RunbookInvalid

    try:
        return runbooks.load(name)
    except FileNotFoundError as exc:
        fail(str(exc))
    except RunbookInvalid as exc:
        fail(f"invalid runbook:\n{exc}")
    return None


def parse_params(pairs: tuple[str, ...]) -> dict[str, Any]:
    import yaml

    params: dict[str, Any] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            fail(f"--param expects KEY=VALUE, got {pair!r}")
        params[key] = yaml.safe_load(value)
    return params


def run_to_summary(
    loaded: Any,
    transports: dict[str, Any],
    params: dict[str, Any],
    out_dir: Path,
    allow_invasive: bool,
    forks: int = 16,
    limits: dict[str, float | None] | None = None,
    postmortem: bool = True,
    on_host_done: Any = None,
) -> dict[str, Any]:
    """Run a runbook (secrets scrubbed from the bundle) and return the CONTRACT s4 summary.

    An interrupt exits 130 after the partial bundle is saved.
    """
    from nightowl.collectors import get_collector
    from nightowl.engine.bundle import triage_summary
    from nightowl.engine.runner import RunOptions
    from nightowl.engine.session import Interrupted, run_runbook
    from nightowl.postmortem import render_bundle
    from nightowl.redact import scrub_secrets

    try:
        values = loaded.resolve_params(params)
    except ValueError as exc:
        fail(str(exc))
    limits = limits or {}
    options = RunOptions(
        params=values,
        allow_invasive=allow_invasive,
        command_timeout=limits.get("command_timeout"),
        host_timeout=limits.get("host_timeout"),
    )
    try:
        runs, bundle = run_runbook(
            loaded,
            transports,
            get_collector,
            options,
            out_dir,
            forks=forks,
            on_host_done=on_host_done,
            render_postmortem=render_bundle if postmortem else None,
            redact=scrub_secrets,
        )
    except Interrupted as exc:
        click.echo(f"nightowl: interrupted; partial bundle saved at {exc.bundle}", err=True)
        sys.exit(int(ExitStatus.INTERRUPTED))
    summary = triage_summary(loaded.id, bundle.name, bundle, runs)
    summary["_runs"] = runs
    return summary


def run_and_report(
    loaded: Any,
    transports: dict[str, Any],
    params: dict[str, Any],
    fmt: str,
    out_dir: Path | None,
    allow_invasive: bool,
    limits: dict[str, float | None] | None = None,
) -> ExitStatus:
    from nightowl.cli.render import json_report, text_report

    summary = run_to_summary(loaded, transports, params, out_dir or DEFAULT_OUT, allow_invasive, limits=limits)
    summary.pop("_runs")
    click.echo(json_report(summary) if fmt == "json" else text_report(summary))
    return status_for(summary["hosts"])


@main.command()
@FORMAT_OPTION
@OUT_OPTION
@click.option(
    "--case",
    default="xid79-fallen-off-bus",
    show_default=True,
    help="which bundled recorded host to replay (see fixtures/hosts/)",
)
def demo(fmt: str, out_dir: Path | None, case: str) -> None:
    """Run the xid runbook on a bundled recorded incident host.

    The host is a real incident from a public bug report: a GPU that fell off the
    bus (Xid 79) and an nvidia-smi that can no longer read it. Prints the verdict,
    why, the first action and the bundle path.
    """
    from nightowl.paths import data_dir

    host_dir = data_dir("fixtures") / "hosts" / case
    if not host_dir.is_dir():
        fail(f"no recorded host {case!r} in {host_dir.parent}")
    loaded = load_runbook_or_exit("xid")
    from nightowl.transports.replay import ReplayTransport

    transports = {case: lambda: ReplayTransport(host_dir, case)}
    sys.exit(int(run_and_report(loaded, transports, {}, fmt, out_dir, allow_invasive=False)))


@main.command(epilog=EXIT_HELP)
@click.argument("runbook", required=False)
@click.option(
    "--host",
    "hosts",
    multiple=True,
    metavar="SPEC",
    help="host to run on: `local`, `ssh://user@host:port?jump=bastion`, or a name from ~/.ssh/config",
)
@click.option(
    "--replay",
    "replays",
    multiple=True,
    type=click.Path(exists=True, file_okay=False, path_type=Path),
    help="recorded host directory (CONTRACT s5) to run on instead of a live host; a bundle works too",
)
@click.option("--param", "params", multiple=True, metavar="KEY=VALUE", help="runbook parameter")
@click.option("--allow-invasive", is_flag=True, help="also run collectors that load GPUs or the network")
@click.option(
    "--alert",
    "alert_file",
    type=click.File("r"),
    help="an Alertmanager or PagerDuty webhook payload (JSON): triage what its rules map it to",
)
@click.option(
    "--config",
    "alert_config",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="with --alert: the `nightowl serve` rules file (alert -> runbook and host)",
)
@ssh_options
@limit_options
@FORMAT_OPTION
@OUT_OPTION
def triage(
    runbook: str | None,
    hosts: tuple[str, ...],
    replays: tuple[Path, ...],
    params: tuple[str, ...],
    allow_invasive: bool,
    alert_file: Any,
    alert_config: Path | None,
    ssh: SSHArgs,
    command_timeout: float | None,
    host_timeout: float | None,
    fmt: str,
    out_dir: Path | None,
) -> None:
    """Run RUNBOOK on live hosts (--host) or recorded ones (--replay).

    Only read-only collectors run unless --allow-invasive is given. The evidence
    bundle is written before the verdict is printed. With --alert FILE --config RULES,
    the alert payload names the runbook and hosts, as `nightowl serve` would.
    """
    if alert_file is not None:
        sys.exit(int(triage_alert(alert_file, alert_config, fmt, out_dir)))
    if runbook is None:
        fail("give a RUNBOOK (or --alert FILE --config RULES)")
    if not hosts and not replays:
        fail("give at least one --host or --replay")
    loaded = load_runbook_or_exit(runbook)
    transports = replay_transports(replays)
    ssh_settings = ssh.options() if hosts else None
    for spec in hosts:
        transports[spec] = _opener(spec, ssh_settings)
    limits = {"command_timeout": command_timeout, "host_timeout": host_timeout}
    sys.exit(int(run_and_report(loaded, transports, parse_params(params), fmt, out_dir, allow_invasive, limits=limits)))


def triage_alert(alert_file: Any, config_path: Path | None, fmt: str, out_dir: Path | None) -> ExitStatus:
    """`triage --alert`: what the receiver does with a delivery, done now, in the foreground."""
    from nightowl.alerts import ConfigError, load_config
    from nightowl.serve import triage_alert_payload

    if config_path is None:
        fail("--alert needs --config RULES (the `nightowl serve` rules file)")
    try:
        payload = json.load(alert_file)
        config = load_config(config_path, out_dir, for_receiver=False)
    except (ValueError, ConfigError) as exc:
        fail(str(exc))
    results = [capture.to_json() for capture in triage_alert_payload(payload, config)]
    if fmt == "json":
        click.echo(json.dumps({"captures": results}, indent=2, default=str))
    else:
        for item in results:
            verdict = item.get("verdict") or {}
            click.echo(
                f"{item.get('alert') or '?'} -> {item.get('runbook') or '-'} on "
                f"{item.get('host') or '-'}: {item['status']}"
                + (f", {verdict.get('id')} -> {verdict.get('action')}" if verdict else "")
                + (f" ({item['reason']})" if item.get("reason") else "")
                + (f"\n  bundle: {item['bundle']}" if item.get("bundle") else "")
            )
    return status_for([{"verdict": r.get("verdict")} for r in results if r.get("status") == "captured"])


def _opener(spec: str, ssh_options: Any) -> Any:
    from nightowl.transports import open_transport

    return lambda: open_transport(spec, ssh_options)


def replay_transports(replays: tuple[Path, ...]) -> dict[str, Any]:
    """Recorded hosts: a host directory, or a bundle (every host in its hosts/)."""
    from nightowl.transports.replay import ReplayTransport

    transports: dict[str, Any] = {}
    for directory in replays:
        host_dirs = (
            sorted(p for p in (directory / "hosts").iterdir() if p.is_dir())
            if (directory / "hosts").is_dir()
            else [directory]
        )
        for host_dir in host_dirs:
            transports[host_dir.name] = lambda d=host_dir: ReplayTransport(d, d.name)
    return transports


@main.command("parse")
@click.argument("kind", metavar="KIND")
@click.argument("file", type=click.File("r", errors="replace"))
def parse_cmd(kind: str, file: Any) -> None:
    """Parse a saved command output (FILE, or - for stdin) and print JSON.

    \b
    KIND is a collector kind. CONTRACT s3: nvidia-smi, kernel-log, nccl-log,
    nccl-tests, metrics, engine-log. Also: nvidia-smi-query, nvlink,
    nvlink-errors, gpu-topology, dcgmi-diag, dcgmi-diag-drained, nccl-ras,
    nccl-tests-run, container-state, bench-serve, known-answer, dev-shm,
    cpu-governor. Runbooks also collect xid-judgement, metrics-window and
    busbw-judgement, derived from other collectors' facts (they read no file).
    """
    from nightowl.collectors import UnknownCollector, available_kinds, get_collector
    from nightowl.collectors.base import to_jsonable

    try:
        collector = get_collector(kind)
    except (UnknownCollector, ModuleNotFoundError):
        fail(f"unknown kind {kind!r}; one of: {', '.join(available_kinds())}")
    text = file.read()
    try:
        result = to_jsonable(collector.parse(text))
    except Exception as exc:  # noqa: BLE001 - the contract promises JSON whenever the file was read
        result = {"kind": kind, "warnings": [f"parser failed: {type(exc).__name__}: {exc}"]}
    click.echo(json.dumps(result, indent=2, default=str))


@main.command()
@click.argument("file", required=False, type=click.File("r", errors="replace"), default="-")
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True)
def xid(file: Any, fmt: str) -> None:
    """Explain the Xid/SXid events of a kernel log (FILE or stdin).

    One line per event: time, PCI address, code, meaning and NVIDIA's documented
    first action. Unknown codes say "look up", never "ignore".
    Example: dmesg -T | nightowl xid
    """
    from nightowl.collectors.base import to_jsonable
    from nightowl.collectors.gpu import kernel_log, xid_catalog

    result = to_jsonable(kernel_log.parse(file.read()))
    rows = [xid_catalog.explain(e) for e in result["events"] if e["kind"] in ("xid", "sxid", "fallen_off_bus")]
    if fmt == "json":
        click.echo(json.dumps({"events": rows, "warnings": result["warnings"]}, indent=2, default=str))
        return
    if not rows:
        click.echo("no Xid or SXid events found")
    for row in rows:
        code = f"{row['kind'].upper()} {row['code']}" if row.get("code") is not None else row["kind"]
        count = f" (x{row['count']})" if row.get("count", 1) and row.get("count", 1) > 1 else ""
        click.echo(
            f"{row.get('time') or '-'}  {row.get('pci') or '-'}  {code}{count}  "
            f"{row.get('mnemonic') or '?'}: {row.get('meaning') or 'unknown code'}  "
            f"-> {row['action']}: {row['first_step']}"
        )


@main.command()
@click.argument("runbook")
@click.option("--host", "hosts", multiple=True, required=True, metavar="SPEC", help="host spec(s)")
@click.option("--allow-invasive", is_flag=True, help="plan invasive collectors too")
@click.option("--param", "params", multiple=True, metavar="KEY=VALUE", help="runbook parameter")
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True)
def plan(runbook: str, hosts: tuple[str, ...], allow_invasive: bool, params: tuple[str, ...], fmt: str) -> None:
    """Dry run: the graph, and per host the exact commands RUNBOOK would run. Connects to nothing."""
    from nightowl.collectors import get_collector
    from nightowl.engine.mermaid import to_mermaid
    from nightowl.engine.session import plan as plan_steps

    loaded = load_runbook_or_exit(runbook)
    try:
        steps = plan_steps(loaded, get_collector, allow_invasive, parse_params(params))
    except ValueError as exc:  # an undeclared --param
        fail(str(exc))
    if fmt == "json":
        click.echo(json.dumps({"runbook": loaded.id, "hosts": [{"host": h, "steps": steps} for h in hosts]}, indent=2))
        return
    click.echo(to_mermaid(loaded.runbook))
    for host in hosts:
        click.echo(f"{host}:")
        for step in steps:
            note = ""
            if step["skipped"]:
                note = (
                    " (skipped: invasive, needs --allow-invasive)"
                    if step["invasive"]
                    else " (skipped: unset parameter)"
                )
            if step["derived_from"]:
                click.echo(
                    f"  [{step['node']}] {step['collector']}: runs no command; derived from "
                    + ", ".join(step["derived_from"])
                )
                continue
            alternatives = "  |or|  ".join(shlex.join(argv) for argv in step["commands"] or step["declared"])
            click.echo(f"  [{step['node']}] {step['collector']}: {alternatives}  (timeout {step['timeout']}s){note}")


from nightowl.cli.bench_cmd import bench  # noqa: E402
from nightowl.cli.bundles_cmd import bundles  # noqa: E402
from nightowl.cli.floor_cmd import floor  # noqa: E402
from nightowl.cli.kv_size_cmd import kv_size  # noqa: E402
from nightowl.cli.postmortem_cmd import postmortem  # noqa: E402
from nightowl.cli.runbook_cmd import runbook_group  # noqa: E402
from nightowl.cli.serve_cmd import serve  # noqa: E402
from nightowl.cli.sweep_cmd import check, sweep  # noqa: E402

main.add_command(runbook_group)
main.add_command(sweep)
main.add_command(check)
main.add_command(kv_size)
main.add_command(postmortem)
main.add_command(serve)
main.add_command(bundles)
main.add_command(bench)
main.add_command(floor)
