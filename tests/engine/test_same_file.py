"""A repeating sweep's bundles link the output files they share byte for byte with the last bundle
(nightowl/engine/same_file.py): each bundle still holds and verifies every file, removing one leaves the other
whole, and a file that differs, or that changed since it was stored, is written anew."""

from __future__ import annotations

import json
import os
import shutil
import stat
from pathlib import Path

from click.testing import CliRunner

from nightowl.cli.main import main
from nightowl.engine import same_file
from nightowl.engine.bundle_verify import verify_bundle
from nightowl.engine.bundle_writer import BundleWriter
from nightowl.paths import data_dir
from nightowl.transports.base import CommandResult

HOST = data_dir("fixtures") / "hosts" / "xid79-fallen-off-bus"


def bundle_of(replay: Path, out: Path) -> Path:
    result = CliRunner().invoke(
        main, ["triage", "xid", "--replay", str(replay), "--out", str(out), "--format", "json", "--history", "off"]
    )
    return Path(json.loads(result.stdout)["bundle"])


def outputs(bundle: Path) -> list[Path]:
    return sorted(path for path in (bundle / "hosts").rglob("*") if path.is_file())


def test_a_second_bundle_links_the_outputs_the_first_stored_with_the_same_bytes(tmp_path: Path) -> None:
    with same_file.linking() as links:
        first = bundle_of(HOST, tmp_path)
        second = bundle_of(HOST, tmp_path)
    assert outputs(second) and links.linked == len(outputs(second)) + 1  # and the runbook
    assert os.path.samefile(first / "runbook.yaml", second / "runbook.yaml")
    for path in outputs(second):
        assert os.path.samefile(path, first / path.relative_to(second))
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert not any(os.path.samefile(first / name, second / name) for name in ("manifest.json", "trace.json"))
    assert verify_bundle(first) == [] and verify_bundle(second) == []
    shutil.rmtree(first)  # pruned: the second keeps its files
    assert verify_bundle(second) == []


def test_a_file_that_changed_since_it_was_stored_is_written_anew(tmp_path: Path) -> None:
    with same_file.linking() as links:
        first = bundle_of(HOST, tmp_path)
        changed = outputs(first)[0]
        with changed.open("ab") as handle:  # written over in place after the fact
            handle.write(b"edited\n")
        second = bundle_of(HOST, tmp_path)
    twin = second / changed.relative_to(first)
    assert not os.path.samefile(changed, twin) and not twin.read_bytes().endswith(b"edited\n")
    assert links.linked == len(outputs(second)) - 1 + 1  # all but the changed one, and the runbook
    assert verify_bundle(second) == [] and verify_bundle(first) != []


def test_without_a_repeating_sweep_every_file_is_its_own(tmp_path: Path) -> None:
    first, second = bundle_of(HOST, tmp_path), bundle_of(HOST, tmp_path)
    assert all(path.stat().st_nlink == 1 for path in outputs(first) + outputs(second))


def result(argv: list[str], stdout: str) -> CommandResult:
    return CommandResult(argv, 0, stdout, "", 0.0, 0.1)


def test_outputs_of_one_bundle_with_the_same_bytes_are_one_file(tmp_path: Path) -> None:
    """The shared query's answer stored as two readers' outputs (nvidia-smi.out and fabric.out) is one inode;
    an output with other bytes, or a bundle outside a repeating sweep, has its own."""
    answer = "index, pci.bus_id\n0, 00000000:18:00.0\n"
    with same_file.linking() as links:
        writer = BundleWriter(tmp_path, "node-health")
        writer.record_command("gpu-1", "nvidia-smi", result(["nvidia-smi"], answer), True)
        writer.record_command("gpu-1", "fabric", result(["nvidia-smi"], answer), True)
        writer.record_command("gpu-2", "fabric", result(["nvidia-smi"], answer), True)
        writer.record_command("gpu-1", "nvlink", result(["nvidia-smi", "nvlink", "-s"], answer + "more\n"), True)
        bundle = writer.finish([], False)
    host = bundle / "hosts" / "gpu-1"
    assert os.path.samefile(host / "nvidia-smi.out", host / "fabric.out")
    assert os.path.samefile(host / "fabric.out", bundle / "hosts" / "gpu-2" / "fabric.out")
    assert not os.path.samefile(host / "nvidia-smi.out", host / "nvlink.out")
    assert links.linked == 2 and (host / "fabric.out").read_text() == answer
    assert stat.S_IMODE((host / "fabric.out").stat().st_mode) == 0o600 and verify_bundle(bundle) == []
    alone = BundleWriter(tmp_path / "alone", "node-health")
    alone.record_command("gpu-1", "nvidia-smi", result(["nvidia-smi"], answer), True)
    alone.record_command("gpu-1", "fabric", result(["nvidia-smi"], answer), True)
    assert (alone.finish([], False) / "hosts" / "gpu-1" / "fabric.out").stat().st_nlink == 1


def test_a_twin_renamed_by_a_second_take_is_linked_where_it_now_is(tmp_path: Path) -> None:
    with same_file.linking():
        writer = BundleWriter(tmp_path, "node-health")
        writer.record_command("gpu-1", "nvidia-smi", result(["nvidia-smi"], "same\n"), True)
        writer.record_command("gpu-1", "nvidia-smi", result(["nvidia-smi"], "other\n"), True)  # .out -> .1.out
        writer.record_command("gpu-1", "fabric", result(["nvidia-smi"], "same\n"), True)
        bundle = writer.finish([], False)
    host = bundle / "hosts" / "gpu-1"
    assert (host / "nvidia-smi.1.out").read_text() == (host / "fabric.out").read_text() == "same\n"
    assert os.path.samefile(host / "nvidia-smi.1.out", host / "fabric.out")
    assert (host / "nvidia-smi.2.out").read_text() == "other\n" and verify_bundle(bundle) == []
