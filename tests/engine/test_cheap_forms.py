"""Cheap first, deep when it matters (issue 46 item 3): nvidia-smi's --query-gpu CSV stands for its -q -x.

The list of every fact node-health judges of nvidia-smi with the form that provides it (cheap.FORMS) is held
against the runbook, and each judged value the cheap form provides is shown to force the full read when it
changes. The runs are node-health runs through ``run_and_save`` with a history store (as `sweep` and `check`
make them) on this machine, with an `nvidia-smi` stand-in first on PATH that counts its calls."""

from __future__ import annotations

import json
import os
import re
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from nightowl import history
from nightowl.collectors.gpu import fabric
from nightowl.collectors.gpu.nvidia_smi import cheap, cheap_fabric, nvidia_smi
from nightowl.collectors.gpu.nvidia_smi import nvidia_smi_query as query
from nightowl.engine.incremental import CARRIED
from nightowl.history import cursors
from nightowl.library import runbooks
from nightowl.run import RunHooks, RunResult, RunSettings, run_and_save
from nightowl.transports.local import LocalTransport
from nightowl.transports.replay import ReplayTransport
from tests.engine.cheap_csv import cheap_csv, fabric_csv, one_node_q, shared_csv
from tests.history.cursor_standins import install, record_loads

ROOT = Path(__file__).resolve().parents[2]
XML = (ROOT / "fixtures" / "hosts" / "real-size-8gpu" / "nvidia-smi-q-x.xml").read_text()
# -q: the fabric's read, naming the XML's GPUs (one host's two forms name one set of GPUs: cheap_csv.one_node_q)
TEXT = one_node_q((ROOT / "fixtures" / "hosts" / "real-size-8gpu" / "nvidia-smi.out").read_text(), XML)
FULL = cheap.judged_full(nvidia_smi.facts(nvidia_smi.parse(XML)))

STANDIN = r"""#!PYTHON
import os, sys
folder = os.environ["STANDIN_SMI"]
with open(os.path.join(folder, "calls"), "a") as log:
    log.write(" ".join(sys.argv[1:]) + "\n")
args = sys.argv[1:]
query = next((a for a in args if a.startswith("--query-gpu=")), None)
fields = query[len("--query-gpu="):].split(",") if query else []
if "index" in fields and "fabric.state" in fields:  # the shared query: both CSVs joined on the bus id
    tables = []
    for name in ("query.csv", "fabric.csv"):
        path = os.path.join(folder, name)
        if not os.path.exists(path):  # a driver that knows no such field (exit 2, nvidia-smi's words)
            print('Field "fabric.state" is not a valid field to query.')
            sys.exit(2)
        head, *lines = open(path).read().splitlines()
        names = [cell.strip() for cell in head.split(",")]
        tables.append([dict(zip(names, (c.strip() for c in line.split(",")))) for line in lines if line])
    fabric = {row["pci.bus_id"]: row for row in tables[1]}
    print(", ".join(fields))
    for row in tables[0]:
        row = {**fabric.get(row["pci.bus_id"], {}), **row}
        print(", ".join(row.get(name, "[N/A]") for name in fields))
    sys.exit(0)
full = {("-q", "-x"): "full.xml", ("-q",): "full.txt"}.get(tuple(args))
name = ("fabric.csv" if "fabric.state" in query else "query.csv") if query else full
path = os.path.join(folder, name) if name else None
if path is None or not os.path.exists(path):
    sys.exit(1)
sys.stdout.write(open(path).read())
"""


def _judged_reads() -> set[str]:
    """Every nvidia_smi.<fact> node-health and the fragments it includes read."""
    texts = [(ROOT / "runbooks" / "node-health.yaml").read_text()]
    texts += [p.read_text() for p in (ROOT / "runbooks" / "fragments").glob("*.yaml")]
    return {m for text in texts for m in re.findall(r"\bnvidia_smi\.([a-z_]+)", text)}


