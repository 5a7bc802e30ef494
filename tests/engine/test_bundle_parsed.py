"""A bundle's ``parsed/`` copy of what the run parsed of an output it stored scrubbed (engine/readback.py
``bundle_parsed``): found beside the output it stands for, of its kind only, and nothing for a bundle that keeps
none (looked for once, not opened file by file)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from nightowl.engine import layout
from nightowl.engine.readback import bundle_parsed


def bundle_with(root: Path, parsed: dict[str, object] | None) -> Path:
    """A bundle folder holding ``hosts/gpu-1/kernel-log.out`` and, when given, its ``parsed/`` copy."""
    output = root / layout.HOSTS / "gpu-1" / "kernel-log.out"
    output.parent.mkdir(parents=True)
    output.write_text("NVRM: Xid (PCI:0000:3b:00): 79, GPU has fallen off the bus.\n")
    if parsed is not None:
        copy = root / layout.PARSED / layout.HOSTS / "gpu-1" / "kernel-log.out.json"
        copy.parent.mkdir(parents=True)
        copy.write_text(json.dumps(parsed))
    return output


def test_the_copy_beside_the_output_is_read_for_its_kind_only(tmp_path: Path) -> None:
    output = bundle_with(tmp_path, {"kind": "kernel-log", "file": "hosts/gpu-1/kernel-log.out", "result": {"n": 1}})
    assert bundle_parsed("kernel-log", output) == {"n": 1}
    assert bundle_parsed("nvidia-smi", output) is None


def test_a_bundle_that_keeps_no_parse_gives_none(tmp_path: Path) -> None:
    assert bundle_parsed("kernel-log", bundle_with(tmp_path, None)) is None


def test_a_relative_path_and_a_file_outside_hosts_are_read_as_such(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bundle_with(tmp_path, {"kind": "kernel-log", "result": {"n": 2}})
    monkeypatch.chdir(tmp_path)
    assert bundle_parsed("kernel-log", Path(layout.HOSTS, "gpu-1", "kernel-log.out")) == {"n": 2}
    assert bundle_parsed("kernel-log", Path("gpu-1", "kernel-log.out")) is None
    assert bundle_parsed("kernel-log", Path("kernel-log.out")) is None


def test_a_copy_bigger_than_the_cap_is_not_read(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from nightowl.engine import readback

    output = bundle_with(tmp_path, {"kind": "kernel-log", "result": {"n": 3}})
    size = len((tmp_path / layout.PARSED / layout.HOSTS / "gpu-1" / "kernel-log.out.json").read_bytes())
    monkeypatch.setattr(readback, "PARSED_MAX_BYTES", size)
    assert bundle_parsed("kernel-log", output) == {"n": 3}
    monkeypatch.setattr(readback, "PARSED_MAX_BYTES", size - 1)
    assert bundle_parsed("kernel-log", output) is None
