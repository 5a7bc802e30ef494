"""A rack's storm is one incident with a common cause (issue 45 item 6): 64 alerts from 8 hosts of one
rack within the window fold into one capture whose outcome, note and draft put the rack first.

The hosts are copies of one recorded host (fixtures/hosts/xid79-fallen-off-bus): every capture is a real
replay run of the `xid` runbook, folded by the receiver's own planning and folding, no server started.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from nightowl.receiver.capture import Capture, plan_capture, run_capture
from nightowl.receiver.config import ServeConfig, load_config
from nightowl.receiver.notify import Target, request_for
from nightowl.receiver.payload import parse_alertmanager
from nightowl.receiver.storm import fold_members
from tests.receiver.test_storm import alert, rack_hosts, storm_config


def storm_of(tmp_path: Path, config: ServeConfig, hosts: list[str], gpus: int, rack: str | None) -> Capture:
    """``gpus`` alerts per host, planned and folded as the receiver folds a released window."""
    payload = {"alerts": [alert(h, gpu, rack) for gpu in range(gpus) for h in hosts]}
    members = [plan_capture(a, config, 0.0) for a in parse_alertmanager(payload)]
    return fold_members(members[0], "rack", rack or "?", members)


@pytest.fixture(scope="module")
def rack_storm(tmp_path_factory: pytest.TempPathFactory) -> tuple[Capture, Path]:
    tmp_path = tmp_path_factory.mktemp("storm")
    hosts = rack_hosts(tmp_path, "r07", 8)
    config = load_config(storm_config(tmp_path, "http://127.0.0.1:9/hook"))
    capture = run_capture(storm_of(tmp_path, config, hosts, 8, "r07"), config)
    assert capture.status == "captured", capture.reason
    return capture, Path(str(capture.bundle))


def test_a_racks_storm_names_the_rack_as_its_common_cause_first(rack_storm: tuple[Capture, Path]) -> None:
    capture, _ = rack_storm
    assert capture.storm is not None and len(capture.storm.members) == 64
    (cause,) = capture.storm.common_cause
    assert (cause["kind"], cause["name"], cause["verdict"]) == ("rack", "r07", "gpu-fell-off-bus")
    assert (cause["shared_by"], cause["of"], cause["alerts"], cause["host_action"]) == (8, 8, 64, "reboot-node")
    outcome = capture.outcome()
    assert outcome.startswith("storm rack=r07: 64 alerts on 8 hosts, 8 need action; common cause: rack r07 (")
    assert "inspect it before reboot-node on 8 nodes" in outcome
    assert outcome.index("common cause") < outcome.index("worst: gpu-fell-off-bus")
    verdict = capture.to_json()["verdict"]
    assert verdict["summary"].startswith("Common cause: rack r07 (") and verdict["action"] == "reboot-node"
    assert verdict["host_summary"] and verdict["summary"].endswith(verdict["host_summary"])


def test_the_storms_note_leads_with_the_common_cause(rack_storm: tuple[Capture, Path]) -> None:
    capture, _ = rack_storm
    _, _, body = request_for(Target("webhook", "http://127.0.0.1:9/hook"), capture.notice(), None)
    finding = body["finding"]
    assert finding[0].startswith("Common cause first: rack r07 (") and "before reboot-node on 8 nodes" in finding[0]
    assert any(line.startswith("Why: ") and "Common cause" not in line for line in finding)
    assert finding[-1].startswith("First action: inspect rack r07; then reboot-node only on those of its 8 nodes")
    _, _, pager = request_for(
        Target("pagerduty", "http://127.0.0.1:9", "k", "a@b", "incident"),
        replace(capture.notice(), labels={"incident": "P1"}),
        None,
    )
    lines = pager["note"]["content"].splitlines()
    assert "common cause: rack r07" in lines[0] and lines[1].startswith("Common cause first: rack r07")


def test_the_bundle_keeps_every_alert_and_the_common_cause(rack_storm: tuple[Capture, Path]) -> None:
    _, bundle = rack_storm
    storm = json.loads((bundle / "manifest.json").read_text())["alert"]["storm"]
    assert storm["alerts"] == 64 and storm["alerts_by_host"] == {f"r07-gpu-{n:02d}": 8 for n in range(1, 9)}
    assert len(storm["results"]) == 8 and [c["name"] for c in storm["common_cause"]] == ["r07"]


def test_no_common_cause_without_a_shared_domain_or_a_shared_fault(tmp_path: Path) -> None:
    """Hosts whose alerts name no domain, or too few hosts of one domain, get no domain finding."""
    config = load_config(storm_config(tmp_path, "http://127.0.0.1:9/hook"))
    unlabelled = rack_hosts(tmp_path, "r08", 3)
    capture = run_capture(storm_of(tmp_path, config, unlabelled, 1, None), config)
    assert capture.status == "captured" and capture.storm is not None
    assert capture.storm.common_cause == [] and "common cause" not in capture.outcome()
    pair = rack_hosts(tmp_path, "r09", 2)  # 2 hosts: fewer than fleet/domains.py's 3 members
    capture = run_capture(storm_of(tmp_path, config, pair, 2, "r09"), config)
    assert capture.storm is not None and capture.storm.common_cause == []
    assert "Common cause" not in str((capture.verdict or {}).get("summary"))


def section(text: str, heading: str) -> str:
    return text.split(f"\n{heading}\n", 1)[1].split("\n## ", 1)[0]


def test_the_storms_draft_is_one_incident_with_a_row_per_host(rack_storm: tuple[Capture, Path]) -> None:
    """Not 8 copies of the decision path and its Mermaid graph, and every alert counted in Detection."""
    from nightowl.postmortem.verify import verify_citations

    _, bundle = rack_storm
    text = (bundle / "postmortem.md").read_text()
    hosts = [f"r07-gpu-{n:02d}" for n in range(1, 9)]
    assert text.startswith("# Postmortem: storm rack=r07: gpu-fell-off-bus on 8 hosts")
    summary = section(text, "## Summary")
    assert "64 alerts from 8 hosts of `rack=r07`" in summary
    assert summary.index("**Common cause: rack r07 (") < summary.index("**`gpu-fell-off-bus`** (critical) on 8 of 8")
    assert summary.count("GPU 0000:a1:00 fell off the PCIe bus") == 1  # the shared verdict told once ...
    assert [line.split(" | ")[0] for line in summary.splitlines() if line.startswith("| r07-")] == [
        f"| {h}" for h in hosts
    ]  # ... and one row per host
    assert section(text, "## Root causes").count("\n- **") + section(text, "## Root causes").startswith("- **") == 1
    resolution = section(text, "## Resolution")
    assert resolution.startswith("- First action proposed for the storm: **rack r07 (")
    assert resolution.count("**reboot-node**") == 1 and ", ".join(hosts) in resolution
    detection = section(text, "## Detection")
    assert "Storm: 64 alerts of rule `gpu-xid` on 8 hosts of `rack=r07`" in detection
    assert all(f"{h} ×8" in detection for h in hosts)
    assert section(text, "## Action items").splitlines()[2].startswith("| [ ] Common cause first: rack r07 (")
    paths = text.split("### Decision path", 1)[1].split("### Evidence", 1)[0]
    assert paths.count("nightowl runbook graph") == 1 and paths.count("\n#### ") == 1  # the graph: named once
    assert "and 7 other hosts on the same path" in paths
    assert "```mermaid" not in text  # the Markdown draft holds no Mermaid block (issue 45 item 9)
    checked, problems = verify_citations(bundle)  # every citation of the shorter draft still holds
    assert checked > 0 and not problems, problems


def test_the_storms_html_draft_is_one_incident_too(rack_storm: tuple[Capture, Path]) -> None:
    """The page the note links to (`<link_base>/captures/RUN_ID/postmortem.html`) tells it the same way."""
    from nightowl.postmortem.render import render_bundle

    _, bundle = rack_storm
    page = render_bundle(bundle, fmt="html")
    assert "<h1>Postmortem: storm rack=r07: gpu-fell-off-bus on 8 hosts" in page
    summary = page.split("<h2>Summary</h2>", 1)[1].split("<h2>", 1)[0]
    assert '<li class="common-cause"><strong>Common cause: rack r07 (' in summary
    assert summary.count("<tr><td>r07-gpu-") == 8 and summary.count("fell off the PCIe bus") == 1
    paths = page.split('<h3 id="decision-path">', 1)[1].split('<h3 id="evidence">', 1)[0]
    assert paths.count("<h4>") == 1 and paths.count('<div class="graph">') == 1
    assert paths.count("Mermaid source of this graph") == 1
    assert "Storm: 64 alerts of rule <code>gpu-xid</code>" in page


def test_the_bundles_storm_record_is_judged_when_its_last_host_is_done() -> None:
    """Hosts finish in any order, from several threads, under the names their transports give; the common
    cause is written once every host is in, and the draft's scalars follow it."""
    from types import SimpleNamespace

    from nightowl.receiver.common_cause import StormRecord

    verdict = {"id": "gpu-fell-off-bus", "severity": "critical", "action": "reboot-node"}
    names = ["n1", "n2", "n3"]
    alert_record = {"storm": {"by": "rack", "value": "r1", "alerts": 3, "hosts": names, "results": []}}
    labelled = {h: {"rack": "r1"} for h in ["n1", "n3", "spec-named-n2"]}
    record = StormRecord(alert_record, labelled, names)
    assert alert_record["storm_by"] == "rack" and alert_record["storm_common_cause"] is None
    for host in ["n3", "n1", "spec-named-n2"]:  # the last one under another name than the storm's
        assert not alert_record["storm"].get("common_cause")
        record.host_done(SimpleNamespace(host=host, status="ok", verdict=verdict, error=None, collections={}))
    assert [r["host"] for r in alert_record["storm"]["results"]] == ["n1", "n3", "spec-named-n2"]
    (cause,) = alert_record["storm"]["common_cause"]
    assert (cause["name"], cause["shared_by"], cause["of"]) == ("r1", 3, 3)
    assert alert_record["storm_common_cause"] == cause["line"]
