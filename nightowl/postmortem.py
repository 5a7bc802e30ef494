"""Render the postmortem draft of a bundle from a Jinja2 template in ``templates/``."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from nightowl.paths import data_dir


def _read_json(path: Path) -> Any:
    return json.loads(path.read_text()) if path.exists() else None


def _stamp(epoch: float | None) -> str:
    if epoch is None:
        return "?"
    return time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(epoch)) + f".{int((epoch % 1) * 1000):03d}Z"


def bundle_context(bundle: Path) -> dict[str, Any]:
    """Everything the template needs, read from the bundle alone."""
    from nightowl.engine.bundle import sha256_file

    verdicts = _read_json(bundle / "verdicts.json") or {"hosts": []}
    trace = _read_json(bundle / "trace.json") or {"hosts": []}
    manifest = _read_json(bundle / "manifest.json") or {"commands": []}
    files = (
        [
            {"path": p.relative_to(bundle).as_posix(), "sha256": sha256_file(p), "bytes": p.stat().st_size}
            for p in sorted((bundle / "hosts").rglob("*"))
            if p.is_file()
        ]
        if (bundle / "hosts").is_dir()
        else []
    )
    timeline = sorted(
        (
            {
                "time": c["start"],
                "when": _stamp(c["start"]),
                "clock": "nightowl",
                "what": f"{c['host']}: ran `{' '.join(c['argv'])}` -> "
                + ("timed out" if c.get("timed_out") else f"exit {c.get('exit_code')}"),
            }
            for c in manifest.get("commands", [])
        ),
        key=lambda e: e["time"],
    )
    mermaid = {}
    runbook_file = bundle / "runbook.yaml"
    if runbook_file.exists():
        from nightowl.engine.validate import RunbookInvalid, load_runbook

        try:
            loaded = load_runbook(runbook_file)
        except RunbookInvalid:
            loaded = None
        if loaded is not None:
            from nightowl.engine.mermaid import to_mermaid

            for host in verdicts.get("hosts", []):
                mermaid[host["host"]] = to_mermaid(loaded.runbook, host.get("path"))
    return {
        "bundle": verdicts.get("run_id") or bundle.name,
        "runbook": verdicts.get("runbook"),
        "run_id": verdicts.get("run_id"),
        "hosts": verdicts.get("hosts", []),
        "trace": {h["host"]: h for h in trace.get("hosts", [])},
        "manifest": manifest,
        "files": files,
        "timeline": timeline,
        "mermaid": mermaid,
        "started": _stamp(manifest.get("started")),
        "partial": manifest.get("partial", False),
    }


def render_bundle(bundle: Path, template: str | None = None) -> str:
    from jinja2 import Environment, FileSystemLoader, StrictUndefined

    template_path = Path(template) if template and Path(template).is_file() else None
    folder = template_path.parent if template_path else data_dir("templates")
    name = template_path.name if template_path else (template or "postmortem.md.j2")
    env = Environment(
        loader=FileSystemLoader(str(folder)),
        undefined=StrictUndefined,
        autoescape=False,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
    )
    env.filters["tojson_compact"] = lambda v: json.dumps(v, default=str)[:300]
    return env.get_template(name).render(**bundle_context(bundle))
