"""`nightowl runbook ...`: authoring commands."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import click

from nightowl.cli.exit import ExitStatus, fail


@click.group("runbook")
def runbook_group() -> None:
    """Author runbooks: list, show, validate, graph (Mermaid), test (rehearse), schema (JSON Schema)."""


@runbook_group.command("list")
def list_cmd() -> None:
    """List the runbooks a name reaches: site folders (see --runbook-path) first, then the built-ins."""
    import yaml

    from nightowl.cli.common import runbook_library

    library = runbook_library()
    refused = library.refused()
    for name, path in library.all_paths().items():
        if name in refused:
            click.echo(f"{name:<20} (refused: {refused[name]})")
            continue
        try:
            title = (yaml.safe_load(path.read_text()) or {}).get("title", "")
        except yaml.YAMLError:
            title = "(invalid YAML)"
        click.echo(f"{name:<20} {title}")


@runbook_group.command("show")
@click.argument("runbook")
def show_cmd(runbook: str) -> None:
    """Print a runbook's YAML as it runs (built-in name or path), the nodes of fragments it includes written in.

    An invalid runbook is printed as written, and stderr says so (`runbook validate` says why)."""
    from nightowl.cli.common import runbook_library
    from nightowl.engine.validate import RunbookInvalid

    library = runbook_library()
    try:
        text = library.resolve(runbook).read_text()
    except OSError as exc:
        fail(str(exc))
    # an invalid runbook is shown as written (`runbook validate` says what is wrong with it), and stderr says
    # so; a valid one as it runs and its bundle keeps it, an `include:`d fragment's nodes written in
    try:
        text = library.load(runbook).as_ran()
    except (RunbookInvalid, OSError, ValueError):
        click.echo(f"nightowl: {runbook} is not valid, shown as written (nightowl runbook validate says why)", err=True)
    click.echo(text, nl=False)  # a closed pipe is the reader's choice, not an unreadable runbook


@runbook_group.command("validate")
@click.argument("paths", nargs=-1)
def validate_cmd(paths: tuple[str, ...]) -> None:
    """Check runbooks (schema, graph, expressions, facts); no PATHS checks the built-ins.

    Each problem is printed as FILE:LINE: [node NODE] MESSAGE; exit 2 if any.
    """
    from nightowl.cli.common import runbook_library
    from nightowl.engine.validate import RunbookInvalid
    from nightowl.library import runbooks

    library = runbook_library()
    targets = list(paths) or [str(p) for p in runbooks.builtin_paths().values()]
    bad = 0
    for target in targets:
        try:
            loaded = library.load(target)
        except FileNotFoundError as exc:
            click.echo(f"{target}: {exc}", err=True)
            bad += 1
            continue
        except RunbookInvalid as exc:
            click.echo(str(exc), err=True)
            bad += 1
            continue
        click.echo(f"ok  {loaded.path}  ({len(loaded.runbook.nodes)} nodes)")
    sys.exit(int(ExitStatus.USAGE if bad else ExitStatus.OK))


@runbook_group.command("graph")
@click.argument("runbook")
@click.option(
    "--path",
    "bundle",
    type=click.Path(exists=True, file_okay=False, path_type=Path),
    help="a bundle: mark the path its first host (or --host) took",
)
@click.option("--host", help="which host of the bundle")
def graph_cmd(runbook: str, bundle: Path | None, host: str | None) -> None:
    """Draw RUNBOOK as a Mermaid flowchart."""
    from nightowl.cli.common import load_runbook_or_exit
    from nightowl.engine.mermaid import to_mermaid

    loaded = load_runbook_or_exit(runbook)
    path = None
    if bundle is not None:
        path = _bundle_path(bundle, host, loaded)
    click.echo(to_mermaid(loaded.runbook, path), nl=False)


def _bundle_path(bundle: Path, host: str | None, loaded: Any) -> list[str]:
    """The path a bundle's host took, read as untrusted input: exit 2 when the bundle is not readable,
    has no such host, or ran another runbook (its path would mark nodes this runbook does not have)."""
    from nightowl.engine import layout
    from nightowl.postmortem.bundle_reader import _read_json, sane_verdicts

    raw = _read_json(bundle / layout.VERDICTS)
    if raw is None:
        fail(f"{bundle}: no readable verdicts.json (is it a bundle?)")
    verdicts = sane_verdicts(raw)
    chosen = [h for h in verdicts["hosts"] if host is None or h["host"] == host]
    if not chosen:
        fail(f"no host {host!r} in {bundle}" if host else f"{bundle}: no host in verdicts.json")
    ran = verdicts.get("runbook")
    if ran and ran != loaded.runbook.id:
        fail(f"{bundle} is a run of runbook {ran!r}, not {loaded.runbook.id!r}: draw it with `runbook graph {ran}`")
    path = chosen[0]["path"]
    unknown = [node for node in path if node not in loaded.runbook.nodes]
    if unknown:
        fail(f"{bundle}: its path visits {', '.join(unknown[:3])}, which runbook {loaded.runbook.id!r} does not have")
    return path


@runbook_group.command("test")
@click.argument("runbooks_", metavar="[RUNBOOK]...", nargs=-1)
@click.option(
    "--ablate",
    is_flag=True,
    help="also replay each rehearsal with every recorded output removed, then emptied: none may come back healthier",
)
@click.option(
    "--rehearsals",
    type=click.Path(exists=True, path_type=Path),
    help="rehearsal file, or folder of RUNBOOK.yaml files, to use instead of the ones found by name",
)
def test_cmd(runbooks_: tuple[str, ...], ablate: bool, rehearsals: Path | None) -> None:
    """Rehearse runbooks on recorded hosts; exit 1 on a miss, 2 on a rehearsal file that cannot be read.

    A runbook's rehearsals are read from --rehearsals (a file, or a folder of RUNBOOK.yaml), else from
    rehearsals/RUNBOOK.yaml beside a site runbook, else from the built-in fixtures/rehearsals/RUNBOOK.yaml.
    """
    from nightowl.cli.common import runbook_library
    from nightowl.engine.validate import RunbookInvalid
    from nightowl.library import runbooks
    from nightowl.library.rehearse import RehearsalFileError, ablate_cases, rehearsal_cases, rehearse

    library = runbook_library()
    names = list(runbooks_) or list(runbooks.builtin_paths())
    reachable = library.all_paths()
    try:
        cases = {name: rehearsal_cases(name, rehearsals, library) for name in names if name in reachable}
        for name in cases:
            library.load(name)  # an invalid runbook is an input error naming file and line, not a crash
    except (RehearsalFileError, RunbookInvalid) as exc:
        fail(str(exc))
    unknown = [name for name in names if not cases.get(name)]
    if unknown:  # "0 passed, 0 failed" for a typo would read as success
        known = ", ".join(n for n in reachable if _has_rehearsals(n, rehearsals, library))
        fail(f"no rehearsals for {', '.join(unknown)} (runbooks with rehearsals: {known or 'none'})")
    failed = total = 0
    for name in names:
        for case in cases[name]:
            total += 1
            result = rehearse(name, case, library=library)
            mark = "PASS" if result.passed else "FAIL"
            click.echo(f"{mark}  {name}: {result.name} -> {result.verdict or 'no verdict (cannot judge)'}")
            for problem in result.problems:
                click.echo(f"      {problem}")
            failed += not result.passed
    click.echo(f"{total - failed} passed, {failed} failed")
    if ablate:
        runs, findings = ablate_cases(names, rehearsals, library=library)
        for f in findings:
            click.echo(f"ABLATION  {f.runbook}: {f.case} [{f.host}/{f.output} {f.mode}] {f.problem}")
        click.echo(f"{runs} ablated runs, {len(findings)} healthier than the full recording or crashed")
        failed += len(findings)
    sys.exit(int(ExitStatus.ACTION_NEEDED if failed else ExitStatus.OK))


@runbook_group.command("schema")
def schema_cmd() -> None:
    """Print the runbook JSON Schema, for an editor's YAML language server.

    \b
    nightowl runbook schema > runbook.schema.json
    then, first line of a runbook:
    # yaml-language-server: $schema=runbook.schema.json
    (docs/runbook-schema.md: VS Code and other editors)
    """
    from nightowl.library import runbooks

    click.echo(json.dumps(runbooks.json_schema(), indent=2, ensure_ascii=False))


def _has_rehearsals(name: str, given: Path | None, library: Any = None) -> bool:
    """Whether ``name`` has rehearsals to list beside an unknown one (an unreadable file counts as none)."""
    from nightowl.library.rehearse import RehearsalFileError, rehearsal_cases

    try:
        return bool(rehearsal_cases(name, given, library))
    except RehearsalFileError:
        return False
