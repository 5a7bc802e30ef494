"""`nightowl bundles`: the bundles in the output folder, newest first; `--prune AGE` deletes old ones."""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path
from typing import Any

import click

from nightowl.cli.common import DEFAULT_OUT_HELP, TEXT_JSON_OPTION, out_option, parse_age
from nightowl.cli.exit import fail
from nightowl.paths import default_out_dir


def _read(path: Path) -> dict[str, Any]:
    """A bundle's JSON object; {} when it is unreadable, not a regular file or corrupt, so one bad
    bundle never hides the rest."""
    from nightowl.postmortem.bundle_reader import _read_json

    return _read_json(path) or {}


def bundle_rows(out_dir: Path) -> list[dict[str, Any]]:
    """One row per bundle (a folder with a manifest.json), newest first."""
    from nightowl.engine import layout
    from nightowl.postmortem.bundle_reader import sane_manifest, sane_verdicts

    rows: list[dict[str, Any]] = []
    if not out_dir.is_dir():
        return rows
    for folder in out_dir.iterdir():
        if folder.name.startswith(".") or folder.is_symlink() or not (folder / layout.MANIFEST).is_file():
            continue
        manifest = _read(folder / layout.MANIFEST)
        verdicts = _read(folder / layout.VERDICTS)
        # A bundle folder may have come from anywhere: every field read as untrusted input.
        manifest, verdicts = sane_manifest(manifest), sane_verdicts(verdicts)
        hosts = verdicts["hosts"]
        started = manifest.get("started")
        rows.append(
            {
                "run_id": folder.name,
                "path": str(folder),
                "started": started if started is not None else folder.stat().st_mtime,
                "runbook": manifest.get("runbook") or verdicts.get("runbook"),
                "hosts": [h["host"] for h in hosts],
                "verdicts": [_verdict(h).get("id") or f"({h.get('status')})" for h in hosts],
                "actions": sorted({str(_verdict(h).get("action") or "-") for h in hosts}),
                "alert": (manifest.get("alert") or {}).get("name"),
                "partial": bool(manifest.get("partial")),
            }
        )
    return sorted(rows, key=lambda r: r["started"], reverse=True)


def _verdict(host: dict[str, Any]) -> dict[str, Any]:
    verdict = host.get("verdict")
    return verdict if isinstance(verdict, dict) else {}


def _holds_evidence(folder: Path) -> bool:
    """An interrupted run's folder with any recorded output: kept by --prune (delete it by hand)."""
    from nightowl.engine import layout

    hosts = folder / layout.HOSTS
    return hosts.is_dir() and any(p.is_file() and p.stat().st_size > 0 for p in hosts.rglob("*"))


def prune(out_dir: Path, max_age: float, dry_run: bool, now: float | None = None) -> list[str]:
    """Delete bundles started more than ``max_age`` seconds ago, and stale unfinished ``.*.partial`` folders.

    A partial bundle (an interrupted run) or an unfinished folder that holds evidence is kept: it may be the
    only record of an incident.
    """
    now = time.time() if now is None else now
    rows = bundle_rows(out_dir)
    doomed = [
        Path(r["path"])
        for r in rows
        if now - r["started"] > max_age and not (r["partial"] and _holds_evidence(Path(r["path"])))
    ]
    doomed = _uncited(doomed, [Path(r["path"]) for r in rows])
    if out_dir.is_dir():
        doomed += [
            p
            for p in out_dir.glob(".*.partial")
            if p.is_dir() and not p.is_symlink() and now - p.stat().st_mtime > max_age and not _holds_evidence(p)
        ]
    for path in doomed:
        if not dry_run:
            shutil.rmtree(path)
    return [str(p) for p in doomed]


def _uncited(doomed: list[Path], bundles: list[Path]) -> list[Path]:
    """``doomed`` less every bundle a kept one's carried.json cites, and what those cite in turn: an incremental
    read's facts came from them (docs/reference.md#incremental-reads)."""
    from nightowl.engine.incremental import cited_bundles

    going = {p.name for p in doomed}
    kept = [p for p in bundles if p.name not in going]
    while kept:
        cited = {name for folder in kept for name in cited_bundles(folder)} & going
        going -= cited
        kept = [p for p in doomed if p.name in cited]
    return [p for p in doomed if p.name in going]


def _when(epoch: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%SZ", time.gmtime(epoch))


@click.command()
@out_option(f"where the bundles are [default: {DEFAULT_OUT_HELP}]")
@click.option("--prune", "prune_age", metavar="AGE", help="delete bundles older than AGE (e.g. 30d, 12h, 90m)")
@click.option("--dry-run", is_flag=True, help="with --prune: list what would be deleted, delete nothing")
@click.option("--limit", default=20, show_default=True, help="how many bundles to list (0: all)")
@TEXT_JSON_OPTION
def bundles(out_dir: Path | None, prune_age: str | None, dry_run: bool, limit: int, fmt: str) -> None:
    """List recent bundles: time, runbook, host, verdict, first action, the alert that started it.

    With --prune AGE, delete bundles (and unfinished .partial folders) older than AGE first; an interrupted
    run's partial bundle that holds evidence is kept (delete it by hand once it is no longer needed).
    """
    out_dir = out_dir or default_out_dir()
    removed: list[str] = []
    if prune_age:
        try:
            removed = prune(out_dir, parse_age(prune_age), dry_run)
        except ValueError as exc:
            fail(str(exc))
    rows = bundle_rows(out_dir)
    shown = rows[:limit] if limit > 0 else rows
    if fmt == "json":
        click.echo(
            json.dumps(
                {"out": str(out_dir), "bundles": shown, "pruned": removed, "dry_run": dry_run}, indent=2, default=str
            )
        )
        return
    for path in removed:
        click.echo(f"{'would delete' if dry_run else 'deleted'} {path}")
    if not rows:
        click.echo(f"no bundles in {out_dir}")
        return
    click.echo(f"{'started (UTC)':20}  {'runbook':12}  {'host':24}  {'verdict':28}  {'action':16}  run")
    for row in shown:
        click.echo(
            f"{_when(row['started']):20}  {str(row['runbook'] or '?'):12}  "
            f"{', '.join(map(str, row['hosts'])) or '-':24}  {', '.join(row['verdicts']) or '-':28}  "
            f"{', '.join(row['actions']):16}  {row['run_id']}"
            + (f"  (alert {row['alert']})" if row["alert"] else "")
            + ("  (partial)" if row["partial"] else "")
        )
    if len(rows) > len(shown):
        click.echo(f"... {len(rows) - len(shown)} older bundle(s); --limit 0 lists all")
