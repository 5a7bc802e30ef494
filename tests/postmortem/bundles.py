"""Bundles of real recorded incidents (fixtures/hosts/*), made with the engine's own front door."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from nightowl.paths import data_dir

HOSTS = data_dir("fixtures") / "hosts"
ALERTS = data_dir("fixtures") / "alerts"
HEX64 = re.compile(r"\b[0-9a-f]{64}\b")


def make_bundle(
    out: Path,
    hosts: list[str],
    runbook: str = "xid",
    extra_manifest: dict[str, Any] | None = None,
    host_root: Path = HOSTS,
) -> Path:
    from nightowl.collectors import get_collector
    from nightowl.engine.runner import RunOptions
    from nightowl.engine.session import run_runbook
    from nightowl.library import runbooks
    from nightowl.postmortem import render_bundle
    from nightowl.redact import scrub_secrets
    from nightowl.transports.replay import ReplayTransport

    loaded = runbooks.load(runbook)
    defaults = {k: p.default for k, p in loaded.runbook.parameters.items()}
    transports = {h: (lambda d=host_root / h: ReplayTransport(d, d.name)) for h in hosts}
    _runs, bundle = run_runbook(
        loaded,
        transports,
        get_collector,
        RunOptions(params=defaults),
        out,
        render_postmortem=render_bundle,
        redact=scrub_secrets,
        extra_manifest=extra_manifest,
    )
    return bundle


def manifest_hashes(bundle: Path) -> dict[str, str]:
    return {f["path"]: f["sha256"] for f in json.loads((bundle / "manifest.json").read_text())["files"]}


def evidence_rows(markdown: str) -> dict[str, tuple[str, str]]:
    """E-id -> (path, sha256) from the draft's Evidence table."""
    rows = {}
    for line in markdown.split("## Evidence", 1)[1].splitlines():
        match = re.match(r"\| (E\d+) \| `([^`]+)` \|.*\| `([0-9a-f]{64})` \|$", line)
        if match:
            rows[match.group(1)] = (match.group(2), match.group(3))
    return rows


def section(markdown: str, title: str) -> str:
    return markdown.split(f"## {title}", 1)[1].split("\n## ", 1)[0]


def rehearsed_bundle(out: Path, runbook: str, starts: str) -> tuple[Path, dict[str, Any]]:
    """The bundle (the one folder made under ``out``) of ``runbook``'s rehearsal case whose name starts with
    ``starts``, replayed as the rehearsal replays it, and the triage summary of that run."""
    from nightowl.engine.bundle_summary import triage_summary
    from nightowl.library.rehearse import rehearsal_cases, replay_case

    case = next(c for c in rehearsal_cases(runbook) if c["name"].startswith(starts))
    runs = replay_case(runbook, case, out_dir=out)
    (bundle,) = [p for p in out.iterdir() if p.is_dir()]
    return bundle, triage_summary(runbook, bundle.name, bundle, runs)
