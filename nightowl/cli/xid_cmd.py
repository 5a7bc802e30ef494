"""`nightowl xid`: each Xid of a kernel log with its meaning and NVIDIA's first action."""

from __future__ import annotations

import json
from typing import Any

import click

from nightowl.cli.common import TEXT_JSON_OPTION


@click.command()
@click.argument("file", required=False, type=click.File("r", errors="replace"), default="-")
@TEXT_JSON_OPTION
def xid(file: Any, fmt: str) -> None:
    """Explain the Xid/SXid events of a kernel log (FILE or stdin), and the GPU and host
    failures that are not Xids.

    One line per event: time, PCI address, code (or kind), meaning and the documented
    first action. Unknown codes say "look up", never "ignore". Besides Xids and SXids:
    RmInitAdapter/GSP failures, driver conflicts and mismatches, GPUs lost or needing a
    reset, PCIe AER, EDAC/MCE/GHES host errors and hung tasks (their sources:
    docs/sources.md and nightowl/knowledge/kernel_patterns.csv).
    Example: dmesg -T | nightowl xid
    """
    from nightowl.collectors.base import to_jsonable
    from nightowl.collectors.gpu import kernel_log, kernel_patterns, xid_catalog

    result = to_jsonable(kernel_log.COLLECTOR.parse(file.read()))  # the collector strips terminal escapes
    rows = [xid_catalog.event_row(e) for e in kernel_patterns.judged_events(result)]
    if fmt == "json":
        click.echo(json.dumps({"events": rows, "warnings": result["warnings"]}, indent=2, default=str))
        return
    if not rows:
        click.echo("no Xid, SXid or other GPU/host error events found")
    for row in rows:
        code = f"{row['kind'].upper()} {row['code']}" if row.get("code") is not None else row["label"]
        count = f" (x{row['count']})" if row.get("count", 1) and row.get("count", 1) > 1 else ""
        click.echo(
            f"{row.get('time') or '-'}  {row.get('pci') or '-'}  {code}{count}  "
            f"{row.get('mnemonic') or '?'}: {row.get('meaning') or 'unknown code'}  "
            f"-> {row['action']}: {row['first_step']}"
        )
