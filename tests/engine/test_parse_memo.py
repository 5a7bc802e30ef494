"""A run keeps what it parsed for the history store (nightowl/engine/parse_memo.py): the rows the store gets
must be the rows it gets by parsing the bundle again, and the kept results must be used; they travel with the
run's result, held by no module."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from nightowl import history
from nightowl.engine.parse_memo import ParsedOutputs
from nightowl.history import extract
from nightowl.library import runbooks
from nightowl.run import run_and_save
from nightowl.transports.replay import ReplayTransport

ROOT = Path(__file__).resolve().parents[2]
# Hosts whose outputs the history reads: earlier boots, fabric, ib ports (two reads), nvidia-smi, kernel log.
HOSTS = ("xid79-previous-boot-same-gpu", "fabric-health-unhealthy-clique2", "ib-healthy-ndr", "fabric-not-read-h100")


def test_rows_from_kept_results_are_the_rows_from_the_bundle(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    hits: list[str] = []
    recall, recall_file = ParsedOutputs.recall, ParsedOutputs.recall_file

    def counting(self: ParsedOutputs, kind: str, text: str, as_json: bool = False) -> Any:
        found = recall(self, kind, text, as_json)
        if found is not None:
            hits.append(kind)
        return found

    def counting_file(self: ParsedOutputs, kind: str, digest: str | None, as_json: bool = False) -> Any:
        found = recall_file(self, kind, digest, as_json)  # by the manifest's sha256: the file is not read
        if found is not None:
            hits.append(kind)
        return found

    monkeypatch.setattr(ParsedOutputs, "recall", counting)
    monkeypatch.setattr(ParsedOutputs, "recall_file", counting_file)
    transports = {name: (lambda n=name: ReplayTransport(ROOT / "fixtures" / "hosts" / n)) for name in HOSTS}
    kept_rows: list[dict[str, Any]] = []
    real = extract.bundle_record

    def recording(bundle: Path, **given: Any) -> dict[str, Any]:
        kept_rows.append(real(bundle, **given))  # the run hands its kept results in
        return kept_rows[-1]

    monkeypatch.setattr(extract, "bundle_record", recording)
    context = history.run_context(tmp_path / "history.db")
    result = run_and_save(
        runbooks.load("node-health"), transports, tmp_path, params={"ib_window_seconds": 0}, context=context
    )
    assert result.bundle is not None
    assert kept_rows, "the run recorded its bundle"
    assert {"kernel-log", "nvidia-smi", "fabric"} <= set(hits)
    assert result.parsed.kinds >= {"kernel-log", "nvidia-smi", "fabric"}  # they travel with the result
    assert real(result.bundle) == kept_rows[0]  # parsed again from the bundle, nothing kept: the same rows


def test_nothing_is_kept_outside_a_run_or_of_other_kinds() -> None:
    nothing = ParsedOutputs()  # a run whose readers read nothing back keeps nothing
    nothing.remember("kernel-log", "text", {"events": []})
    assert nothing.recall("kernel-log", "text") is None
    kept = ParsedOutputs({"kernel-log"})
    kept.remember("kernel-log", "text", {"events": []})
    kept.remember("metrics", "text", {"x": 1})
    assert kept.recall("kernel-log", "text") == {"events": []}
    assert kept.recall("kernel-log", "text ") is None
    assert kept.recall("metrics", "text") is None
    assert ParsedOutputs({"kernel-log"}).recall("kernel-log", "text") is None  # another run's: its own


def test_a_text_the_normaliser_unwraps_is_kept_under_the_text_as_received() -> None:
    """The parse (its normaliser included) is a pure function of the text the bundle keeps: a reader of that
    very text gets what parsing it again would give, and another text gets nothing."""

    def parse(text: str) -> dict[str, str]:
        return {"read": text.replace("\x1b[1m", "")}

    kept = ParsedOutputs({"kernel-log"})
    assert kept.parse_and_keep("kernel-log", parse, "\x1b[1mXid") == {"read": "Xid"}
    assert kept.recall("kernel-log", "\x1b[1mXid") == parse("\x1b[1mXid")
    assert kept.recall("kernel-log", "Xid") is None
