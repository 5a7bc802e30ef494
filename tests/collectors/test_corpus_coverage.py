"""Every real sample in fixtures/ is the input of at least one parse case (cases/<kind>/*.json)."""

from __future__ import annotations

import json

from tests.helpers import CASES, ROOT

SAMPLE_FOLDERS = ("fixtures/corpus", "fixtures/corpus-extra")
NOT_SAMPLES = {"INDEX.md", "SOURCE.md"}


def test_every_corpus_sample_has_a_parse_case() -> None:
    inputs = {json.loads(case.read_text())["input"] for case in CASES.glob("*/*.json")}
    samples = {
        path.relative_to(ROOT).as_posix()
        for folder in SAMPLE_FOLDERS
        for path in (ROOT / folder).rglob("*")
        if path.is_file() and path.name not in NOT_SAMPLES
    }
    assert samples, "no samples found"
    assert sorted(samples - inputs) == []
