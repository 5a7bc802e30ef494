"""`nightowl verify NODE --incident BUNDLE`: the gate before a node returns to service (docs/reference.md#verify)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import click

from nightowl.cli.common import INVASIVE_OPTION, TEXT_JSON_OPTION, limit_options, out_option, ssh_options
from nightowl.cli.exit import ExitStatus, fail
from nightowl.cli.node_actions import default_actions_log, node_cap_options, node_cap_or_exit

VERIFY_EXIT_HELP = """\b
Exit status:
  0    every check passed (and the node was resumed when --resume was given)
  1    a check failed: the repair did not take; the node stays out (recorded in the actions log)
  2    usage or input error (bad option, an incident bundle that is unreadable or not NODE's)
  3    cannot judge: a check could not be judged (nothing read, no verdict); the node stays out
  4    every check passed but the resume was held by the node's cap
       (--max-node-actions: it waits for a hardware ticket)
  5    every check passed but the resume failed or was refused (the actions log says why)
  130  interrupted (SIGINT); 143 terminated (SIGTERM): the partial bundle is saved"""
RESUME_HELD = 4  # as slurm resume says a resume held by a node's cap (docs/reference.md#node-cap)
RESUME_FAILED = 5  # as slurm resume and k8s condition say a failed or refused action (docs/reference.md#exit-status)


@click.command(epilog=VERIFY_EXIT_HELP)
@click.argument("node")
@click.option(
    "--incident",
    "incident_dir",
    required=True,
    type=click.Path(exists=True, file_okay=False, path_type=Path),
    help="the bundle of the incident that took NODE out (its verdict names the checks)",
)
@click.option("--host", "host_spec", help="how to reach NODE (an SSH spec) [default: NODE itself]")
@click.option(
    "--replay",
    type=click.Path(exists=True, file_okay=False, path_type=Path),
    help="a recorded host folder standing for NODE (tests, rehearsals)",
)
@click.option("--local", is_flag=True, help="NODE is this machine (a Slurm health check or a DaemonSet)")
@click.option(
    "--expected-gpus",
    type=click.IntRange(min=1),
    help="GPUs NODE should have [default: at least as many as the incident listed; needed when the incident was "
    "about the count]",
)
@click.option(
    "--resume",
    type=click.Choice(["slurm", "k8s"]),
    help="on a pass, return NODE to service: slurm (undrain nightowl's drain) or k8s (condition True)",
)
@click.option(
    "--actions-log",
    type=click.Path(dir_okay=False, path_type=Path),
    help="the hash-chained actions log [default: $NIGHTOWL_ACTIONS_LOG, else actions.jsonl in the state dir]",
)
@node_cap_options
@INVASIVE_OPTION
@limit_options
@out_option("where the verify bundle goes [default: $NIGHTOWL_OUT, else ~/.local/state/nightowl/bundles]")
@TEXT_JSON_OPTION
@ssh_options
def verify(
    node: str,
    incident_dir: Path,
    host_spec: str | None,
    replay: Path | None,
    local: bool,
    expected_gpus: int | None,
    resume: str | None,
    actions_log: Path | None,
    max_node_actions: int | None,
    node_actions_window: str,
    allow_invasive: bool,
    limits: dict[str, float | None],
    out_dir: Path | None,
    fmt: str,
    ssh: Any,
) -> None:
    """Check NODE before it returns to service after the incident in BUNDLE.

    Runs the checks the incident verdict's action calls for (nightowl/knowledge/verify_checks.csv): no
    Xid, SXid or fallen-off-bus line the incident bundle did not hold; every GPU readable and as many as
    expected; no row remap or page retirement pending; NVLink fabric registration Completed/Success; and
    node-health's own verdict needing no action. Writes its own bundle (a node-health run whose manifest
    `verify` key cites the incident bundle's id and sha256, with every check). On a pass, --resume returns
    NODE to service with a reason naming both bundles; a failed verify keeps it out and is recorded in
    the actions log (docs/reference.md#verify) and counts toward --max-node-actions (a node over that cap is
    held for a hardware ticket, never resumed here: docs/reference.md#node-cap). --allow-invasive first runs
    DCGM diagnostics level 2 on the drained node (the gpu-diag runbook, minutes of GPU load, in a bundle of its
    own that the report cites): its failure fails the verify, no result makes it cannot judge.
    """
    from nightowl.fleet import verify as gate

    if sum(bool(x) for x in (host_spec, replay, local)) > 1:
        fail("give at most one of --host, --replay and --local")
    cap = node_cap_or_exit(max_node_actions, node_actions_window)
    try:
        incident = gate.read_incident(incident_dir, node)
    except gate.IncidentError as exc:
        fail(str(exc))
    transports = _transports(node, host_spec, replay, local, ssh)
    report = _run(node, incident, transports, expected_gpus, allow_invasive, limits, out_dir)
    log = actions_log or default_actions_log()
    status = _act(report, incident, resume, log, cap)
    _print(report, fmt)
    sys.exit(status)


def _transports(node: str, host_spec: str | None, replay: Path | None, local: bool, ssh: Any) -> dict[str, Any]:
    """NODE under its own name however it is reached, so its bundle folder and the incident's agree."""
    if replay is not None:
        from nightowl.transports.replay import ReplayTransport

        return {node: lambda: ReplayTransport(replay, node)}
    if local:
        from nightowl.transports.local import LocalTransport

        return {node: lambda: LocalTransport(node)}
    from nightowl.transports import open_transport

    spec, options = host_spec or node, ssh.options()
    return {node: lambda: open_transport(spec, options)}


def _run(
    node: str,
    incident: Any,
    transports: dict[str, Any],
    expected_gpus: int | None,
    allow_invasive: bool,
    limits: dict[str, float | None],
    out_dir: Path | None,
) -> dict[str, Any]:
    """node-health on NODE through the one way runbooks run; the checks are judged as the host finishes, so
    the verify bundle's manifest holds them (``verify``: incident, checks, result)."""
    from nightowl.cli.common import load_runbook_or_exit
    from nightowl.cli.running import report_bundle_problems, run_or_exit
    from nightowl.fleet import verify as gate
    from nightowl.paths import default_out_dir

    names = gate.checks_for(incident.verdict)
    record: dict[str, Any] = {"node": node, "incident": incident.cite(), "checks": [], "result": gate.CANNOT_JUDGE}
    diagnosed: list[dict[str, str]] = []
    if allow_invasive:  # the stress first, then the health pass reads the node after it
        diagnosed, record["diag"] = _diagnose(transports, limits, out_dir)

    def judged(run: Any) -> None:
        facts = {c.namespace: c.facts for c in run.collections.values()}
        status = {c.namespace: c.status for c in run.collections.values()}
        evidence = gate.Evidence(node, facts, run.verdict, expected_gpus, status)
        record["checks"] = gate.judge(names, evidence, incident) + diagnosed
        record["result"] = gate.outcome(record["checks"])

    params = {"expected_gpus": expected_gpus} if expected_gpus is not None else {}
    result = run_or_exit(
        load_runbook_or_exit("node-health"),
        transports,
        params,
        out_dir or default_out_dir(),
        False,  # the health pass is read-only; --allow-invasive's DCGM diagnostics ran before it (gpu-diag)
        limits,
        extra_manifest={"verify": record},
        on_host_done=judged,
    )
    if report_bundle_problems(result):
        sys.exit(int(ExitStatus.USAGE))
    host = result.hosts[0] if result.hosts else {}
    if not record["checks"] or host.get("status") == "unreachable":
        record["checks"] = [{"check": "reach", "result": "cannot-judge", "why": host.get("error") or "no run"}]
        record["result"] = gate.CANNOT_JUDGE
    from nightowl.history.extract import bundle_sha256

    assert result.bundle is not None
    return {
        **record,
        "bundle": str(result.bundle),
        "bundle_id": result.bundle.name,
        "bundle_sha256": bundle_sha256(result.bundle),
    }


DIAG_LEVEL = 2  # dcgmi diag level of verify --allow-invasive: PCIe, NVLink, memory and targeted tests, minutes


def _diagnose(
    transports: dict[str, Any], limits: dict[str, float | None], out_dir: Path | None
) -> tuple[list[dict[str, str]], dict[str, Any]]:
    """The gpu-diag runbook (DCGM diagnostics, invasive) on the node, in its own bundle: the ``dcgm-diag`` check
    (pass on diag-passed, fail on diag-failed, cannot-judge otherwise) and the bundle it rests on."""
    from nightowl.cli.common import load_runbook_or_exit
    from nightowl.cli.running import run_or_exit
    from nightowl.history.extract import bundle_sha256
    from nightowl.paths import default_out_dir

    params = {"dcgm_level": DIAG_LEVEL}
    run = run_or_exit(load_runbook_or_exit("gpu-diag"), transports, params, out_dir or default_out_dir(), True, limits)
    host = run.hosts[0] if run.hosts else {}
    verdict = host.get("verdict") or {}
    result = {"diag-passed": "pass", "diag-failed": "fail"}.get(str(verdict.get("id")), "cannot-judge")
    why = verdict.get("summary") or host.get("error") or "no result"
    cite = {"bundle": str(run.bundle) if run.bundle else None, "verdict": verdict.get("id"), "level": DIAG_LEVEL}
    if run.bundle is not None:
        cite.update(id=run.bundle.name, sha256=bundle_sha256(run.bundle))
    return [{"check": "dcgm-diag", "result": result, "why": str(why)[:500]}], cite


def _act(report: dict[str, Any], incident: Any, resume: str | None, log: Path, cap: Any) -> int:
    """Record the verify in the actions log; on a pass with --resume, return the node to service unless the
    node's cap holds it (a failed verify counts toward that cap: its line names the incident's verdict)."""
    from nightowl.fleet import actions_log
    from nightowl.fleet import verify as gate

    node = report["node"]
    reason = gate.resume_reason(node, report["bundle_id"], report["bundle_sha256"], incident)
    failed = "; ".join(f"{c['check']}: {c['why']}" for c in report["checks"] if c["result"] != "pass")
    cited = incident.cite()
    kept = (
        f"verify {report['result']} on {node} after incident {incident.id} [{cited['verdict']} -> {cited['action']}] "
        f"(kept out): {failed}"
    )
    why = reason if report["result"] == gate.PASSED else kept
    entry = {"node": node, "what": "verify", "bundle": report["bundle"], "bundle_sha256": report["bundle_sha256"]}
    actions_log.append(log, {**entry, "why": why, "result": f"verify-{report['result']}"})
    report["resume"] = None
    if cap is not None and report["result"] == gate.FAILED and cited["verdict"]:
        report["node_cap"] = _tally(log, node, str(cited["verdict"]), cap)
    if report["result"] == gate.FAILED:
        return int(ExitStatus.ACTION_NEEDED)
    if report["result"] != gate.PASSED:
        return int(ExitStatus.NO_VERDICT)
    if resume is None:
        return int(ExitStatus.OK)
    report["resume"] = _resume(resume, node, report, reason, log, cap)
    if report["resume"].get("result") == "held":
        return RESUME_HELD
    done = report["resume"].get("result") in ("resumed", "unchanged", "set")
    return int(ExitStatus.OK) if done else RESUME_FAILED


def _tally(log: Path, node: str, family: str, cap: Any) -> dict[str, Any]:
    """The node's count for the incident's fault family, this failed verify included; its action is a hardware
    ticket once the count is over the cap."""
    import time

    from nightowl.fleet import actions_log, node_caps

    tally = node_caps.count(actions_log.read(log), node, family, cap, time.time())
    return tally.as_json(node_caps.TICKET if tally.count > cap.max_actions else None)


def _resume(how: str, node: str, report: dict[str, Any], reason: str, log: Path, cap: Any) -> dict[str, Any]:
    """Through the scheduler's own nightowl action (slurm resume, k8s condition): never a second way."""
    try:
        if how == "slurm":
            from nightowl.fleet.slurm_actions import Slurm, resume

            return resume(Slurm(), node, log, node_cap=cap)
        from nightowl.fleet.breaker import Caps
        from nightowl.fleet.k8s_condition import Kubectl, set_condition

        passed = {"host": node, "status": "ok", "verdict": {"id": "verified", "action": "none", "summary": reason}}
        condition = {"hosts": [passed], "run_id": report["bundle_id"], "bundle": report["bundle"]}
        return set_condition(Kubectl(), node, condition, 0, Caps(), log, node_cap=cap)
    except Exception as exc:  # noqa: BLE001 - a scheduler error is this resume's outcome, logged and reported
        from nightowl.fleet import actions_log

        entry = {"node": node, "what": "resume", "bundle": report["bundle"], "bundle_sha256": report["bundle_sha256"]}
        return actions_log.append(log, {**entry, "why": f"{type(exc).__name__}: {exc}", "result": "failed"})


def _print(report: dict[str, Any], fmt: str) -> None:
    if fmt == "json":
        import json

        click.echo(json.dumps(report, indent=2))
        return
    from nightowl.safetext import printable

    incident = report["incident"]
    lines = [
        f"verify {report['node']} after incident {incident['id']} ({incident['verdict']} -> {incident['action']}): "
        f"{report['result'].upper()}"
    ]
    lines += [f"  {c['check']}: {c['result']} ({c['why']})" for c in report["checks"]]
    if report.get("note"):
        lines.append(f"  note: {report['note']}")
    if report.get("node_cap") and report["node_cap"].get("action"):
        tally = report["node_cap"]
        lines.append(f"  node cap: {tally['count']} of at most {tally['max_node_actions']}: {tally['action']}")
    resumed = report.get("resume")
    if resumed:
        lines.append(f"  resume: {resumed.get('result')} ({resumed.get('why')})")
    lines.append(f"bundle: {report['bundle']}")
    click.echo(printable("\n".join(lines)))
