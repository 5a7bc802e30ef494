"""What a run holds per host once the host is done (issue 22, memory): the raw outputs are in the bundle, not
in the runs a sweep keeps until its end; the history finds the run's parse results by the manifest's sha256
without reading the outputs back, and never for a text its file would not give back."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from nightowl import history
from nightowl.engine.parse_memo import ParsedOutputs
from nightowl.history import extract
from nightowl.library import runbooks
from nightowl.run import RunSettings, run_and_save
from nightowl.transports.replay import ReplayTransport

ROOT = Path(__file__).resolve().parents[2]
HOSTS = ("xid79-previous-boot-same-gpu", "fabric-health-unhealthy-clique2")


def _run(tmp_path: Path, history_on: bool = False, store: Path | None = None):  # type: ignore[no-untyped-def]
    transports = {name: (lambda n=name: ReplayTransport(ROOT / "fixtures" / "hosts" / n)) for name in HOSTS}
    context = history.run_context(store)
    return run_and_save(
        runbooks.load("node-health"), transports, tmp_path, settings=RunSettings(history=history_on), context=context
    )


def test_runs_kept_after_a_host_hold_no_output_while_the_bundle_keeps_every_byte(tmp_path: Path) -> None:
    result = _run(tmp_path)
    assert result.bundle is not None
    manifest = json.loads((result.bundle / "manifest.json").read_text())
    kept = [c for c in manifest["commands"] if c["file"]]
    assert kept and any(c["bytes"] > 1000 for c in kept)
    for entry in kept:  # every output the run used is on disk, byte for byte what the manifest hashed
        data = (result.bundle / entry["file"]).read_bytes()
        assert len(data) == entry["bytes"] and hashlib.sha256(data).hexdigest() == entry["sha256"]
    for run in result.runs:
        assert run.collections, run.host
        for collection in run.collections.values():
            assert collection.text == ""
            assert all(a.stdout == "" and a.stderr == "" for a in collection.attempts)
        assert any(c.facts for c in run.collections.values())  # the facts stay: outliers and reports read them
        assert run.verdict is not None and run.path


def test_the_history_of_a_run_is_the_history_of_its_bundle_read_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    read: list[Path] = []
    real_read = extract.read_output  # how the history reads a recorded output back

    def counting(path: Path) -> str:
        read.append(path)
        return real_read(path)

    rows: list[dict[str, object]] = []
    real_record = extract.bundle_record

    def recording(bundle: Path, **given: object) -> dict[str, object]:
        with monkeypatch.context() as patch:
            patch.setattr(extract, "read_output", counting)
            rows.append(real_record(bundle, **given))
        return rows[-1]

    monkeypatch.setattr(extract, "bundle_record", recording)
    result = _run(tmp_path / "out", history_on=True, store=tmp_path / "history.db")
    assert result.bundle is not None and rows
    # Every output the run parsed was found by the manifest's sha256; only empty ones (never parsed) are read.
    assert read and all(path.stat().st_size == 0 for path in read), [p for p in read if p.stat().st_size]
    assert real_record(result.bundle) == rows[0]  # parsed afresh from the files: the very same rows


def test_a_file_digest_never_finds_a_result_for_a_text_its_file_would_not_give_back() -> None:
    kept = ParsedOutputs({"kernel-log"})
    clean, odd = "NVRM: Xid 79\n", "NVRM: Xid 79 \udcff\n"  # a lone surrogate: undecodable bytes kept
    kept.remember("kernel-log", clean, {"events": ["clean"]})
    kept.remember("kernel-log", odd, {"events": ["odd"]})
    digest = hashlib.sha256(clean.encode()).hexdigest()
    assert kept.recall_file("kernel-log", digest) == {"events": ["clean"]}
    assert kept.recall_file("nvidia-smi", digest) is None  # another kind
    stored = hashlib.sha256(odd.encode("utf-8", "surrogateescape")).hexdigest()
    assert kept.recall_file("kernel-log", stored) is None
    assert kept.recall("kernel-log", odd) == {"events": ["odd"]}  # by its text it is still found
    assert kept.recall_file("kernel-log", "not hex") is None
    assert kept.recall_file("kernel-log", None) is None
