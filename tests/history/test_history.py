"""The history store and the verdicts it changes (issue 29's done-when cases)."""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from nightowl import history
from nightowl.cli.main import main
from nightowl.history import query, store
from nightowl.paths import data_dir

HOSTS = data_dir("fixtures") / "hosts"
ROOT = Path(__file__).resolve().parents[2]
POLICY = ROOT / "docs" / "xid-policy.example.yaml"
XID79 = "NVRM: Xid (PCI:0000:a1:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus."
XID43 = "NVRM: Xid (PCI:0000:00:05): 43, pid={pid}, name=pt_main_thread, Ch 00000008"


def invoke(*args: str):
    return CliRunner().invoke(main, list(args), catch_exceptions=False)


def recorded_host(root: Path, name: str, lines: list[str], smi: bool = True) -> Path:
    """A recorded host whose kernel log is ``lines`` (dmesg -T), with the nvidia-smi of akash#209."""
    host = root / name
    host.mkdir(parents=True)
    (host / "kernel-log.out").write_text("\n".join(lines) + "\n")
    if smi:
        shutil.copy(HOSTS / "xid79-fallen-off-bus" / "nvidia-smi.out", host / "nvidia-smi.out")
    return host


def triage(replay: Path, out: Path, *extra: str) -> dict:
    result = invoke("triage", "xid", "--replay", str(replay), "--out", str(out), "--format", "json", *extra)
    return json.loads(result.stdout)


def bundle_of(replay: Path, out: Path) -> Path:
    return Path(triage(replay, out, "--history", "off")["bundle"])


def test_xid79_in_a_previous_boot_of_the_same_gpu_is_a_hardware_ticket(tmp_path: Path) -> None:
    """Recorded hosts, no store: the earlier boot's kernel log alone is the evidence."""
    again = triage(HOSTS / "xid79-previous-boot-same-gpu", tmp_path, "--history", "off")["hosts"][0]
    assert again["verdict"]["action"] == "hardware-ticket"
    assert again["verdict"]["id"] == "gpu-repeat-offender"
    once = triage(HOSTS / "xid79-previous-boot-clean", tmp_path, "--history", "off")["hosts"][0]
    assert (once["verdict"]["id"], once["verdict"]["action"]) == ("gpu-fell-off-bus", "reboot-node")
    only_now = triage(HOSTS / "xid79-fallen-off-bus", tmp_path, "--history", "off")["hosts"][0]
    assert only_now["verdict"]["action"] == "reboot-node"


def test_two_imported_bundles_with_xid79_make_the_third_a_hardware_ticket(tmp_path: Path) -> None:
    db = tmp_path / "history.sqlite3"
    bundles = []
    for day in ("Mon Apr  1 10:00:00 2024", "Wed Apr  3 11:30:00 2024"):
        host = recorded_host(tmp_path / day[:3], "gpu-17", [f"[{day}] {XID79}"])
        bundles.append(bundle_of(host, tmp_path / "bundles"))
    result = invoke("history", "--history", str(db), "import", *map(str, bundles))
    assert result.exit_code == 0, result.output
    again = invoke("history", "--history", str(db), "import", *map(str, bundles))
    assert "0 new event(s)" in again.stdout and "1 new" not in again.stdout  # imported twice: one event each
    assert len(store.read(db, "SELECT * FROM events WHERE code = 79")) == 2
    third = recorded_host(tmp_path / "Fri", "gpu-17", [f"[Fri Apr  5 21:29:39 2024] {XID79}"])
    verdict = triage(third, tmp_path / "bundles", "--history", str(db))["hosts"][0]["verdict"]
    assert verdict["action"] == "hardware-ticket", verdict
    assert bundles[0].name in verdict["summary"] and bundles[1].name in verdict["summary"]
    # the same recording once more is the same event: the run judged above is now in the store
    events = store.read(db, "SELECT * FROM events WHERE code = 79")
    assert len(events) == 3
    fresh = recorded_host(tmp_path / "other", "gpu-18", [f"[Fri Apr  5 21:29:39 2024] {XID79}"])
    alone = triage(fresh, tmp_path / "bundles", "--history", str(db))["hosts"][0]["verdict"]
    assert alone["action"] == "reboot-node"  # another host's past is not this host's


