"""A recorded host folder's outputs of a kind, as the history rows read them (history/extract.py ``_outputs``):
the names the globs ``kind.out`` and ``kind.[0-9]*.out`` match, from one listing of the folder."""

from __future__ import annotations

from pathlib import Path

import pytest

from nightowl.history.extract import _entries, _outputs

NAMES = [
    "kernel-log.out", "kernel-log.1.out", "kernel-log.2.out", "kernel-log.12abc.out", "kernel-log..out",
    "kernel-log.x.out", "kernel-log.1.err", "kernel-log-boots.out", "kernel-log-boots.1.out", "nvidia-smi.out",
    "nvidia-smi.1.rc", "fabric.1\nx.out", ".kernel-log.out",
]  # fmt: skip


@pytest.mark.parametrize("kind", ["kernel-log", "kernel-log-boots", "nvidia-smi", "fabric", "ib-ports"])
def test_the_outputs_of_a_kind_are_the_names_its_globs_match(kind: str, tmp_path: Path) -> None:
    for name in NAMES:
        (tmp_path / name).write_text("")
    globbed = sorted([*tmp_path.glob(f"{kind}.out"), *tmp_path.glob(f"{kind}.[0-9]*.out")])
    assert _outputs(tmp_path, kind, _entries(tmp_path)) == globbed


def test_a_folder_that_cannot_be_listed_has_no_outputs(tmp_path: Path) -> None:
    gone = tmp_path / "gone"
    assert _entries(gone) == [] and _outputs(gone, "kernel-log", _entries(gone)) == []