def test_every_fact_node_health_judges_of_nvidia_smi_has_the_form_that_provides_it() -> None:
    declared = yaml.safe_load((ROOT / "nightowl" / "collectors" / "gpu" / "facts.yaml").read_text())
    produced = set(declared["nvidia-smi"]["facts"])
    assert _judged_reads() <= set(cheap.FORMS), _judged_reads() - set(cheap.FORMS)
    assert set(cheap.FORMS) <= produced | {"gpus", "errors"}
    assert set(cheap.FORMS.values()) <= {cheap.CHEAP, cheap.FULL}
    # a judged list the cheap form provides is compared with the full read's (the rest are "full")
    lists = {name for name, form in cheap.FORMS.items() if form == cheap.CHEAP and name.endswith("_gpus")}
    assert lists <= set(FULL)


# One change per judged value the cheap form provides, on GPU 2: each must force the full read.
CHANGES = {
    "dram_uncorrectable_volatile_gpus": {"ecc.errors.uncorrected.volatile.total": 2},
    "hw_slowdown_gpus": {"clocks_event_reasons.active": "0x0000000000000040"},
    "pcie_degraded_gpus": {"pcie.link.width.current": 8},
    "retired_pages_pending_gpus": {"retired_pages.pending": "Yes"},
    "remap_pending_gpus": {"remapped_rows.pending": "Yes"},
    "remap_failure_gpus": {"remapped_rows.failure": "Yes"},
    "gpus": {"uuid": "GPU-00000000-0000-0000-0000-000000000000"},
    "errors": {"fan.speed": "ERR!"},
    "gpus_missing_or_unreadable": {"pci.bus_id": "[GPU is lost]"},
}


def test_the_cheap_form_of_an_unchanged_node_stands_for_the_full_read() -> None:
    assert cheap.differs(cheap.judged_cheap(query.parse(cheap_csv(XML))), FULL) is None


@pytest.mark.parametrize("fact", sorted(CHANGES))
def test_any_judged_value_the_cheap_form_shows_changed_forces_the_full_read(fact: str) -> None:
    why = cheap.differs(cheap.judged_cheap(query.parse(cheap_csv(XML, {2: CHANGES[fact]}))), FULL)
    assert why is not None
    if fact.endswith("_gpus") and fact != "gpus_missing_or_unreadable":
        assert fact in why


def test_a_cheap_read_without_every_field_or_with_one_gpu_fewer_cannot_stand_for_the_full_read() -> None:
    lines = cheap_csv(XML).splitlines()
    assert "lists no GPU" in str(cheap.differs(cheap.judged_cheap(query.parse(lines[0])), FULL))
    assert "gpus" in str(cheap.differs(cheap.judged_cheap(query.parse("\n".join(lines[:-1]))), FULL))
    cut = "\n".join(line.rsplit(",", 1)[0] for line in lines)
    assert "lacks fan.speed" in str(cheap.differs(cheap.judged_cheap(query.parse(cut)), FULL))


def test_a_full_read_that_found_something_is_read_in_full_again() -> None:
    assert nvidia_smi.COLLECTOR.cursor.why_full({"judged": FULL}) is None
    assert "hw_slowdown_gpus" in str(
        nvidia_smi.COLLECTOR.cursor.why_full({"judged": {**FULL, "hw_slowdown_gpus": ["0000:00:0d"]}})
    )
    assert nvidia_smi.COLLECTOR.cursor.why_full({}) is not None


