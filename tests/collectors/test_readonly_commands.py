"""The read-only shapes are data (nightowl/collectors/readonly_commands.yaml), grouped by the kind that
declares them; ``readonly.allowed_shapes`` reads the file once."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from nightowl.collectors import MODULES, get_collector, readonly


def test_each_kind_lists_commands_its_collector_declares() -> None:
    by_kind = yaml.safe_load(readonly.COMMANDS_FILE.read_text(encoding="utf-8"))
    assert set(by_kind) <= set(MODULES)
    for kind, commands in by_kind.items():
        collector = get_collector(kind)
        declared = {tuple(argv) for argv in collector.commands}
        # a collector's incremental reads (engine/incremental.py) declare theirs on its cursor
        cursor = getattr(collector, "cursor", None)
        declared |= {tuple(argv) for argv in (cursor.shapes if cursor is not None else ())}
        assert {tuple(argv) for argv in commands} <= declared, kind
    assert readonly.allowed_shapes() == readonly.ALLOWED


@pytest.mark.parametrize("body", ["kind-a:\n  - [cat, --, 1]\n", "kind-a:\n  - cat\n", "kind-a:\n  - []\n"])
def test_a_command_that_is_not_a_list_of_strings_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, body: str
) -> None:
    file = tmp_path / "readonly_commands.yaml"
    file.write_text(body, encoding="utf-8")
    monkeypatch.setattr(readonly, "COMMANDS_FILE", file)
    with pytest.raises(ValueError, match="readonly_commands.yaml: kind-a: a command is a list of strings"):
        readonly.allowed_shapes.__wrapped__()


def test_a_shape_removed_from_the_file_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    file = tmp_path / "readonly_commands.yaml"
    file.write_text("nvlink:\n  - [nvidia-smi, nvlink, -s]\n", encoding="utf-8")
    monkeypatch.setattr(readonly, "COMMANDS_FILE", file)
    monkeypatch.setattr(readonly, "allowed_shapes", readonly.allowed_shapes.__wrapped__)
    assert readonly.allowed_shape.__wrapped__(("nvidia-smi", "nvlink", "-s")) == ("nvidia-smi", "nvlink", "-s")
    assert readonly.allowed_shape.__wrapped__(("nvidia-smi", "nvlink", "-e")) is None
