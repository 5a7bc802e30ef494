"""`nightowl history import` verifies before it trusts (issue "trust, round four", item 6).

Each crafted bundle is imported before a good one: it is refused with exit 2 and a line naming the bundle
and the field, and the good one after it is still imported. Where a hang or running out of memory is the
bug (a FIFO, a link to /dev/zero), the import runs in a child process under a timeout and a memory limit.
"""

from __future__ import annotations

import hashlib
import json
import os
import resource
import shutil
import sqlite3
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import CliRunner

from nightowl.cli.main import main
from nightowl.history import store
from nightowl.paths import data_dir

HOST = data_dir("fixtures") / "hosts" / "xid79-fallen-off-bus"
NAME = HOST.name


def invoke(*args: str):
    return CliRunner().invoke(main, list(args), catch_exceptions=False)


@pytest.fixture(scope="module")
def real(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real bundle (triage xid on a recorded Xid 79 host), never recorded anywhere."""
    out = tmp_path_factory.mktemp("real")
    result = invoke("triage", "xid", "--replay", str(HOST), "--out", str(out), "--history", "off", "--format", "json")
    return Path(json.loads(result.stdout)["bundle"])


def copy(real: Path, where: Path) -> Path:
    where.parent.mkdir(parents=True, exist_ok=True)
    shutil.copytree(real, where)
    return where


def manifest(bundle: Path) -> dict:
    return json.loads((bundle / "manifest.json").read_text())


def rehash(bundle: Path) -> None:
    """A forgery done properly: every listed file's sha256 and manifest.sha256 made to match again."""
    data = manifest(bundle)
    for entry in data["files"]:
        if (bundle / entry["path"]).is_file():
            entry["sha256"] = hashlib.sha256((bundle / entry["path"]).read_bytes()).hexdigest()
    text = json.dumps(data, indent=2)
    (bundle / "manifest.json").write_text(text)
    (bundle / "manifest.sha256").write_text(f"{hashlib.sha256(text.encode()).hexdigest()}  manifest.json\n")
    if (bundle / "outcome.json").is_file():  # it names the manifest's sha256 (verify checks it)
        told = json.loads((bundle / "outcome.json").read_text())
        (bundle / "outcome.json").write_text(json.dumps({**told, "sha256": hashlib.sha256(text.encode()).hexdigest()}))


def edit_manifest(change: Callable[[dict], object]) -> Callable[[Path], None]:
    def edit(bundle: Path) -> None:
        data = manifest(bundle)
        result = change(data)
        (bundle / "manifest.json").write_text(json.dumps(data if result is None else result))

    return edit


def edit_verdicts(change: Callable[[dict], object]) -> Callable[[Path], None]:
    def edit(bundle: Path) -> None:
        data = json.loads((bundle / "verdicts.json").read_text())
        result = change(data)
        (bundle / "verdicts.json").write_text(json.dumps(data if result is None else result))
        rehash(bundle)  # past the hash check: the shape check is what refuses it

    return edit


def write_manifest_text(text: str) -> Callable[[Path], None]:
    return lambda bundle: (bundle / "manifest.json").write_text(text)


def healthy(data: dict) -> None:
    data["hosts"][0]["verdict"].update(id="healthy", severity="ok", action="none")


def host_file(bundle: Path, name: str) -> Path:
    return bundle / "hosts" / NAME / name


def set_key(data: dict, key: str, value: object) -> None:
    data[key] = value


CRAFTED: dict[str, tuple[Callable[[Path], None], str]] = {
    "verdicts edited to healthy": (lambda b: healthy_file(b), "verdicts.json: does not match its manifest"),
    "manifest.sha256 that lies": (
        lambda b: (b / "manifest.sha256").write_text("0" * 64 + "  manifest.json\n"),
        "manifest.json: does not match its manifest",
    ),
    "partial": (edit_manifest(lambda m: set_key(m, "partial", True)), "partial: an interrupted run's"),
    "started 1e400": (lambda b: started_1e400(b), "started: inf is no time"),
    "started a string": (edit_manifest(lambda m: set_key(m, "started", "yesterday")), "started: expected a time"),
    "started true": (edit_manifest(lambda m: set_key(m, "started", True)), "started: expected a time"),
    "manifest a list": (edit_manifest(lambda m: [m]), "manifest.json: expected a JSON object, found list"),
    "manifest not JSON": (write_manifest_text("{"), "manifest.json: not JSON"),
    "manifest nested too deep": (write_manifest_text("[" * 200_000), "manifest.json: not JSON"),
    "run_id missing": (edit_manifest(lambda m: m.pop("run_id") and None), "run_id: expected the bundle id"),
    "runbook a number": (edit_manifest(lambda m: set_key(m, "runbook", 7)), "runbook: expected the runbook's name"),
    "files an object": (edit_manifest(lambda m: set_key(m, "files", {})), "files: expected the list of files"),
    "a file entry a string": (edit_manifest(lambda m: m["files"].insert(0, "x")), "files[0]: expected an object"),
    "a listed path out of the bundle": (
        edit_manifest(lambda m: m["files"].append({"path": "../../../etc/passwd", "sha256": "0" * 64})),
        "files: ../../../etc/passwd: not a path inside the bundle",
    ),
    "verdicts a list": (edit_verdicts(lambda v: []), "verdicts.json: expected a JSON object, found list"),
    "verdicts without hosts": (edit_verdicts(lambda v: {}), "verdicts.json hosts: expected a list of hosts"),
    "a string verdict": (
        edit_verdicts(lambda v: v["hosts"][0].update(verdict="healthy")),
        "verdicts.json hosts[0].verdict: expected a verdict object, found str",
    ),
    "a host name a number": (
        edit_verdicts(lambda v: v["hosts"][0].update(host=17)),
        "verdicts.json hosts[0].host: expected a host name, found int",
    ),
    "an action a list": (
        edit_verdicts(lambda v: v["hosts"][0]["verdict"].update(action=["none"])),
        "verdicts.json hosts[0].verdict.action: expected a string",
    ),
}


def started_1e400(bundle: Path) -> None:
    text = json.dumps(manifest(bundle)).replace('"started": ', '"started": 1e400, "was": ')
    (bundle / "manifest.json").write_text(text)


def healthy_file(bundle: Path) -> None:
    data = json.loads((bundle / "verdicts.json").read_text())
    healthy(data)
    (bundle / "verdicts.json").write_text(json.dumps(data))


@pytest.mark.parametrize("case", list(CRAFTED))
def test_a_crafted_bundle_is_refused_naming_the_field_and_the_next_is_imported(
    real: Path, tmp_path: Path, case: str
) -> None:
    craft, message = CRAFTED[case]
    crafted = copy(real, tmp_path / "crafted" / real.name)
    craft(crafted)
    good = bundle_with_another_id(real, tmp_path / "good")
    db = tmp_path / "h.sqlite3"
    result = invoke("history", "--history", str(db), "import", str(crafted), str(good))
    assert result.exit_code == 2, result.output
    assert f"nightowl: {crafted}: {message}" in result.stderr, result.stderr
    assert f"{good}: 1 new event(s)" in result.stdout
    runs = store.read(db, "SELECT bundle_id FROM runs")
    assert [r["bundle_id"] for r in runs] == [manifest(good)["run_id"]]


def bundle_with_another_id(real: Path, where: Path) -> Path:
    """The real bundle under another run id (manifest rehashed): a second, genuine-looking bundle."""
    bundle = copy(real, where / "other")
    data = manifest(bundle)
    data["run_id"] = data["run_id"] + "-other"
    (bundle / "manifest.json").write_text(json.dumps(data))
    rehash(bundle)
    return bundle


def test_the_real_row_stands_against_a_rehashed_forgery_and_cites_the_manifest_hash(real: Path, tmp_path: Path) -> None:
    """The edited copy re-hashed throughout verifies on its own; its bundle id is known with another hash."""
    db = tmp_path / "h.sqlite3"
    forged = copy(real, tmp_path / "forged" / real.name)
    healthy_file(forged)
    rehash(forged)
    assert invoke("history", "--history", str(db), "import", str(real)).exit_code == 0
    result = invoke("history", "--history", str(db), "import", str(forged))
    assert result.exit_code == 2
    assert "is already recorded with sha256" in result.stderr and str(forged) in result.stderr
    runs = store.read(db, "SELECT action, bundle_sha256 FROM runs")
    real_sha = hashlib.sha256((real / "manifest.json").read_bytes()).hexdigest()
    assert runs == [{"action": "reboot-node", "bundle_sha256": real_sha}]
    assert {e["bundle_sha256"] for e in store.read(db, "SELECT bundle_sha256 FROM events")} == {real_sha}


def test_a_bundle_without_manifest_sha256_is_checked_against_its_manifest_and_its_hash_computed(
    real: Path, tmp_path: Path
) -> None:
    old = copy(real, tmp_path / "old" / real.name)
    (old / "manifest.sha256").unlink()  # bundles written before it existed
    db = tmp_path / "h.sqlite3"
    assert invoke("history", "--history", str(db), "import", str(old)).exit_code == 0
    sha = hashlib.sha256((old / "manifest.json").read_bytes()).hexdigest()
    assert store.read(db, "SELECT bundle_sha256 FROM runs") == [{"bundle_sha256": sha}]


def _limit_memory() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30))


