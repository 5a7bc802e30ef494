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
    # The Google SRE postmortem template's sections, in its order.
    assert titles == [
        "Summary",
        "Impact",
        "Root causes",
        "Trigger",
        "Resolution",
        "Detection",
        "Action items",
        "Lessons learned",
        "Timeline",
        "Supporting information",
    ]
    assert re.findall(r"^### (.+)$", text, re.M) == ["Decision path", "Evidence", "Open questions"]
    assert text.startswith("# Postmortem: gpu-fell-off-bus on xid79-fallen-off-bus")
    assert "- **Status:** draft" in text and "- **Authors:** _to be filled in" in text
    # The kernel log says: driver 535.161.07 loaded Apr 4, Xid 79 on 0000:a1:00 Apr 5 21:29:39, a crash dump.
    timeline = section(text, "Timeline")
    assert "NVIDIA driver 535.161.07 loaded" in timeline
    assert "Xid 79 on 0000:a1:00" in timeline and "2024-04-05T21:29:39" in timeline
    assert "nvidia-bug-report.sh" in section(text, "Supporting information")
    assert "No alert is recorded" in section(text, "Detection")
    # the graph is the HTML draft's picture; the Markdown names the command that prints it (issue 45 item 9)
    supporting = section(text, "Supporting information")
    assert "```mermaid" not in text and "`nightowl runbook graph xid` prints it" in supporting


def test_timeline_is_sorted_and_names_its_clocks(xid79: Path) -> None:
    context = bundle_context(xid79)
    epochs = [m["epoch"] for m in context["timeline"]]
    assert epochs == sorted(epochs)
    whats = [m["what"] for m in context["timeline"]]
    # The driver loaded a day before the Xid; both precede nightowl's own capture.
    assert (
        whats.index("NVIDIA driver 535.161.07 loaded (this boot)")
        < next(i for i, w in enumerate(whats) if w.startswith("Xid 79"))
        < next(i for i, w in enumerate(whats) if w.startswith("nightowl ran runbook"))
    )
    clocks = {m["clock"] for m in context["timeline"]}
    assert clocks == {"nightowl (UTC)", "host local time (zone not written; read as UTC)"}  # dmesg -T has no zone
    assert {m["tag"] for m in context["timeline"]} <= {"detection", "diagnosis", "repair", "key moment", "context"}


def test_every_cited_hash_and_file_matches_the_manifest(xid79: Path) -> None:
    text = render_bundle(xid79)
    digests = manifest_hashes(xid79)
    rows = evidence_rows(text)
    assert rows, "no evidence table"
    for path, sha in rows.values():
        assert digests[path] == sha, path
    assert set(HEX64.findall(text)) <= set(digests.values())
    cited = set(re.findall(r"\[(E\d+) [^\]\s]+:L\d+-L\d+\]", text))
    assert cited
    for eid in cited:
        assert eid in rows, f"[{eid}] cited but not in the Evidence table"
    assert not re.search(r"\[E\d+\]", text), "a citation without its lines"
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
    candidates = section(text, "Root causes")
    assert "`gpu-fell-off-bus`" in candidates
    rows = evidence_rows(text)
    kernel_log = next(e for e, (p, _) in rows.items() if p.endswith("kernel-log.out"))
    lines = (xid79 / rows[kernel_log][0]).read_text().splitlines()
    cite = re.search(
        rf'`kernel_log.fallen_off_bus_gpus` = `\["0000:a1:00"\]` \[{kernel_log} kernel-log.out:L(\d+)-L(\d+)\]',
        candidates,
    )
    assert cite, candidates
    # The cited lines are the ones that say the GPU fell off the bus, not the whole file.
    shown = lines[int(cite.group(1)) - 1 : int(cite.group(2))]
    assert shown and all("fallen off the bus" in line for line in shown) and len(shown) < len(lines)
    assert "Xid 79: GPU lost on PCIe" in candidates


def test_no_candidate_without_evidence(tmp_path: Path) -> None:
    healthy = make_bundle(tmp_path, ["healthy-l40s"])
    assert "None: no verdict that needs action" in section(render_bundle(healthy), "Root causes")
    # A verdict whose evidence names no file of the bundle is not offered as a cause.
    stripped = make_bundle(tmp_path, ["xid79-fallen-off-bus"])
    verdicts = json.loads((stripped / "verdicts.json").read_text())
    for item in verdicts["hosts"][0]["verdict"]["evidence"]:
        item["source"] = None
    (stripped / "verdicts.json").write_text(json.dumps(verdicts))
    text = render_bundle(stripped)
    assert "`gpu-fell-off-bus`" not in section(text, "Root causes")
    assert "cited no file of the bundle" in section(text, "Supporting information")
    assert "changed: verdicts.json" in text  # and the draft says the bundle was edited


