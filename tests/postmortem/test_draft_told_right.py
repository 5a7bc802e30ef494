"""The Markdown draft as a responder reads it (issue 45 item 9): no Mermaid block, no raw Jinja as evidence,
an NVRM message's continuation lines folded into its row (never "(no time written)" key moments), a boot's
driver load as context, and how long a GPU had been off the bus when nightowl looked."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from nightowl.postmortem import bundle_context, render_bundle
from nightowl.postmortem.clocks import duration, epoch_of, stamp
from tests.postmortem.bundles import make_bundle, section

OFF_THE_BUS = "xid79-fallen-off-bus"  # dmesg -T: driver load, Xid 79, a crash-dump banner over three lines


@pytest.fixture(scope="module")
def xid79(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_bundle(tmp_path_factory.mktemp("b"), [OFF_THE_BUS])


def test_no_mermaid_block_and_no_raw_jinja_as_evidence(xid79: Path) -> None:
    text = render_bundle(xid79)
    assert "```mermaid" not in text and "flowchart TD" not in text
    causes = section(text, "Root causes")
    evidence = [line for line in causes.splitlines() if line.startswith("  - `")]
    assert evidence, causes
    assert not [line for line in evidence if "| default(" in line or "| length" in line]
    facts = [re.match(r"  - `([^`]+)`", line).group(1) for line in evidence]  # type: ignore[union-attr]
    assert facts.count("kernel_log.fallen_off_bus_gpus") == 1  # the condition's read, not listed twice


def test_a_condition_read_not_listed_elsewhere_is_named_with_its_node(tmp_path: Path) -> None:
    from nightowl.postmortem.candidates import readable_evidence

    condition = {"fact": "gpu-visible: (a.b | default([])) | length > 0", "value": {"a.b": [1], "c.d": 2}}
    rows = readable_evidence([{"fact": "a.b", "value": [1]}, condition])
    assert [(r["fact"], r["value"]) for r in rows] == [("a.b", [1]), ("c.d (read at gpu-visible)", 2)]


def test_continuation_lines_fold_into_their_message_and_a_driver_load_is_context(xid79: Path) -> None:
    context = bundle_context(xid79)
    assert not [m for m in context["unplaced"] if m["lane"] == OFF_THE_BUS]
    rows = {m["what"]: m for m in context["timeline"]}
    banner = next(what for what in rows if what.startswith("NVRM: A GPU crash dump has been created"))
    assert banner.endswith(
        "run nvidia-bug-report.sh as root to collect this data before the NVIDIA kernel module is unloaded."
    )
    assert [(c["start"], c["end"]) for c in rows[banner]["cites"]] == [(5, 7)]
    load = next(m for what, m in rows.items() if what.startswith("NVIDIA driver 535.161.07 loaded"))
    assert load["tag"] == "context"
    assert "(no time written)" not in render_bundle(xid79)


def test_how_long_the_gpu_had_been_off_the_bus(xid79: Path, tmp_path: Path) -> None:
    first = epoch_of("2024-04-05T21:29:39")[0]  # the Xid 79 line, host time read as UTC
    assert first is not None
    replayed = section(render_bundle(xid79), "Impact")
    assert f"GPU 0000:a1:00 on {OFF_THE_BUS} off the bus since {stamp(first)} (for how long is not known: " in replayed
    live = tmp_path / "live"
    live.mkdir()
    for path in xid79.iterdir():
        if path.is_file():
            (live / path.name).write_bytes(path.read_bytes())
    (live / "hosts").symlink_to(xid79 / "hosts")
    manifest = json.loads((live / "manifest.json").read_text())
    manifest.pop("replayed_hosts", None)  # as a live capture records it
    (live / "manifest.json").write_text(json.dumps(manifest))
    span = duration(manifest["started"] - first)
    told = f"off the bus since {stamp(first)}, {span} before nightowl's capture"
    assert told in section(render_bundle(live), "Impact")
