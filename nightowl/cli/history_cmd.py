"""`nightowl history`: the store's timeline, the repeat offenders (`--top`), and `history import BUNDLE...`."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click

from nightowl.cli.common import HISTORY_OPTION, format_option
from nightowl.cli.exit import EXIT_HELP, ExitStatus, fail
from nightowl.safetext import one_line


def _store() -> Path:
    from nightowl.cli.common import history_path

    path = history_path()
    if path is None:
        fail("history is off (--history off or NIGHTOWL_HISTORY=off)")
    return path


@click.group(invoke_without_command=True, epilog=EXIT_HELP)
@click.option("--host", help="only this host")
@click.option("--gpu", help="only this GPU: bus id (0000:a1:00) or UUID")
@click.option("--since", metavar="AGE", help="only the last AGE (90m, 24h, 30d)")
@click.option("--top", is_flag=True, help="the repeat offenders: host and GPU by distinct Xid/SXid incidents")
@format_option("table", "json", help="a table for people, json for scripts")
@HISTORY_OPTION
@click.pass_context
def history(ctx: click.Context, host: str | None, gpu: str | None, since: str | None, top: bool, fmt: str) -> None:
    """The history store: every recorded Xid/SXid, GPU and host fault, and every verdict, oldest first.

    Every triage, sweep, check and serve capture records its bundle here when it completes (the events
    with counts and first/last time, the GPUs with bus id and UUID, the verdict, the boot id, the
    bundle id and sha256); `nightowl history import BUNDLE...` backfills from saved bundles. The same
    event seen twice is one row. An unreadable store is a warning, and runs judge without it.
    """
    if ctx.invoked_subcommand is not None:
        return
    from nightowl.ages import parse_age
    from nightowl.history import StoreError, query

    seconds = None
    if since is not None:
        seconds = parse_age(since)
        if seconds is None:
            fail(f"--since {since!r}: expected an age such as 90m, 24h or 30d")
    path = _store()
    try:
        rows = query.top(path, seconds) if top else query.timeline(path, host, gpu, seconds)
    except StoreError as exc:
        click.echo(f"nightowl: warning: history store unreadable (no history): {exc}", err=True)
        rows = []
    if fmt == "json":  # default=str: a stored cell of a type the schema does not say (a blob) is printed as text
        click.echo(json.dumps({"store": str(path), "top" if top else "timeline": rows}, indent=2, default=str))
    else:
        click.echo(_top_table(rows) if top else _timeline_table(rows))
    ctx.exit(int(ExitStatus.OK))


def _table(header: list[str], rows: list[list[Any]]) -> str:
    """The rows as aligned columns; every cell one printable line (an imported host name can carry an OSC 52
    clipboard write or a newline: issue "trust, round four", item 11)."""
    cells = [header] + [["-" if v is None else one_line(str(v)) for v in row] for row in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(header))]
    return "\n".join("  ".join(v.ljust(w) for v, w in zip(row, widths, strict=True)).rstrip() for row in cells)


def _timeline_table(rows: list[dict[str, Any]]) -> str:
    if not rows:
        return "no history recorded"
    body = []
    for r in rows:
        what = r["what"] if r["code"] is None else f"{r['what']} {r['code']}"
        if r["what"] == "verdict":
            what = f"verdict {r['code']} -> {r['action']}"
        elif r.get("detail"):
            what += f": {r['detail']}"
        elif isinstance(r["count"], int) and r["count"] > 1:
            what += f" x{r['count']}"
        body.append([r["time"], r["host"], r["gpu"], what, (r["boot_id"] or "")[:8] or None, r["bundle_id"]])
    return _table(["TIME", "HOST", "GPU", "WHAT", "BOOT", "BUNDLE"], body)


def _top_table(rows: list[dict[str, Any]]) -> str:
    if not rows:
        return "no repeat offenders recorded"
    body = [
        [r["host"], r["gpu"], r["uuid"], r["incidents"], r["codes"], r["boots"], r["first_time"], r["last_time"]]
        for r in rows
    ]
    return _table(["HOST", "GPU", "UUID", "INCIDENTS", "CODES", "BOOTS", "FIRST", "LAST"], body)


@history.command("import", epilog=EXIT_HELP)
@click.argument("bundles", nargs=-1, required=True, type=click.Path(exists=True, file_okay=False, path_type=Path))
@HISTORY_OPTION
def import_cmd(bundles: tuple[Path, ...]) -> None:
    """Backfill the store from saved bundles; importing one twice adds nothing.

    Each bundle is verified first, as `postmortem --verify` does (every file against its manifest's
    sha256; its own sha256 computed from manifest.json), and only regular files are read (no link
    followed, a size cap). Not imported, with a line naming the bundle and the field: a bundle that does
    not verify, a partial one (an interrupted run), a malformed manifest or verdicts.json, and a bundle id
    already recorded with another sha256. Exits 2 when any bundle was not imported or the store cannot be
    written (the others are still imported).
    """
    from nightowl.history import StoreError, intake, store

    path = _store()
    problems: list[str] = []
    for bundle in bundles:
        try:
            added = intake.import_bundle(bundle, path)
        except (intake.RefusedBundle, store.ConflictingBundle) as exc:
            problems.append(f"{exc}" if str(exc).startswith(str(bundle)) else f"{bundle}: {exc}")
        except StoreError as exc:
            problems.append(f"{bundle}: history store unusable, not imported: {exc}")
        except Exception as exc:  # noqa: BLE001 - one hostile bundle never costs the others their import
            problems.append(f"{bundle}: not imported: {type(exc).__name__}: {exc}")
        else:
            click.echo(f"{bundle}: {added} new event(s)")
            continue
        click.echo(f"{bundle}: not imported")
    for problem in problems:
        click.echo(f"nightowl: {one_line(problem)}", err=True)
    raise SystemExit(int(ExitStatus.USAGE if problems else ExitStatus.OK))