def test_hosts_with_different_clocks(tmp_path: Path) -> None:
    # dmesg -T times (xid43), a syslog time without a year (xid154), seconds since boot (xid13).
    bundle = make_bundle(tmp_path, ["xid43-sympathetic-only", "xid154-gpu-reset-required", "xid13-app-fault"])
    context = bundle_context(bundle)
    placed_hosts = {m["host"] for m in context["timeline"] if m["clock"].startswith("host")}
    assert placed_hosts == {"xid43-sympathetic-only", "xid154-gpu-reset-required"}  # syslog: the capture's year
    unplaced = {(m["host"], m["clock"]) for m in context["unplaced"]}
    assert unplaced == {("xid13-app-fault", "host kernel, seconds since boot")}
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
    # 7: with kernel-log-boots (not in this recording: its empty .out and its .rc)
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
    assert "<h2>Root causes</h2>" in html


def test_xid154_kernel_events_in_time_order_with_line_citations(tmp_path: Path) -> None:
    """The syslog of xid154 was pasted 29 March first, 27 March after (nvforum 364958): the timeline puts
    27 March first, in the capture's year, each row citing the very line it came from."""
    bundle = make_bundle(tmp_path, ["xid154-gpu-reset-required"])
    year = json.loads((bundle / "manifest.json").read_text())["started"]
    year = __import__("datetime").datetime.fromtimestamp(year, tz=__import__("datetime").timezone.utc).year
    text = (bundle / "postmortem.md").read_text()
    raw = (bundle / "hosts" / "xid154-gpu-reset-required" / "kernel-log.out").read_text().splitlines()
    rows = [r for r in section(text, "Timeline").splitlines() if "| xid154-gpu-reset-required |" in r]
    assert [r.split(" |")[0][2:12] for r in rows] == [f"{year}-03-27"] * 4 + [f"{year}-03-29"] * 2
    for row in rows:
        cite = re.search(r"\[E\d+ kernel-log.out:L(\d+)-L(\d+)\]", row)
        assert cite and cite.group(1) == cite.group(2)
        line = raw[int(cite.group(1)) - 1]
        written = re.search(r"written “([^”]+)”", row).group(1)  # type: ignore[union-attr]
        assert line.startswith(written)
        assert line[-16:] in row  # the row tells what that line says
    assert "host local time, year from the capture" in section(text, "Timeline")
    assert "skew against nightowl's clock not measured" in section(text, "Timeline")
    # Every section of the template is there and the stored draft's citations verify.
    for title in ("Root causes", "Trigger", "Resolution", "Detection", "Action items", "Lessons learned"):
        assert section(text, title).strip(), title
    assert "Xid 62 on 0000:01:00" in section(text, "Trigger")  # the earliest fault, 27 March
    assert "| mitigate | owner: TBD |" in text and "| prevent | owner: TBD |" in text and "| process |" in text
    result = invoke("--verify", str(bundle))
    assert result.exit_code == 0 and re.search(r"; ([1-9]\d*) line citation\(s\) of the draft hold", result.output)


def test_yearless_times_wrap_across_new_year() -> None:
    from datetime import datetime, timezone

    from nightowl.postmortem.clocks import stamp, with_capture_year

    captured = datetime(2025, 1, 2, 3, 0, tzinfo=timezone.utc).timestamp()
    assert stamp(with_capture_year("Dec 31 23:59:58", captured)).startswith("2024-12-31 23:59:58")
    assert stamp(with_capture_year("Jan  2 02:59:00", captured)).startswith("2025-01-02 02:59:00")
    assert stamp(with_capture_year("01-01 00:00:01", captured)).startswith("2025-01-01")  # vLLM's MM-DD
    assert stamp(with_capture_year("Feb 29 10:00:00", captured)).startswith("2024-02-29")  # leap day: last leap year
    assert with_capture_year("Mär 29 10:00:00", captured) is None  # not the C locale: left unplaced


def test_verify_catches_a_citation_past_the_end_of_its_file(tmp_path: Path) -> None:
    bundle = make_bundle(tmp_path, ["xid154-gpu-reset-required"])
    draft = bundle / "postmortem.md"
    text = draft.read_text()
    eid = re.search(r"\[(E\d+) kernel-log.out:L4-L4\]", text).group(1)  # type: ignore[union-attr]
    draft.write_text(text.replace("kernel-log.out:L4-L4]", "kernel-log.out:L4-L99]", 1))
    result = invoke("--verify", str(bundle))
    assert result.exit_code == 1
    assert "kernel-log.out has 7 line(s), not L4-L99" in result.output
    draft.write_text(text.replace(f"[{eid} kernel-log.out:L4-L4]", "[E9 kernel-log.out:L4-L4]", 1))
    assert "E9 is not in the draft's Evidence table" in invoke("--verify", str(bundle)).output
