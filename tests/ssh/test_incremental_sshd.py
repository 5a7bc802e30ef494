"""An Xid written on a host between two sweeps is in the second sweep's verdict, every time (issue 46), over real
OpenSSH servers whose `journalctl` keeps a real cursor and whose `dmesg` keeps a real ring
(tests/history/cursor_standins.py); the second sweep fetches only what followed the first."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from nightowl.cli.main import main
from nightowl.engine.incremental import CARRIED
from tests.history.cursor_standins import Journal, Ring
from tests.history.test_cursor_read import BOOT, XID79
from tests.ssh.conftest import cursor_fleet

NAMES = ["journal-node", "ring-node"]


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    yield from cursor_fleet(tmp_path_factory, NAMES)


def sweep(fleet: Any, tmp_path: Path, round_: int) -> tuple[dict[str, Any], Path]:
    out = tmp_path / f"round-{round_}"
    inventory = fleet.write_inventory(tmp_path / "hosts.yaml", NAMES)
    args = ["sweep", "--history", str(tmp_path / "history.sqlite3"), "--inventory", str(inventory)]
    args += ["--known-hosts", str(fleet.known_hosts), "--ssh-config", str(fleet.ssh_config)]
    args += ["--identity", str(fleet.client_key), "--workers", "1", "--format", "json", "--out", str(out)]
    result = CliRunner().invoke(main, args, catch_exceptions=False)
    assert result.exit_code in (0, 1), result.output
    (bundle,) = out.iterdir()
    return json.loads(result.output), bundle


@pytest.mark.integration
def test_an_xid_written_between_two_sweeps_is_in_the_second(
    fleet: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))  # no test reads the developer's ~/.ssh or agent
    monkeypatch.delenv("SSH_AUTH_SOCK", raising=False)
    journal = Journal(fleet.host_dir("journal-node") / "journal.json")
    journal.add(*BOOT)
    Journal(fleet.host_dir("ring-node") / "journal.json")  # no entries: read from the ring
    ring = Ring(fleet.host_dir("ring-node") / "ring.json")
    ring.add("Linux version 6.8.0", "NVRM: loading NVIDIA UNIX x86_64 Kernel Module  550.54.15")
    first, _ = sweep(fleet, tmp_path, 1)
    assert [h["verdict"]["id"] for h in first["hosts"]] == ["healthy", "healthy"]
    journal.add(XID79)
    ring.add(XID79.split("kernel: ", 1)[1])
    second, bundle = sweep(fleet, tmp_path, 2)
    assert [h["verdict"]["id"] for h in second["hosts"]] == ["gpu-fell-off-bus", "gpu-fell-off-bus"]
    carried = json.loads((bundle / CARRIED).read_text())["hosts"]
    assert {host: entry["kernel-log"]["read"] for host, entry in carried.items()} == dict.fromkeys(NAMES, "incremental")
    assert carried["ring-node"]["kernel-log"]["state"]["source"] == "dmesg"
    fetched = (bundle / "hosts" / "journal-node" / "kernel-log.out").read_text().splitlines()
    assert fetched[1] == XID79 and len(fetched) == 3  # the entry read last, the new one, the cursor
