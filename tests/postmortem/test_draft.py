"""Drafts rendered from bundles of real recorded incidents: order, citations, candidates, integrity."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from nightowl.cli.postmortem_cmd import postmortem
from nightowl.postmortem import bundle_context, render_bundle
from tests.postmortem.bundles import HEX64, evidence_rows, make_bundle, manifest_hashes, section


@pytest.fixture(scope="module")
def xid79(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The demo incident: Xid 79, GPU fell off the bus (akash-network/support#209)."""
    return make_bundle(tmp_path_factory.mktemp("b"), ["xid79-fallen-off-bus"])


def invoke(*args: str):
    return CliRunner().invoke(postmortem, list(args), catch_exceptions=False)


def test_demo_draft_has_every_section_in_order(xid79: Path) -> None:
    text = invoke(str(xid79)).output
    titles = re.findall(r"^## (.+)$", text, re.M)
    assert titles == [
        "Summary",
        "Impact",
        "Detection",
        "Timeline",
        "Decision path",
        "Root-cause candidates",
        "Actions",
        "Evidence",
        "Open questions",
    ]
    assert text.startswith("# Postmortem draft: gpu-fell-off-bus on xid79-fallen-off-bus")
    # The kernel log says: driver 535.161.07 loaded Apr 4, Xid 79 on 0000:a1:00 Apr 5 21:29:39, a crash dump.
    timeline = section(text, "Timeline")
    assert "NVIDIA driver 535.161.07 loaded" in timeline
    assert "Xid 79 on 0000:a1:00" in timeline and "2024-04-05T21:29:39" in timeline
    assert "nvidia-bug-report.sh" in section(text, "Open questions")
    assert "No alert is recorded" in section(text, "Detection")
    assert "```mermaid" in section(text, "Decision path")


def test_timeline_is_sorted_and_names_its_clocks(xid79: Path) -> None:
    context = bundle_context(xid79)
    epochs = [m["epoch"] for m in context["timeline"]]
    assert epochs == sorted(epochs)
    whats = [m["what"] for m in context["timeline"]]
    # The driver loaded a day before the Xid; both precede nightowl's own capture.
    assert (
        whats.index("NVIDIA driver 535.161.07 loaded (this boot)")
        < next(i for i, w in enumerate(whats) if w.startswith("Xid 79"))
        < next(i for i, w in enumerate(whats) if w.startswith("nightowl started"))
    )
    clocks = {m["clock"] for m in context["timeline"]}
    assert clocks == {"nightowl (UTC)", "host local time (zone not written; read as UTC)"}  # dmesg -T has no zone
    assert {m["tag"] for m in context["timeline"]} <= {"detection", "diagnosis", "repair", "key moment"}


def test_every_cited_hash_and_file_matches_the_manifest(xid79: Path) -> None:
    text = render_bundle(xid79)
    digests = manifest_hashes(xid79)
    rows = evidence_rows(text)
    assert rows, "no evidence table"
    for path, sha in rows.values():
        assert digests[path] == sha, path
    assert set(HEX64.findall(text)) <= set(digests.values())
    for cited in set(re.findall(r"\[(E\d+)\]", text)):
        assert cited in rows, f"[{cited}] cited but not in the Evidence table"
    # The raw outputs the verdict rests on are among them.
    assert {"hosts/xid79-fallen-off-bus/kernel-log.out", "hosts/xid79-fallen-off-bus/nvidia-smi.out"} <= {
        p for p, _ in rows.values()
    }


def test_the_draft_written_at_capture_cites_the_final_hashes(xid79: Path) -> None:
    stored = (xid79 / "postmortem.md").read_text()
    digests = manifest_hashes(xid79)
    for path, sha in evidence_rows(stored).values():
        assert digests[path] == sha, path


def test_each_candidate_cites_evidence(xid79: Path) -> None:
    text = render_bundle(xid79)
    candidates = section(text, "Root-cause candidates")
    assert "`gpu-fell-off-bus`" in candidates
    rows = evidence_rows(text)
    kernel_log = next(e for e, (p, _) in rows.items() if p.endswith("kernel-log.out"))
    assert f'`kernel_log.fallen_off_bus_gpus` = `["0000:a1:00"]` [{kernel_log}]' in candidates
    assert "Xid 79: GPU lost on PCIe" in candidates


