"""`nightowl sweep --every` over real OpenSSH servers (issue 46): one process sweeps round after round over the
connections its first round opened, and an Xid written on a host between two rounds is in the next round's
verdict, read from where the last round stopped."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.history.cursor_standins import Journal
from tests.history.test_cursor_read import BOOT, XID79
from tests.ssh.conftest import cursor_fleet

NAMES = ["every-a", "every-b"]


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    yield from cursor_fleet(tmp_path_factory, NAMES)


def reports(stdout: str) -> list[dict[str, Any]]:
    """Each round's JSON report, one document after another."""
    decoder, found, rest = json.JSONDecoder(), [], stdout.strip()
    while rest:
        report, end = decoder.raw_decode(rest)
        found.append(report)
        rest = rest[end:].strip()
    return found


def sweep_writing_an_xid(fleet: Any, tmp_path: Path, rounds: int, after: int, host: str) -> tuple[str, list[str]]:
    """`sweep --every 4 --rounds N` over both hosts, whose journals hold a clean boot, and ``host``'s an Xid 79
    written once round ``after`` said it was done (its line comes before its report, the next round 4 s after
    its start): the reports printed, and what it said on stderr."""
    journals = {name: Journal(fleet.host_dir(name) / "journal.json") for name in NAMES}
    for journal in journals.values():
        journal.add(*BOOT)
    inventory = fleet.write_inventory(tmp_path / "hosts.yaml", NAMES)
    argv = ["sweep", "--history", str(tmp_path / "history.sqlite3"), "--inventory", str(inventory)]
    argv += ["--known-hosts", str(fleet.known_hosts), "--ssh-config", str(fleet.ssh_config)]
    argv += ["--identity", str(fleet.client_key), "--format", "json", "--out", str(tmp_path / "bundles")]
    argv += ["--every", "4", "--rounds", str(rounds)]
    env = {k: v for k, v in os.environ.items() if k != "SSH_AUTH_SOCK"} | {"HOME": str(tmp_path)}
    code = "import sys; from nightowl.cli.main import main; sys.exit(main())"
    child = subprocess.Popen(
        [sys.executable, "-c", code, *argv], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env
    )
    assert child.stderr is not None
    said = []
    for line in child.stderr:
        said.append(line)
        if line.startswith(f"nightowl: round {after}:"):
            journals[host].add(XID79)
            break
    stdout, rest = child.communicate(timeout=120)
    said.append(rest)
    assert child.returncode == 1, "".join(said)  # the last round's status: a host needs action
    return stdout, said


@pytest.mark.integration
def test_rounds_reuse_their_connections_and_see_an_xid_written_between_them(fleet: Any, tmp_path: Path) -> None:
    stdout, said = sweep_writing_an_xid(fleet, tmp_path, rounds=2, after=1, host="every-b")
    first, second = reports(stdout)
    assert [h["verdict"]["id"] for h in first["hosts"]] == ["healthy", "healthy"]
    assert [h["verdict"]["id"] for h in second["hosts"]] == ["healthy", "gpu-fell-off-bus"]
    assert (first["round"]["connections_opened"], first["round"]["connections_reused"]) == (2, 0)
    assert (second["round"]["connections_opened"], second["round"]["connections_reused"]) == (0, 2)
    carried = json.loads((Path(second["bundle"]) / "carried.json").read_text())["hosts"]
    assert {host: entry["kernel-log"]["read"] for host, entry in carried.items()} == dict.fromkeys(NAMES, "incremental")
    assert first["bundle"] != second["bundle"]  # a bundle per round