@pytest.fixture
def node(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    return install_node(tmp_path, monkeypatch)


def install_node(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """This machine as an 8-GPU node: `nvidia-smi` (both forms of both readers), journal, ring and fabric manager
    stand-ins first on PATH (tests/fleet/test_incremental_sweep.py's workers inherit them)."""
    for name, value in install(tmp_path).items():
        monkeypatch.setenv(name, value)
    bin_dir = tmp_path / "smi-bin"
    bin_dir.mkdir()
    script = bin_dir / "nvidia-smi"
    script.write_text(STANDIN.replace("PYTHON", sys.executable))
    script.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("STANDIN_SMI", str(tmp_path))
    (tmp_path / "full.xml").write_text(XML)
    (tmp_path / "query.csv").write_text(cheap_csv(XML))
    (tmp_path / "full.txt").write_text(TEXT)
    (tmp_path / "fabric.csv").write_text(fabric_csv(TEXT))
    boot = [[n, f"2024-06-01T10:00:{n:02d}+0000 node kernel: usb 1-{n}: new device"] for n in range(1, 20)]
    (tmp_path / "journal.json").write_text(json.dumps({"boot": "b1", "entries": boot}))
    manager = bin_dir / "systemctl"  # `systemctl is-active nvidia-fabricmanager`: the board's GPUs have a fabric
    manager.write_text("#!/bin/sh\necho active\n")
    manager.chmod(0o755)
    return tmp_path


def sweep(
    folder: Path, full: bool = False, full_every: float | None = cursors.FULL_EVERY, book: bool = True
) -> RunResult:
    (folder / "calls").write_text("")
    store = folder / "history.sqlite3"  # the node's store, as the command's --history would choose it
    positions = cursors.book(store, full=full, full_every=full_every) if book else None
    return run_and_save(
        runbooks.load("node-health"),
        {"node": lambda: LocalTransport("node")},
        folder / "out",
        settings=RunSettings(drafts=False, status_update=False),
        hooks=RunHooks(cursors=positions),
        context=history.run_context(store),
    )


def drop_saved(folder: Path, kind: str, key: str) -> None:
    """Take ``key`` out of the node's saved ``kind`` state in its store (a row an earlier release wrote)."""
    import sqlite3

    conn = sqlite3.connect(folder / "history.sqlite3")
    (state,) = conn.execute("SELECT state FROM cursors WHERE kind = ?", (kind,)).fetchone()
    kept = {k: v for k, v in json.loads(state).items() if k != key}
    conn.execute("UPDATE cursors SET state = ? WHERE kind = ?", (json.dumps(kept), kind))
    conn.commit()
    conn.close()


def entry(result: RunResult, kind: str = "nvidia-smi") -> dict[str, Any]:
    assert result.bundle is not None
    return json.loads((result.bundle / CARRIED).read_text())["hosts"]["node"][kind]  # type: ignore[no-any-return]


SHARED = " ".join(cheap.SHARED_ARGV[1:])  # the query both cheap forms ask first, run once a host for both


def smi_calls(folder: Path) -> list[str]:
    """The calls of nvidia-smi's own reads: -q -x and its own query (the query it shares with the fabric's
    read, the fabric's -q and its own query aside)."""
    lines = (folder / "calls").read_text().splitlines()
    return [line for line in lines if line == "-q -x" or ("--query-gpu" in line and "fabric.state" not in line)]


def fabric_calls(folder: Path) -> list[str]:
    return [line for line in (folder / "calls").read_text().splitlines() if line == "-q" or "fabric.state" in line]


def without_form(result: RunResult) -> dict[str, Any]:
    """The verdict less the sentence naming the cheap form it rests on (the full read's verdict has none)."""
    verdict = dict(result.runs[0].verdict or {})
    verdict["summary"] = re.sub(r"\s*Read cheap: [^.]*\.[^.]*\.\)?", "", str(verdict.get("summary")))
    return verdict


def smi_facts(result: RunResult) -> dict[str, Any]:
    facts = result.runs[0].collections["nvidia-smi"].facts
    assert facts is not None
    return facts


def test_first_read_full_then_cheap_with_the_full_reads_verdict_then_full_when_a_judged_value_changes(
    node: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    first = sweep(node)
    assert entry(first)["read"] == "full" and "no position" in entry(first)["why_full"]
    assert smi_calls(node) == ["-q -x"] and smi_facts(first)["read_form"] == "full"
    limits: list[float] = []
    real_run = LocalTransport.run

    def run(self: LocalTransport, argv: Any, timeout: float, kind: str | None = None) -> Any:
        if tuple(argv) == cheap.SHARED_ARGV:
            limits.append(timeout)
        return real_run(self, argv, timeout, kind=kind)

    monkeypatch.setattr(LocalTransport, "run", run)
    second = sweep(node)
    queries = [line for line in (node / "calls").read_text().splitlines() if line.startswith(("-q", "--query"))]
    assert queries == [SHARED]  # the cheap forms alone, in one call for both collectors
    assert limits == [cheap.SHARED_SECONDS]  # under the one limit both share (nvidia-smi's own is 20 s)
    answers = [c for c in json.loads((second.bundle / "manifest.json").read_text())["commands"] if c["argv"][1:] == list(cheap.SHARED_ARGV[1:])]  # type: ignore[operator]  # noqa: E501
    assert sorted(c["kind"] for c in answers) == ["fabric", "nvidia-smi"]  # each kind's evidence, one run
    assert sorted(str(c.get("answer_of")) for c in answers) in (["None", "fabric"], ["None", "nvidia-smi"])
    assert entry(second)["read"] == "cheap" and entry(second)["why_full"] is None
    assert entry(second)["carried_from"]["bundle"] == first.bundle.name  # type: ignore[union-attr]
    assert smi_facts(second)["read_form"] == "cheap"
    saved = cursors.load(node / "history.sqlite3", "node", "nvidia-smi")  # the full read's row stands, cited
    assert saved is not None and saved.carried == XML and saved.bundle_id == first.bundle.name  # type: ignore[union-attr]
    assert saved.state["full_sha256"] == entry(first)["state"]["full_sha256"]
    # the cheap read's bundle cites the full read's output file instead of holding a copy of it
    assert "carried_text" not in entry(second) and entry(second)["carried_file"] == saved.state["text_file"]
    assert (first.bundle / saved.state["text_file"]).read_text() == XML  # type: ignore[operator]
    # postmortem --verify follows the cheap bundle's chain back to the full read
    from nightowl.postmortem.carried_chain import verify_carried

    assert second.bundle is not None and verify_carried(second.bundle) == ([], [])
    assert without_form(second) == without_form(first)
    assert "Read cheap: nvidia-smi and the fabric" in str(second.runs[0].verdict["summary"])  # type: ignore[index]
    assert "Read cheap" not in str(first.runs[0].verdict["summary"])  # type: ignore[index]
    whole = sweep(node, book=False)  # no positions: today's full read
    assert without_form(second) == without_form(whole)
    same = {k: v for k, v in smi_facts(second).items() if k != "read_form"}
    assert same == smi_facts(whole)
    # a replay of the cheap read's bundle gives the same verdict
    assert second.bundle is not None
    replayed = run_and_save(
        runbooks.load("node-health"),
        {"node": lambda: ReplayTransport(second.bundle / "hosts" / "node", host="node")},  # type: ignore[operator]
        node / "replayed",
        settings=RunSettings(drafts=False, status_update=False),
    )
    assert replayed.runs[0].verdict == second.runs[0].verdict
    # an uncorrectable ECC error shows in the cheap form: the full form is read, and its verdict is given
    (node / "query.csv").write_text(cheap_csv(XML, {2: {"ecc.errors.uncorrected.volatile.total": 1}}))
    start = XML.index("<double_bit>", XML.index("<volatile>"))
    ecc = XML[:start] + XML[start:].replace("<device_memory>0<", "<device_memory>1<", 1)
    (node / "full.xml").write_text(ecc)
    third = sweep(node)
    assert smi_calls(node) == ["-q -x"] and SHARED in (node / "calls").read_text().splitlines()
    assert entry(third)["read"] == "full" and "dram_uncorrectable_volatile_gpus" in entry(third)["why_full"]
    assert smi_facts(third)["read_form"] == "full" and smi_facts(third)["dram_uncorrectable_volatile_gpus"]
    assert (third.runs[0].verdict or {}).get("id") == "uncorrectable-ecc"
    # while the last full read found something, every read is full
    fourth = sweep(node)
    assert "found dram_uncorrectable_volatile_gpus" in entry(fourth)["why_full"] and entry(fourth)["read"] == "full"
    assert smi_calls(node) == ["-q -x"]
    assert entry(fourth, "fabric")["read"] == "cheap"


@pytest.mark.parametrize(
    ("how", "why"),
    [
        ("full", "forced full read (--full)"),
        ("old", "h old (--full-every"),
        ("query-fails", "no read from the saved position answered"),
    ],
)
def test_the_full_form_is_read_with_full_after_full_every_and_when_the_cheap_read_fails(
    node: Path, how: str, why: str
) -> None:
    sweep(node)
    if how == "query-fails":
        (node / "query.csv").unlink()
    again = sweep(node, full=how == "full", full_every=0.0 if how == "old" else cursors.FULL_EVERY)
    assert entry(again)["read"] == "full" and why in entry(again)["why_full"]
    assert smi_calls(node)[-1] == "-q -x"


def test_every_fact_node_health_judges_of_the_fabric_has_the_form_that_provides_it() -> None:
    texts = [(ROOT / "runbooks" / "node-health.yaml").read_text()]
    reads = {m for text in texts for m in re.findall(r"\bfabric\.([a-z_]+)", text)}
    assert reads and reads <= set(cheap_fabric.FORMS), reads - set(cheap_fabric.FORMS)


def test_the_fabric_is_read_cheap_after_a_full_read_and_in_full_when_a_gpu_leaves_its_fabric(node: Path) -> None:
    first = sweep(node)
    assert entry(first, "fabric")["read"] == "full" and fabric_calls(node) == ["-q"]
    second = sweep(node)
    assert entry(second, "fabric")["read"] == "cheap" and fabric_calls(node) == [SHARED]
    assert second.runs[0].collections["fabric"].facts == {
        **first.runs[0].collections["fabric"].facts,
        "read_form": "cheap",
    }
    assert without_form(second) == without_form(first)
    (node / "fabric.csv").write_text(fabric_csv(TEXT, {3: {"fabric.state": "In Progress"}}))
    third = sweep(node)
    assert (
        entry(third, "fabric")["read"] == "full"
        and "differs from the last full read in gpus" in entry(third, "fabric")["why_full"]
    )


def test_a_cheap_read_still_records_its_gpus_in_the_history_with_what_it_read_of_them(
    node: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A steady round's bundle holds the cheap CSV, not a full read: the history still sees its GPUs that round
    (identity as the full read names them, the counters under the query's names, marked cheap). The CSV is parsed
    once for the two cheap readers that judge it and the history that reads it back (``cheap.parsed``)."""
    import sqlite3

    first = sweep(node)
    cheap.parsed.cache_clear()
    parses: list[str] = []
    real_parse = query.parse
    monkeypatch.setattr(query, "parse", lambda text: parses.append(text) or real_parse(text))
    second = sweep(node)
    monkeypatch.undo()
    assert entry(second)["read"] == "cheap"
    assert len(parses) == 1 and parses[0].startswith("index, pci.bus_id")  # the shared answer, parsed once
    store = sqlite3.connect(node / "history.sqlite3")
    rows = store.execute("SELECT pci, uuid, serial, name, counters, last_bundle FROM gpus").fetchall()
    by_bundle: dict[str, dict[str, tuple[Any, ...]]] = {}
    for pci, uuid, serial, name, counters, last in rows:
        by_bundle.setdefault(last, {})[pci] = (uuid, serial, name, json.loads(counters))
    full, seen = by_bundle[first.bundle.name], by_bundle[second.bundle.name]  # type: ignore[union-attr]
    assert len(full) == len(seen) == 8 and set(full) == set(seen)
    for pci, (uuid, serial, name, counters) in seen.items():
        assert (uuid, serial, name) == full[pci][:3] and serial
        assert counters["read"] == "cheap" and counters["ecc.errors.uncorrected.volatile.total"] == 0
        assert "ecc" in full[pci][3] and "read" not in full[pci][3]
    history_rows = cheap.history_rows(cheap_csv(XML, {3: {"remapped_rows.pending": "Yes"}}))
    assert [row["counters"]["remapped_rows.pending"] for row in history_rows].count("Yes") == 1
    assert cheap.history_rows(XML) == [] and cheap.history_rows("") == []


def test_a_driver_that_refuses_the_shared_query_reads_each_collectors_own_cheap_query(node: Path) -> None:
    """The shared query names the Fabric fields (R570+): an older driver refuses it whole (exit 2), and each
    cheap form then asks its own query; the fabric's is refused too there, so the fabric reads in full."""
    first = sweep(node)
    (node / "fabric.csv").unlink()  # the stand-in's driver knows no Fabric field now
    second = sweep(node)
    calls = [line for line in (node / "calls").read_text().splitlines() if line.startswith(("-q", "--query"))]
    own = [" ".join(argv[1:]) for argv in (cheap.CHEAP_ARGV, cheap_fabric.CHEAP_ARGV)]
    assert sorted(calls) == sorted([SHARED, *own, "-q"])  # the shared query once for both kinds
    assert entry(second)["read"] == "cheap" and entry(second)["argv"][1:] == list(cheap.CHEAP_ARGV[1:])
    assert entry(second, "fabric")["read"] == "full"
    assert without_form(second) == without_form(first)


def test_an_error_in_the_other_collectors_fields_of_the_shared_query_does_not_stop_a_cheap_read() -> None:
    shared = shared_csv(cheap_csv(XML), fabric_csv(TEXT))
    fabric_error = shared_csv(cheap_csv(XML), fabric_csv(TEXT, {2: {"fabric.health.summary": "[Unknown Error]"}}))
    smi_error = shared_csv(cheap_csv(XML, {2: {"power.draw": "[Unknown Error]"}}), fabric_csv(TEXT))
    fabric_full = cheap_fabric.judged_full(fabric.facts(fabric.parse(TEXT)))
    assert cheap.differs(cheap.NVIDIA_SMI.judged_cheap(shared), FULL) is None
    assert cheap.differs(cheap_fabric.judged_cheap(shared), fabric_full) is None
    assert cheap.differs(cheap.NVIDIA_SMI.judged_cheap(fabric_error), FULL) is None
    assert "error" in str(cheap.differs(cheap_fabric.judged_cheap(fabric_error), fabric_full))
    assert cheap.differs(cheap_fabric.judged_cheap(smi_error), fabric_full) is None
    assert "error" in str(cheap.differs(cheap.NVIDIA_SMI.judged_cheap(smi_error), FULL))


def test_the_shared_query_runs_under_the_longer_of_the_two_collectors_limits() -> None:
    """Neither reader gets less time than alone, and both ask it under one limit: whichever runs it, its answer
    (a timeout on the host included) is the one the other's own run had to go by."""
    from nightowl.collectors import get_collector

    limits = [get_collector(kind).timeout for kind in ("nvidia-smi", "fabric")]
    assert max(limits) == cheap.SHARED_SECONDS
    for forms in (cheap.NVIDIA_SMI, cheap_fabric.FABRIC):
        reader = cheap.CheapFirst(lambda text: None, lambda result: {}, forms)
        assert reader.shares == {cheap.SHARED_ARGV: cheap.SHARED_SECONDS}
        assert forms.cheap_argvs[0] == cheap.SHARED_ARGV


def test_a_bundle_of_the_earlier_cheap_query_replays_as_a_cheap_read() -> None:
    (earlier,) = cheap.EARLIER_CHEAP_ARGVS
    reader = cheap.CheapFirst(nvidia_smi.parse, nvidia_smi.facts)
    state = {"judged": FULL}
    assert cheap.CHEAP_FIELDS[4] == "serial"
    lines = cheap_csv(XML).splitlines()
    csv = "\n".join(", ".join(c for i, c in enumerate(line.split(", ")) if i != 4) for line in lines)
    piece = reader.read(earlier, csv, state)
    assert piece.read == "cheap" and piece.body == "" and piece.gap is None


def test_a_cheap_read_leaves_the_full_reads_text_in_the_store_while_its_row_holds_the_facts(
    node: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A cheap read takes the facts the full read's row kept (``parsed``): the full read's 0.2 MB text is not
    read out of the store for it. A row without them (a store written before they were kept) is read whole."""

    first = sweep(node)
    asked = record_loads(monkeypatch)
    second = sweep(node)
    assert entry(second)["read"] == entry(second, "fabric")["read"] == "cheap"
    assert sorted(a for a in asked if a[0] in ("nvidia-smi", "fabric")) == [("fabric", False), ("nvidia-smi", False)]
    assert ("kernel-log", True) in asked  # a reader that needs its carried lines reads them
    assert without_form(second) == without_form(first)
    drop_saved(node, "nvidia-smi", "parsed")
    asked.clear()
    third = sweep(node)
    assert [a for a in asked if a[0] == "nvidia-smi"] == [("nvidia-smi", False), ("nvidia-smi", True)]
    assert entry(third)["read"] == "cheap" and without_form(third) == without_form(first)
    assert smi_facts(third) == smi_facts(second)


def test_a_full_read_whose_facts_another_release_parsed_is_read_in_full_again(
    node: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import nightowl

    sweep(node)
    monkeypatch.setattr(nightowl, "__version__", "an-upgrade")
    second = sweep(node)
    assert entry(second)["read"] == "full" and "another nightowl release" in entry(second)["why_full"]
    assert entry(sweep(node))["read"] == "cheap"  # and this release's facts are taken after it