def import_in_child(db: Path, *bundles: Path) -> subprocess.CompletedProcess[str]:
    """The import in its own process: a watchdog (timeout) where a hang is the bug, 2 GiB where memory is."""
    nightowl = str(Path(sys.executable).parent / "nightowl")
    args = [nightowl, "history", "--history", str(db), "import", *map(str, bundles)]
    return subprocess.run(args, capture_output=True, text=True, timeout=120, preexec_fn=_limit_memory)


def fifo(path: Path) -> None:
    path.unlink()
    os.mkfifo(path)


def link_to_dev_zero(path: Path) -> None:
    path.unlink()
    path.symlink_to("/dev/zero")


def unlisted(bundle: Path, name: str) -> None:
    """``name`` dropped from the manifest's files and commands, re-hashed: only the reader can refuse it."""
    data = manifest(bundle)
    rel = f"hosts/{NAME}/{name}"
    data["files"] = [f for f in data["files"] if f["path"] != rel]
    data["commands"] = [c for c in data["commands"] if c.get("file") != rel]
    (bundle / "manifest.json").write_text(json.dumps(data))
    rehash(bundle)


HOSTILE: dict[str, tuple[Callable[[Path], None], str]] = {
    "a FIFO as an output": (lambda b: fifo(host_file(b, "kernel-log.out")), "not a regular file"),
    "a FIFO as the manifest": (lambda b: fifo(b / "manifest.json"), "manifest.json: unreadable"),
    "a FIFO as manifest.sha256": (lambda b: fifo(b / "manifest.sha256"), "manifest.sha256: not a regular file"),
    "kernel-log.out -> /dev/zero": (
        lambda b: link_to_dev_zero(host_file(b, "kernel-log.out")),
        "kernel-log.out: a symbolic link, not followed",
    ),
    "kernel-log.out -> /dev/zero, unlisted": (
        lambda b: (unlisted(b, "kernel-log.out"), link_to_dev_zero(host_file(b, "kernel-log.out"))),
        "hosts: unreadable (kernel-log.out: a symbolic link, not followed)",
    ),
    "a FIFO as an output, unlisted": (
        lambda b: (unlisted(b, "kernel-log.out"), fifo(host_file(b, "kernel-log.out"))),
        "hosts: unreadable (kernel-log.out: not a regular file)",
    ),
}