@pytest.mark.integration
def test_the_first_round_over_workers_then_one_process_keeps_the_connections(fleet: Any, tmp_path: Path) -> None:
    """--workers 2: the first round (every host read in full) over worker processes, whose connections end with
    them; the second opens its own in the sweeping process, the third reuses them."""
    for name in NAMES:
        Journal(fleet.host_dir(name) / "journal.json").add(*BOOT)
    inventory = fleet.write_inventory(tmp_path / "hosts.yaml", NAMES)
    argv = ["sweep", "--history", str(tmp_path / "history.sqlite3"), "--inventory", str(inventory)]
    argv += ["--known-hosts", str(fleet.known_hosts), "--ssh-config", str(fleet.ssh_config)]
    argv += ["--identity", str(fleet.client_key), "--format", "json", "--out", str(tmp_path / "bundles")]
    argv += ["--every", "1", "--rounds", "3", "--workers", "2"]
    env = {k: v for k, v in os.environ.items() if k != "SSH_AUTH_SOCK"} | {"HOME": str(tmp_path)}
    code = "import sys; from nightowl.cli.main import main; sys.exit(main())"
    done = subprocess.run([sys.executable, "-c", code, *argv], capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 0, done.stderr
    rounds = [(r["round"]["connections_opened"], r["round"]["connections_reused"]) for r in reports(done.stdout)]
    assert rounds == [(0, 0), (2, 0), (0, 2)]
    assert all(h["verdict"]["id"] == "healthy" for r in reports(done.stdout) for h in r["hosts"])


def links_within(bundle: Path) -> int:
    """The files of ``bundle`` that are a second (or later) name of a file it already holds."""
    inodes = [path.stat().st_ino for path in bundle.rglob("*") if path.is_file()]
    return len(inodes) - len(set(inodes))


@pytest.mark.integration
def test_reads_asked_every_round_come_in_batches_and_an_xid_written_between_rounds_is_still_seen(
    fleet: Any, tmp_path: Path
) -> None:
    """From the second round the reads a host was asked the round before come in one session, the kernel log's too
    (its argv follows the journal's cursor: the one its reader named), the outputs the last bundle stored byte for
    byte are links to its files, and the Xid written before the third round is in that round's verdict, read in
    that round's batch."""
    stdout, said = sweep_writing_an_xid(fleet, tmp_path, rounds=3, after=2, host="every-a")
    rounds = reports(stdout)
    assert [[h["verdict"]["id"] for h in r["hosts"]] for r in rounds] == [
        ["healthy", "healthy"], ["healthy", "healthy"], ["gpu-fell-off-bus", "healthy"]
    ]  # fmt: skip
    # the first round has no last bundle: its only links are outputs holding the bytes of another of its own
    assert rounds[0]["round"]["commands_batched"] == 0
    assert rounds[0]["round"]["files_linked"] == links_within(Path(rounds[0]["bundle"])) > 0  # exit statuses alike
    for later in rounds[1:]:
        # 4 a host: the ones a host cannot run (exit 127 here: no recording, as a node without the tool) run alone
        assert later["round"]["commands_batched"] >= 2 * 4 and later["round"]["files_linked"] > 0, later["round"]
    last = json.loads((Path(rounds[2]["bundle"]) / "manifest.json").read_text())
    # every-a's nvidia-smi is read in full, alone: its kernel log (read in the batch) had news; this fleet records
    # no NVLink output, so the nvidia-smi stand-in exits 127 itself: a 127 the shell cannot tell from its own is
    # never taken from a batch
    for host in ("every-a", "every-b"):
        batched = {c["kind"]: c for c in last["commands"] if c["host"] == host and c.get("batch")}
        assert {"kernel-log", "kernel-log-boots", "fabric"} <= set(batched) and "nvlink" not in batched, batched
        sessions = {c["start"] for c in batched.values()}
        assert len(sessions) == 1, sessions  # one session: its start is each batched read's
        took = [c["host_seconds"] for c in batched.values()]  # each read's own time, by the host's clock
        assert all(0 <= t <= c["duration"] + 0.01 for t, c in zip(took, batched.values(), strict=True)), batched
    # ibstat is no program on these hosts: batched, as sent alone (the host's `timeout` says so, exit 127)
    missing = [c for c in last["commands"] if c["argv"] == ["ibstat"]]
    assert missing and all(c.get("batch") and c["exit_code"] == 127 for c in missing)
    first = Path(rounds[0]["bundle"]) / "hosts" / "every-b"
    for output in (Path(rounds[2]["bundle"]) / "hosts" / "every-b").glob("nvlink*.out"):
        assert output.read_bytes() == (first / output.name).read_bytes()  # as the first round read it alone


def test_rounds_needs_every(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from nightowl.cli.main import main

    inventory = tmp_path / "hosts.yaml"
    inventory.write_text("hosts: [{name: a, host: 127.0.0.1}]\n")
    result = CliRunner().invoke(main, ["sweep", "--inventory", str(inventory), "--rounds", "2"])
    assert result.exit_code == 2 and "--rounds needs --every" in result.output