def test_the_same_event_seen_again_is_one_event(tmp_path: Path) -> None:
    db = tmp_path / "h.sqlite3"
    host = recorded_host(tmp_path, "gpu-17", [f"[Fri Apr  5 21:29:39 2024] {XID79}"])
    for _ in range(2):  # a second run in the same boot, the same lines replayed
        triage(host, tmp_path / "b", "--history", str(db))
    assert len(store.read(db, "SELECT * FROM events")) == 1
    assert len(store.read(db, "SELECT * FROM runs")) == 2
    verdict = triage(host, tmp_path / "b", "--history", str(db))["hosts"][0]["verdict"]
    assert verdict["action"] == "reboot-node"  # never its own repeat


def xid43_host(root: Path, times: list[str]) -> Path:
    lines = [f"[Wed Jul 31 {t} 2024] " + XID43.format(pid=1045242 + i) for i, t in enumerate(times)]
    return recorded_host(root, "gpu-43", lines, smi=False)  # as xid43-sympathetic-only: the kernel log alone


def test_three_xid43_in_ten_minutes_under_the_example_policy_drain_and_reset(tmp_path: Path) -> None:
    policy = f"xid_policy={POLICY}"
    three = xid43_host(tmp_path / "three", ["23:14:18", "23:15:26", "23:21:02"])
    verdict = triage(three, tmp_path / "b", "--history", "off", "--param", policy)["hosts"][0]["verdict"]
    assert (verdict["id"], verdict["action"]) == ("xid-repeating", "drain-and-reset")
    spread = xid43_host(tmp_path / "spread", ["23:14:18", "23:15:26", "23:44:02"])  # the third 30 min later
    late = triage(spread, tmp_path / "b", "--history", "off", "--param", policy)["hosts"][0]["verdict"]
    assert late["action"] != "drain-and-reset"
    two = xid43_host(tmp_path / "two", ["23:14:18", "23:15:26"])
    with_policy = triage(two, tmp_path / "b", "--history", "off", "--param", policy)["hosts"][0]["verdict"]
    without = triage(two, tmp_path / "b", "--history", "off")["hosts"][0]["verdict"]
    assert (with_policy["id"], with_policy["action"]) == (without["id"], without["action"])


def test_xid43_counted_across_runs_from_the_store(tmp_path: Path) -> None:
    """Two in one run, a third in the next (another bundle, the same boot): three in ten minutes."""
    db, policy = tmp_path / "h.sqlite3", f"xid_policy={POLICY}"
    triage(xid43_host(tmp_path / "a", ["23:14:18", "23:15:26"]), tmp_path / "b", "--history", str(db))
    later = xid43_host(tmp_path / "b2", ["23:14:18", "23:15:26", "23:20:00"])
    verdict = triage(later, tmp_path / "b", "--history", str(db), "--param", policy)["hosts"][0]["verdict"]
    assert verdict["action"] == "drain-and-reset"
    assert len(store.read(db, "SELECT * FROM events WHERE code = 43")) == 3


def test_a_corrupt_store_is_a_warning_and_the_verdict_as_without(tmp_path: Path) -> None:
    db = tmp_path / "h.sqlite3"
    db.write_bytes(b"this is not a database" * 100)
    host = HOSTS / "xid79-previous-boot-clean"
    result = invoke(
        "triage", "xid", "--replay", str(host), "--out", str(tmp_path), "--format", "json", "--history", str(db)
    )
    assert "warning" in result.stderr and "history" in result.stderr
    with_corrupt = json.loads(result.stdout)["hosts"][0]["verdict"]
    without = triage(host, tmp_path, "--history", "off")["hosts"][0]["verdict"]
    assert (with_corrupt["id"], with_corrupt["action"]) == (without["id"], without["action"])
    assert Path(json.loads(result.stdout)["bundle"], "manifest.json").is_file()  # the bundle is never lost
    assert db.read_bytes().startswith(b"this is not")  # and the file is left for a person to look at