@pytest.mark.parametrize("case", list(HOSTILE))
def test_a_fifo_or_a_link_to_dev_zero_never_blocks_nor_fills_memory(real: Path, tmp_path: Path, case: str) -> None:
    craft, message = HOSTILE[case]
    hostile = copy(real, tmp_path / "hostile" / real.name)
    craft(hostile)
    good = bundle_with_another_id(real, tmp_path / "good")
    done = import_in_child(tmp_path / "h.sqlite3", hostile, good)
    assert done.returncode == 2, done.stderr
    assert f"nightowl: {hostile}: " in done.stderr and message in done.stderr, done.stderr
    assert f"{good}: 1 new event(s)" in done.stdout


def test_a_host_folder_that_is_a_link_is_not_followed(real: Path, tmp_path: Path) -> None:
    """A folder outside the bundle, linked in as a host and left out of the manifest, gives no row."""
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "kernel-log.out").write_text(
        "[Fri Apr  5 21:29:39 2024] NVRM: Xid (PCI:0000:b1:00): 79, pid='<unknown>', name=<unknown>, GPU has "
        "fallen off the bus.\n"
    )
    bundle = copy(real, tmp_path / "b" / real.name)
    (bundle / "hosts" / "planted").symlink_to(outside, target_is_directory=True)
    db = tmp_path / "h.sqlite3"
    assert invoke("history", "--history", str(db), "import", str(bundle)).exit_code == 0
    assert {r["host"] for r in store.read(db, "SELECT host FROM events")} == {NAME}
    # and a listed host folder that is a link is refused before anything is hashed through it
    linked = copy(real, tmp_path / "l" / real.name)
    shutil.move(linked / "hosts" / NAME, outside / NAME)
    (linked / "hosts" / NAME).symlink_to(outside / NAME, target_is_directory=True)
    result = invoke("history", "--history", str(tmp_path / "h2.sqlite3"), "import", str(linked))
    assert result.exit_code == 2 and f"{NAME}: a symbolic link, not followed" in result.stderr, result.stderr


def test_history_never_fails_on_a_stored_row_that_is_not_what_the_schema_says(real: Path, tmp_path: Path) -> None:
    db = tmp_path / "h.sqlite3"
    assert invoke("history", "--history", str(db), "import", str(real)).exit_code == 0
    with sqlite3.connect(db) as conn:
        conn.execute("UPDATE runs SET gpus = 'not json{', started = 'yesterday'")
        conn.execute("UPDATE events SET count = 'many', first_ts = x'00ff', first_time = x'00ff'")
        conn.execute(
            """INSERT INTO runs (bundle_id, host, runbook, started, gpus, recorded)
               VALUES ('b2', 'gpu-17', 'xid', 9e999, '{"a": 1}', 0), ('b3', 'gpu-17', 'xid', 1e300, '[[1]]', 0)"""
        )
    for args in ((), ("--format", "json"), ("--gpu", "0000:a1:00"), ("--top",), ("--top", "--format", "json")):
        result = invoke("history", "--history", str(db), *args)
        assert result.exit_code == 0, (args, result.output)
