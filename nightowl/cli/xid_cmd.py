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
    from nightowl.collectors.gpu import kernel_log, xid_catalog

    result = to_jsonable(kernel_log.parse(file.read()))
    rows = [_row(xid_catalog.explain(e), e) for e in _explained_events(result)]
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


# Event kinds listed besides Xids: every one the kernel-log parser names (other_nvrm only with a sub-kind).
_LISTED_KINDS = frozenset({"xid", "sxid", "fallen_off_bus", "gpu_reset_required", "fabric_manager"})


# other_nvrm sub-kind -> the kind of nightowl/knowledge/kernel_patterns.csv that judges it.
_PATTERN_KIND_OF_SUBKIND: dict[str, str] = {
    "driver_mismatch": "driver_mismatch",
    "driver_conflict": "driver_conflict",
    "rm_init_adapter_failed": "rm_init_failed",
    "gsp_boot_failed": "rm_init_failed",
    "probe_failed": "rm_init_failed",
    "pci_resource_invalid": "rm_init_failed",
    "gsp_heartbeat_timeout": "gsp_timeout",
    "gsp_timeout": "gsp_timeout",
}


def _explained_events(result: dict[str, Any]) -> list[dict[str, Any]]:
    """Events, then host-error records and hung tasks, in the shape explain() reads.

    The parser keeps a message without its ``NVRM:`` tag and an AER report's severity on its detail
    lines; the pattern table matches whole lines, so both are put back before matching.
    """
    events: list[dict[str, Any]] = []
    for event in result["events"]:
        kind, subkind = event["kind"], event.get("subkind")
        if kind == "pcie_aer":
            text = "\n".join([str(event.get("text") or ""), *(event.get("lines") or [])])
            events.append(
                {**event, "kind": "aer", "text": text, "subkind": f"pcie_aer {event.get('severity') or ''}".strip()}
            )
        elif kind == "other_nvrm" and subkind and subkind != "driver_load":
            pattern_kind = _PATTERN_KIND_OF_SUBKIND.get(subkind, kind)
            events.append({**event, "kind": pattern_kind, "text": "NVRM: " + str(event.get("text") or "")})
        elif kind in _LISTED_KINDS:
            events.append(event)
    for record in result.get("host_errors") or []:
        text = str(record.get("text") or "")
        if record.get("source") == "ghes" and record.get("severity"):
            # the record's opener says nothing of its severity; the pattern table keys on the severity line
            text = f"{{0}}[Hardware Error]: event severity: {record['severity']}"
        where = record.get("dimm") or record.get("pci")
        label = f"{record.get('source')} {record.get('severity') or ''}".strip()
        events.append({"kind": "edac", "time": record.get("time"), "pci": where, "code": None, "text": text,
                       "count": record.get("count", 1), "subkind": label})  # fmt: skip
    for task in result.get("hung_tasks") or []:
        text = f"INFO: task {task.get('task')}:{task.get('pid')} blocked for more than {task.get('seconds')} seconds"
        after = "; ".join(
            f"after Xid {', '.join(map(str, codes))} on {pci}" for pci, codes in (task.get("after_xids") or {}).items()
        )
        label = f"hung task {task.get('task')}" + (f" ({after})" if after else "")
        events.append({"kind": "hung_task", "time": task.get("time"), "pci": None, "code": None, "text": text,
                       "count": 1, "subkind": label})  # fmt: skip
    return events


def _row(explained: dict[str, Any], event: dict[str, Any]) -> dict[str, Any]:
    label = event.get("subkind") or explained.get("mnemonic") or str(event.get("kind"))
    row = {**explained, "count": event.get("count", 1), "label": label}
    if event.get("kind") == "hung_task" and "after Xid 45" in label:
        # Xid 45 then tasks stuck in D state: a wedged driver (https://github.com/leptonai/gpud/pull/117)
        row.update(action="reboot-node", first_step="wedged driver: drain the node and reboot it (a GPU reset "
                   "cannot succeed while tasks are stuck in the driver)")  # fmt: skip
    return row