def test_an_unwritable_store_is_a_warning(tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"  # its "folder" cannot be made, even by root (tests may run as root)
    blocker.write_text("")
    warnings: list[str] = []
    bundle = bundle_of(HOSTS / "xid79-fallen-off-bus", tmp_path / "b")
    assert history.record_bundle(bundle, blocker / "h.sqlite3", warn=warnings.append) == 0
    assert warnings and "no history" in warnings[0]


def test_pruning_bundles_keeps_the_rows(tmp_path: Path) -> None:
    db = tmp_path / "h.sqlite3"
    bundle = Path(triage(HOSTS / "xid79-fallen-off-bus", tmp_path / "b", "--history", str(db))["bundle"])
    shutil.rmtree(bundle)
    rows = query.timeline(db)
    assert {r["what"] for r in rows} == {"xid", "verdict"}
    assert all(r["bundle_id"] == bundle.name and len(r["bundle_sha256"]) == 64 for r in rows)


def test_history_command_table_json_and_top(tmp_path: Path) -> None:
    db = tmp_path / "h.sqlite3"
    triage(HOSTS / "xid79-previous-boot-same-gpu", tmp_path / "b", "--history", str(db))
    table = invoke("history", "--history", str(db))
    assert table.exit_code == 0 and "xid 79" in table.stdout and "verdict gpu-repeat-offender" in table.stdout
    data = json.loads(invoke("history", "--history", str(db), "--gpu", "00000000:A1:00.0", "--format", "json").stdout)
    xids = [e for e in data["timeline"] if e["what"] == "xid"]
    assert len(xids) == 2 and len({e["boot_id"] for e in xids}) == 2  # this boot and the one two reboots ago
    top = json.loads(invoke("history", "--history", str(db), "--top", "--format", "json").stdout)["top"]
    assert top[0]["host"] == "xid79-previous-boot-same-gpu" and top[0]["incidents"] == 2
    assert invoke("history", "--history", str(db), "--since", "soon").exit_code == 2
    assert json.loads(invoke("history", "--history", str(db), "--since", "1h", "--format", "json").stdout)["timeline"]


WRITER = """
import sys
from pathlib import Path
from nightowl import history
db, bundles = Path(sys.argv[1]), sys.argv[2:]
for bundle in bundles:
    history.record_bundle(bundle, db, warn=lambda m: sys.exit("lost: " + m))
"""


def test_four_writers_and_two_sweeps_at_once_lose_no_row(tmp_path: Path) -> None:
    """Four processes writing as serve workers do (one bundle after another) beside two real sweeps."""
    db = tmp_path / "h.sqlite3"
    bundles = []
    for i in range(12):
        host = recorded_host(tmp_path / f"r{i}", f"gpu-{i:02d}", [f"[Fri Apr  5 21:{i:02d}:39 2024] {XID79}"])
        bundles.append(str(bundle_of(host, tmp_path / "bundles")))
    env = {**os.environ, "NIGHTOWL_HISTORY": str(db)}
    procs = [
        subprocess.Popen([sys.executable, "-c", WRITER, str(db), *bundles[w::4]], env=env, stderr=subprocess.PIPE)
        for w in range(4)
    ]
    # two sweeps of this machine (`sweep --local`: the sweep's own run path, whatever verdict it reaches)
    nightowl = str(Path(sys.executable).parent / "nightowl")
    sweep = [nightowl, "sweep", "--local", "--out", str(tmp_path / "sw"), "--format", "json"]
    procs += [subprocess.Popen(sweep, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE) for _ in range(2)]
    for proc in procs:
        _, err = proc.communicate(timeout=240)
        assert b"warning" not in err and b"lost" not in err, err.decode()
    runs = store.read(db, "SELECT bundle_id, host FROM runs")
    assert len(runs) == 12 + 2
    assert len({r["bundle_id"] for r in runs}) == 14
    assert len(store.read(db, "SELECT * FROM events WHERE code = 79")) == 12
    with sqlite3.connect(db) as conn:
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"


@pytest.mark.parametrize(
    "spec", [{"count": 0, "window": "10m"}, {"count": 3, "window": "soon"}, {"after_reboots": "x"}]
)
def test_malformed_history_rules_are_refused_before_the_run(tmp_path: Path, spec: dict) -> None:
    from nightowl.collectors.gpu.xid_catalog import load_policy

    policy = tmp_path / "p.yaml"
    policy.write_text(json.dumps({"overrides": {"43": {**spec, "action": "drain-and-reset"}}}))
    with pytest.raises(ValueError, match="Xid 43"):
        load_policy(str(policy))


def test_history_rules_are_not_plain_overrides() -> None:
    from nightowl.collectors.gpu.xid_catalog import load_history_rules, load_policy

    assert set(load_policy(str(POLICY))) == {63, 92}
    rules = {r["code"]: r for r in load_history_rules(str(POLICY))}
    assert rules[43]["count"] == 3 and rules[43]["window_seconds"] == 600
    assert rules[79]["after_reboots"] == 1


def test_textfile_counts_incidents_per_gpu_and_action(tmp_path: Path) -> None:
    db = tmp_path / "h.sqlite3"
    for _ in range(2):
        triage(HOSTS / "xid79-fallen-off-bus", tmp_path / "b", "--history", str(db))
    from nightowl.fleet.textfile import prometheus_textfile

    summary = {"runbook": "xid", "hosts": [{"host": "xid79-fallen-off-bus", "status": "ok", "verdict": None}]}
    text = prometheus_textfile(summary, db)
    assert "# TYPE nightowl_gpu_incidents_total counter" in text
    # two runs, one Xid 79: one incident
    line = (
        'nightowl_gpu_incidents_total{action="reboot-node",code="79",gpu="0000:a1:00",host="xid79-fallen-off-bus"} 1.0'
    )
    assert line in text
    assert "nightowl_gpu_incidents" not in prometheus_textfile(summary)  # no store handed in (history off)


def test_postmortem_cites_earlier_bundles_before_this_incident(tmp_path: Path) -> None:
    db = tmp_path / "h.sqlite3"
    first = triage(HOSTS / "xid79-fallen-off-bus", tmp_path / "b", "--history", str(db))
    second = triage(HOSTS / "xid79-fallen-off-bus", tmp_path / "b", "--history", str(db))
    text = (Path(second["bundle"]) / "postmortem.md").read_text()
    before = text.split("## Before this incident", 1)[1].split("\n## ", 1)[0]
    sha = store.read(db, "SELECT bundle_sha256 FROM runs WHERE bundle_id = ?", (first["run_id"],))[0]["bundle_sha256"]
    assert first["run_id"] in before and sha in before and second["run_id"] not in before
    assert "## Before this incident" not in (Path(first["bundle"]) / "postmortem.md").read_text()


BOOTS = (
    "IDX BOOT ID                          FIRST ENTRY                 LAST ENTRY\n"
    " -2 5b0c6f3e9d2a4e1f8a7b6c5d4e3f2a1b Mon 2024-07-15 09:00:02 UTC Mon 2024-07-22 10:20:44 UTC\n"
    " -1 8d3c7b1e2f4a4b6c9d0e1f2a3b4c5d6e Mon 2024-07-22 10:31:15 UTC Sun 2024-07-28 09:10:51 UTC\n"
    "  0 1f0e9d8c7b6a45f4e3d2c1b0a9f8e7d6 Sun 2024-07-28 09:15:20 UTC Wed 2024-07-31 23:40:02 UTC\n"
)


def test_an_xid_that_survives_two_reboots_is_a_hardware_ticket(tmp_path: Path) -> None:
    """The same Xid 43 on the same GPU in this boot and the two before: twice through a reboot."""
    host = xid43_host(tmp_path, ["23:14:18"])
    earlier = [
        "-- nightowl previous boot -1 --",
        "2024-07-25T11:00:00+0000 node kernel: " + XID43.format(pid=1),
        "-- nightowl previous boot -2 --",
        "2024-07-18T11:00:00+0000 node kernel: " + XID43.format(pid=2),
    ]
    (host / "kernel-log-boots.out").write_text(BOOTS + "\n".join(earlier) + "\n")
    verdict = triage(host, tmp_path / "b", "--history", "off")["hosts"][0]["verdict"]
    assert (verdict["id"], verdict["action"]) == ("gpu-repeat-offender", "hardware-ticket")
    assert "survived 2 reboots" in verdict["summary"]
    site = triage(host, tmp_path / "b", "--history", "off", "--param", "xid_reboots_hardware=3")
    assert site["hosts"][0]["verdict"]["action"] != "hardware-ticket"  # the site allows three
    (host / "kernel-log-boots.out").write_text(BOOTS + "\n".join(earlier[:2]) + "\n")  # one reboot only
    assert triage(host, tmp_path / "b", "--history", "off")["hosts"][0]["verdict"]["action"] != "hardware-ticket"


def test_a_host_name_with_terminal_escapes_prints_as_text(tmp_path: Path) -> None:
    """Issue "trust, round four", item 11: an imported host name carrying an OSC 52 clipboard write or a line
    break reaches neither the timeline nor --top's table raw."""
    db = tmp_path / "h.sqlite3"
    name = "gpu\x1b]52;c;ZXZpbA==\x07-17\nforged"
    host = recorded_host(
        tmp_path / "r",
        name,
        ["[Tue Mar  5 10:00:00 2024] NVRM: Xid (PCI:0000:a1:00): 79, pid=1, name=x, GPU has fallen off the bus."],
    )
    triage(host, tmp_path / "b", "--history", str(db))
    for args in ((), ("--top",)):
        out = invoke("history", "--history", str(db), *args).stdout
        assert "\x1b" not in out and "\x07" not in out, repr(out)
        assert "gpu-17 forged" in out  # the name without its escape sequence, on one line
