"""A sweep as a library call: one runbook over many hosts into one bundle, with the fleet's view of it.

``sweep`` runs the hosts and returns a :class:`SweepResult`: the run's summary (docs/reference.md#run-json)
with what sets hosts apart (``fleet``), the failure domains they share (``domains``) and the circuit
breaker's state when nightowl has acted on nodes (``breaker``), the textfile written when asked, and what
could not be written. No click, no printing, no exit: `nightowl sweep` and `nightowl check` (nightowl/cli)
render the result and choose the exit status; the MCP server or a Python caller reads it as it is::

    from nightowl.fleet.sweep import local_transports, sweep
    from nightowl.library import runbooks

    result = sweep(runbooks.load("node-health"), local_transports(), Path("out"))
    print(result.summary["hosts"][0]["verdict"], result.needs_action)

The helpers that make a sweep's hosts are here too: an inventory's (``inventory_hosts``,
``inventory_transports``) and this node's under its own name (``local_transports``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from nightowl.engine.context import RunContext
    from nightowl.run import RunResult
    from nightowl.transports.dial import Dialer


class Runner(Protocol):
    """What runs the runbook on the hosts: ``nightowl.run.run_and_save`` behind this shape by default; the
    CLI hands in its own (``cli/running.run_or_exit``, which turns a refusal or an interrupt into an exit)."""

    def __call__(
        self,
        loaded: Any,
        transports: dict[str, Any],
        params: dict[str, Any],
        out_dir: Path,
        allow_invasive: bool,
        limits: dict[str, float | None] | None = None,
        **options: Any,
    ) -> RunResult: ...


@dataclass(frozen=True)
class SweepResult:
    """What a sweep concluded: ``summary`` (the run's JSON, with ``fleet``, ``domains`` and ``breaker``),
    ``run`` (the run's result: its per-host runs and bundle) and ``problems`` (what could not be written:
    the bundle, the textfile; each one line)."""

    summary: dict[str, Any]
    run: Any = None  # nightowl.run.RunResult
    problems: tuple[str, ...] = ()

    @property
    def hosts(self) -> list[dict[str, Any]]:
        """Each host's entry (host, status, verdict, error), in inventory order."""
        hosts: list[dict[str, Any]] = self.summary["hosts"]
        return hosts

    @property
    def needs_action(self) -> bool:
        """Some host's verdict asks for an action (its action is not ``none``)."""
        return any(h.get("verdict") and h["verdict"].get("action") != "none" for h in self.hosts)


def sweep(
    loaded: Any,
    transports: dict[str, Any],
    out_dir: Path,
    *,
    params: dict[str, Any] | None = None,
    limits: dict[str, float | None] | None = None,
    allow_invasive: bool = False,
    forks: int = 32,
    dialer: Dialer | None = None,
    domains: dict[str, dict[str, str]] | None = None,
    textfile: Path | None = None,
    run: Runner | None = None,
    history_store: Path | None = None,
    **hooks: Any,
) -> SweepResult:
    """Run a loaded runbook on the hosts of ``transports`` (name -> function opening its transport) into one
    bundle under ``out_dir``, and return what it concluded.

    ``params`` are the runbook's values, ``limits`` its command and host timeouts (``command_timeout``,
    ``host_timeout``). The dialer, when given, orders the hosts' starts and is closed here. ``domains`` maps a
    host to its failure domains (``HostSpec.domains``). ``textfile``: also write the node-exporter textfile
    there (atomically; a failure is one of the result's ``problems``), with the GPU incidents of the history
    store ``history_store`` (the caller's choice; None: none). ``hooks`` go to the run as they are:
    ``on_host_done`` (progress), ``engine`` (worker processes: nightowl/fleet/workers.py), ``cursors`` (read
    positions: nightowl/history/cursors.py). A fleet's bundle gets no postmortem draft: drafts are per
    incident (`nightowl postmortem`). ``run`` raises what ``nightowl.run.run_and_save`` raises (RunRefused,
    Interrupted) unless the caller hands in one that does otherwise.
    """
    runner = run or run_and_save
    try:
        start_order = dialer.start_order(transports) if dialer is not None else None
        result = runner(
            loaded,
            transports,
            params or {},
            out_dir,
            allow_invasive,
            limits,
            forks=forks,
            drafts=False,
            start_order=start_order,
            origin="schedule",  # check and sweep: what started the run, as its Outcome tells it
            **hooks,
        )
    finally:
        if dialer is not None:
            dialer.close()
    return concluded(result, domains, textfile, history_store)


def concluded(
    result: Any, domains: dict[str, dict[str, str]] | None, textfile: Path | None, history_store: Path | None = None
) -> SweepResult:
    """The fleet's view of a run (``RunResult``): its facts, shared failure domains and breaker, the
    textfile written when asked, and what could not be written."""
    from nightowl.fleet.actions_log import breaker_state, watched_path
    from nightowl.fleet.domains import fleet_domains, with_fact_domains
    from nightowl.fleet.outliers import fleet_facts

    summary = result.summary
    summary["fleet"] = fleet_facts(result.runs)
    memberships = with_fact_domains(domains or {}, summary["fleet"])
    summary["domains"] = fleet_domains(summary["hosts"], memberships, summary["fleet"]["xid_events"])
    breaker = breaker_state(watched_path())  # held scheduler actions (slurm, k8s): None when nightowl never acted
    if breaker is not None:
        summary["breaker"] = breaker
    problems = [summary["bundle_error"]] if summary.get("bundle_error") else []
    page_problem = write_sweep_page(getattr(result, "bundle", None), summary)
    if page_problem:
        problems.append(page_problem)
    if textfile:
        from nightowl.fleet.textfile import write_textfile

        try:
            write_textfile(textfile, summary, history_store)  # atomic: node-exporter never reads a half-written file
        except OSError as exc:
            problems.append(f"cannot write the textfile {textfile}: {exc.strerror or exc}")
    return SweepResult(summary, result, tuple(problems))


def write_sweep_page(bundle: Path | None, summary: dict[str, Any]) -> str | None:
    """The fleet page (``sweep --format html``'s) kept in the sweep's bundle, so ``serve`` can show the last
    sweep; None when written (or no bundle), else why not (the sweep's result stands without it)."""
    if bundle is None:
        return None
    from nightowl.engine import layout
    from nightowl.fleet.sweep_page import sweep_html

    try:
        (bundle / layout.SWEEP_PAGE).write_text(sweep_html(summary), encoding="utf-8")
    except OSError as exc:
        return f"cannot write the fleet page into {bundle}: {exc.strerror or exc}"
    return None


def run_and_save(
    loaded: Any,
    transports: dict[str, Any],
    params: dict[str, Any],
    out_dir: Path,
    allow_invasive: bool,
    limits: dict[str, float | None] | None = None,
    context: RunContext | None = None,
    **options: Any,
) -> RunResult:
    """``nightowl.run.run_and_save`` in the ``Runner`` shape: ``options`` are its settings (forks, drafts, ...) and
    hooks (on_host_done, start_order, engine, cursors) by name; ``context`` goes to it as it is. The CLI's
    ``run_or_exit`` runs through this too, so the two cannot sort the options differently."""
    from nightowl.run import RunHooks, RunSettings
    from nightowl.run import run_and_save as run_runbook_and_save

    limits = limits or {}
    switches = ("forks", "drafts", "status_update", "history", "redact", "origin")
    settings = {key: options.pop(key) for key in switches if key in options}
    return run_runbook_and_save(
        loaded,
        transports,
        out_dir,
        params=params,
        settings=RunSettings(
            allow_invasive=allow_invasive,
            command_timeout=limits.get("command_timeout"),
            host_timeout=limits.get("host_timeout"),
            **settings,
        ),
        hooks=RunHooks(**options),
        context=context,
    )


def local_transports() -> dict[str, Callable[[], Any]]:
    """This node under its own name (nightowl/fleet/identity.py), so a fleet of textfiles stays apart.
    Raises ValueError for an invalid $NODE_NAME."""
    from nightowl.fleet.identity import node_name
    from nightowl.transports.local import LocalTransport

    name = node_name()
    return {name: lambda: LocalTransport(name)}


def inventory_hosts(inventory: Path, limit: str | None, ssh_config: Path | None) -> list[Any]:
    """The inventory's hosts (``HostSpec``) after ``limit`` (a bad host is that host's problem, not the
    sweep's). Raises ValueError or OSError when the inventory cannot be read."""
    from nightowl.fleet.inventory import limit as limit_hosts
    from nightowl.fleet.inventory import load_inventory

    hosts = load_inventory(inventory, ssh_config, lenient=True)
    return limit_hosts(hosts, limit) if limit else hosts


def inventory_transports(
    hosts: list[Any], options: Any, forks: int, dial: bool = True
) -> tuple[dict[str, Any], Dialer | None, dict[str, dict[str, str]]]:
    """Each host with the function that opens its transport (``options``: transports.ssh.SSHOptions), the
    dialer that opens their TCP connections ahead of their sessions (nightowl/transports/dial.py; None when
    not ``dial``: worker processes dial their own), and their failure domains."""
    from nightowl.fleet.workers import HostOpener
    from nightowl.transports.dial import Dialer

    openers = {host.name: HostOpener(host, options) for host in hosts}
    domains = {host.name: host.domains for host in hosts if host.domains}
    if not dial:
        return openers, None, domains
    # Hosts behind a jump host are reached through it, one gate per jump host (transports/ssh.py): not dialed.
    direct = {name: target for name, opener in openers.items() if (target := opener.target) is not None}
    dialer = Dialer(direct, options.connect_timeout, window=2 * max(1, forks))
    return {n: o.dialing(dialer.taker(n)) for n, o in openers.items()}, dialer, domains
