"""The sweep's GPUS column names every GPU with a finding and the codes each logged (issue 45 item 7): on the
recorded host whose GPU 0a:00 failed to initialise while 07:00 logged a double-bit error (Xid 48) and a failed
page retirement (Xid 64), the row reads ``0a:00, 07:00 48+64``, not 0a:00 alone. A real sweep over replays."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from nightowl.fleet.table import GPUS_WIDTH, gpus_cell
from nightowl.paths import data_dir
from tests.fleet.replay_sweep import node_health_sweep

HOSTS = data_dir("fixtures") / "hosts"


def sweep(tmp_path: Path, fmt: str, recorded: dict[str, str]) -> str:
    node_health_sweep(tmp_path, {name: HOSTS / folder for name, folder in recorded.items()}, fmt, forks=2)
    return fmt


def column(table: str, name: str) -> dict[str, str]:
    header, *rows = table.split("\n\n", 1)[0].splitlines()
    start, end = header.index(name), header.index("PORTS")
    return {row.split()[0]: row[start:end].strip() for row in rows}


def test_the_gpus_column_names_every_gpu_with_a_finding_and_its_codes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    sweep(tmp_path, "table", {"dbe": "xid48-xid64-dbe", "off-bus": "xid79-fallen-off-bus", "ok": "healthy-l40s"})
    cells = column(capsys.readouterr().out, "GPUS")
    assert cells == {"dbe": "0a:00, 07:00 48+64", "off-bus": "a1:00 79", "ok": "-"}
    sweep(tmp_path, "json", {"dbe": "xid48-xid64-dbe"})
    (host,) = json.loads(capsys.readouterr().out)["hosts"]
    assert host["verdict"]["gpus"] == ["0000:0a:00", "0000:07:00"]  # the verdict's list, as the contract has it


def test_a_wide_gpus_cell_drops_the_codes_then_counts() -> None:
    eight = [f"0000:{n:02x}:00" for n in range(8)]
    with_codes = {"gpus": eight, "other_gpus": [{"gpu": g, "xids": [48, 64, 94], "action": "x"} for g in eight]}
    assert gpus_cell(with_codes) == ", ".join(g[5:] for g in eight)  # 8 addresses fit, their codes do not
    many = {"gpus": [f"0001:{n:02x}:00" for n in range(8)]}
    cell = gpus_cell(many)
    assert cell.endswith(" +4") and len(cell) <= GPUS_WIDTH and cell.startswith("0001:00:00, ")
