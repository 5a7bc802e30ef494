"""A run keeps what it parsed for the history store (nightowl/engine/parse_memo.py): the rows the store gets
must be the rows it gets by parsing the bundle again, and the kept results must be used."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from nightowl import history
from nightowl.engine import parse_memo
from nightowl.history import extract
from nightowl.library import runbooks
from nightowl.run import run_and_save
from nightowl.transports.replay import ReplayTransport

ROOT = Path(__file__).resolve().parents[2]
# Hosts whose outputs the history reads: earlier boots, fabric, ib ports (two reads), nvidia-smi, kernel log.
HOSTS = ("xid79-previous-boot-same-gpu", "fabric-health-unhealthy-clique2", "ib-healthy-ndr", "fabric-not-read-h100")


def test_rows_from_kept_results_are_the_rows_from_the_bundle(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    hits: list[str] = []
    recall, recall_file = parse_memo.recall, parse_memo.recall_file

    def counting(kind: str, text: str) -> Any:
        found = recall(kind, text)
        if found is not None:
            hits.append(kind)
        return found

    def counting_file(kind: str, digest: str | None) -> Any:  # found by the manifest's sha256: file not read
        found = recall_file(kind, digest)
        if found is not None:
            hits.append(kind)
        return found

    monkeypatch.setattr(parse_memo, "recall", counting)
    monkeypatch.setattr(parse_memo, "recall_file", counting_file)
    transports = {name: (lambda n=name: ReplayTransport(ROOT / "fixtures" / "hosts" / n)) for name in HOSTS}
    kept_rows: list[dict[str, Any]] = []
    real = extract.bundle_record

    def recording(bundle: Path) -> dict[str, Any]:
        kept_rows.append(real(bundle))  # inside the run: the kept results are there
        return kept_rows[-1]

    monkeypatch.setattr(extract, "bundle_record", recording)
    history.activate(tmp_path / "history.db")
    try:
        result = run_and_save(
            runbooks.load("node-health"), transports, tmp_path, history=True, params={"ib_window_seconds": 0}
        )
    finally:
        history.deactivate()
    assert result.bundle is not None
    assert kept_rows, "the run recorded its bundle"
    assert {"kernel-log", "nvidia-smi", "fabric"} <= set(hits)
    assert parse_memo.recall("kernel-log", "x") is None  # dropped after the run
    assert real(result.bundle) == kept_rows[0]  # parsed again from the bundle, nothing kept: the same rows


def test_nothing_is_kept_outside_a_run_or_of_other_kinds() -> None:
    parse_memo.remember("kernel-log", "text", {"events": []})
    assert parse_memo.recall("kernel-log", "text") is None
    with parse_memo.keeping(frozenset({"kernel-log"})):
        parse_memo.remember("kernel-log", "text", {"events": []})
        parse_memo.remember("metrics", "text", {"x": 1})
        assert parse_memo.recall("kernel-log", "text") == {"events": []}
        assert parse_memo.recall("kernel-log", "text ") is None
        assert parse_memo.recall("metrics", "text") is None
    assert parse_memo.recall("kernel-log", "text") is None


def test_a_text_the_normaliser_unwraps_is_kept_under_the_text_as_received() -> None:
    """The parse (its normaliser included) is a pure function of the text the bundle keeps: a reader of that
    very text gets what parsing it again would give, and another text gets nothing."""

    def parse(text: str) -> dict[str, str]:
        return {"read": text.replace("\x1b[1m", "")}

    with parse_memo.keeping(frozenset({"kernel-log"})):
        assert parse_memo.parse_and_keep("kernel-log", parse, "\x1b[1mXid") == {"read": "Xid"}
        assert parse_memo.recall("kernel-log", "\x1b[1mXid") == parse("\x1b[1mXid")
        assert parse_memo.recall("kernel-log", "Xid") is None
