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
from nightowl.paths import data_dir

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


def test_an_output_stored_last_round_is_not_scrubbed_and_hashed_again(tmp_path: Path) -> None:
    """The same output as the one last stored for the host and kind takes its scrubbed bytes and sha256; another
    is scrubbed (a secret in it never reaches the file), and without a repeating sweep every output is."""
    from nightowl.engine.bundle_writer import BundleWriter
    from nightowl.redact import scrub_secrets
    from nightowl.transports.base import CommandResult

    scrubbed: list[str] = []

    def redact(text: str) -> str:
        scrubbed.append(text)
        return scrub_secrets(text)

    def record(out: Path, text: str) -> dict:
        writer = BundleWriter(out, "xid", redact=redact)
        writer.record_command("gpu-1", "kernel-log", CommandResult(("dmesg",), 0, text, "", 0.0, 0.1), True)
        return writer.commands[0]

    same = "NVRM: Xid (PCI:0000:18:00): 79, GPU has fallen off the bus. token=s3cr3tvalue42\n"
    with same_file.linking():
        first, second = record(tmp_path / "a", same), record(tmp_path / "b", same)
        other = record(tmp_path / "c", same + "one more line\n")
    assert scrubbed.count(same) == 1 and first["sha256"] == second["sha256"] and first["bytes"] == second["bytes"]
    assert same + "one more line\n" in scrubbed and other["sha256"] != first["sha256"]
    assert "s3cr3tvalue42" not in (tmp_path / "b").glob(".*/hosts/*/kernel-log.out").__next__().read_text()
    record(tmp_path / "d", same)  # not in a repeating sweep
    assert scrubbed.count(same) == 2


def test_scrubbed_outputs_are_kept_only_for_what_the_last_bundle_read_and_within_a_total(
    tmp_path: Path, monkeypatch
) -> None:  # type: ignore[no-untyped-def]
    """A host gone from the inventory (or a kind no longer read) leaves the memo at the next bundle's end; and
    past SCRUBBED_TOTAL an output is not kept (it is scrubbed again next time)."""
    links = same_file.SameFile()
    links.keep_scrubbed("gpu-1", "nvlink", "a", "a", b"a", "sha-a")
    links.keep_scrubbed("gpu-2", "nvlink", "b", "b", b"b", "sha-b")
    links.remember(tmp_path, {})  # the first bundle: both written
    assert links.scrubbed("gpu-1", "nvlink", "a") == ("a", b"a", "sha-a")  # gpu-1 read again; gpu-2 is not
    links.remember(tmp_path, {})
    assert links.scrubbed("gpu-2", "nvlink", "b") is None
    assert links.scrubbed("gpu-1", "nvlink", "a") == ("a", b"a", "sha-a")
    monkeypatch.setattr(same_file, "SCRUBBED_TOTAL", 10)
    links.keep_scrubbed("gpu-3", "nvlink", "c" * 4, "c" * 4, b"c" * 4, "sha-c")  # 12 with the 3 kept: past 10
    assert links.scrubbed("gpu-3", "nvlink", "c" * 4) is None