def test_no_candidate_without_evidence(tmp_path: Path) -> None:
    healthy = make_bundle(tmp_path, ["healthy-l40s"])
    assert "None: no verdict that needs action" in section(render_bundle(healthy), "Root-cause candidates")
    # A verdict whose evidence names no file of the bundle is not offered as a cause.
    stripped = make_bundle(tmp_path, ["xid79-fallen-off-bus"])
    verdicts = json.loads((stripped / "verdicts.json").read_text())
    for item in verdicts["hosts"][0]["verdict"]["evidence"]:
        item["source"] = None
    (stripped / "verdicts.json").write_text(json.dumps(verdicts))
    text = render_bundle(stripped)
    assert "`gpu-fell-off-bus`" not in section(text, "Root-cause candidates")
    assert "cited no file of the bundle" in section(text, "Open questions")
    assert "changed: verdicts.json" in text  # and the draft says the bundle was edited


def test_hosts_with_different_clocks(tmp_path: Path) -> None:
    # dmesg -T times (xid43), a syslog time without a year (xid154), seconds since boot (xid13).
    bundle = make_bundle(tmp_path, ["xid43-sympathetic-only", "xid154-gpu-reset-required", "xid13-app-fault"])
    context = bundle_context(bundle)
    placed_hosts = {m["host"] for m in context["timeline"] if m["clock"].startswith("host")}
    assert placed_hosts == {"xid43-sympathetic-only"}
    unplaced = {(m["host"], m["clock"]) for m in context["unplaced"]}
    assert ("xid154-gpu-reset-required", "host log, no year written") in unplaced
    assert ("xid13-app-fault", "host kernel, seconds since boot") in unplaced
    xid43 = [m for m in context["timeline"] if m["host"] == "xid43-sympathetic-only" and m["clock"] != "nightowl (UTC)"]
    assert xid43[0]["shown"] == "2024-07-28T09:15:27" and "driver 535.183.01" in xid43[0]["what"]
    assert [m["epoch"] for m in xid43] == sorted(m["epoch"] for m in xid43)


def test_verify_detects_a_modified_and_a_deleted_file(tmp_path: Path) -> None:
    bundle = make_bundle(tmp_path, ["xid79-fallen-off-bus"])
    assert invoke("--verify", str(bundle)).exit_code == 0
    (bundle / "hosts" / "xid79-fallen-off-bus" / "kernel-log.out").write_text("edited\n")
    (bundle / "hosts" / "xid79-fallen-off-bus" / "nvidia-smi.out").unlink()
    result = invoke("--verify", str(bundle))
    assert result.exit_code == 1
    assert "changed: hosts/xid79-fallen-off-bus/kernel-log.out" in result.output
    assert "missing: hosts/xid79-fallen-off-bus/nvidia-smi.out" in result.output
    draft = invoke(str(bundle)).output
    assert "the bundle changed after capture" in draft
    assert "(missing)" in draft and "(changed)" in draft


def test_templates_can_be_overridden(tmp_path: Path, xid79: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    own = tmp_path / "mine.md.j2"
    own.write_text("{{ headline }} | {{ evidence | length }} files\n")
    assert invoke(str(xid79), "--template", str(own)).output == "gpu-fell-off-bus on xid79-fallen-off-bus | 7 files\n"
    folder = tmp_path / "user"
    folder.mkdir()
    (folder / "postmortem.md.j2").write_text("site template: {{ run_id }}\n")
    monkeypatch.setenv("NIGHTOWL_TEMPLATES", str(folder))
    assert invoke(str(xid79)).output == f"site template: {xid79.name}\n"
    out = tmp_path / "draft.md"
    assert invoke(str(xid79), "-o", str(out)).exit_code == 0 and out.read_text().startswith("site template")
    assert invoke(str(xid79), "--template", "no-such-template").exit_code == 2


def test_html_draft_draws_the_path_taken(xid79: Path) -> None:
    html = invoke(str(xid79), "--format", "html").output
    assert html.startswith("<!DOCTYPE html>") and "<script" not in html
    taken = re.findall(r'<g class="node taken" data-node="([^"]+)"', html)
    assert taken == ["collect", "gpu-visible", "gpu-fell-off-bus"]
    assert len(re.findall(r'class="edge taken"', html)) == 2
    assert 'data-node="healthy"' in html  # the rest of the graph is drawn too, not highlighted
    assert "<h2>Root-cause candidates</h2>" in html
