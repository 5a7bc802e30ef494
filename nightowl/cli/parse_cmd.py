"""`nightowl parse KIND FILE`: any saved output to JSON."""

from __future__ import annotations

import json
from typing import Any

import click

from nightowl.cli.common import fail


@click.command("parse")
@click.argument("kind", metavar="KIND")
@click.argument("file", type=click.File("r", errors="replace"))
def parse_cmd(kind: str, file: Any) -> None:
    """Parse a saved command output (FILE, or - for stdin) and print JSON.

    \b
    KIND is a collector kind (docs/reference.md#kinds): nvidia-smi, kernel-log, nccl-log,
    nccl-tests, metrics, engine-log. Also: nvidia-smi-query, nvlink,
    nvlink-errors, gpu-topology, dcgmi-diag, dcgmi-diag-drained, nccl-ras,
    nccl-tests-run, container-state, bench-serve, known-answer, dev-shm,
    cpu-governor, replica-health, replica-models, replica-metrics, stream-probe,
    kernel-log-boots, ib-ports, fabric, fabric-manager, free-space.
    Runbooks also collect xid-judgement, pcie-attribution, metrics-window,
    replica-compare, busbw-judgement, gpu-history, ib-ports-window,
    nvlink-errors-window and xid-nvlink5, derived from other collectors' facts
    (they read no file).

    The facts each kind gives runbook conditions (name, type, meaning) are listed in
    docs/reference.md#kinds; `nightowl runbook validate` rejects any other.
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
