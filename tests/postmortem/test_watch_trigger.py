"""A bundle that `nightowl watch` captured says so in its draft (issue 45 item 5): the burst's first trigger line and
the seconds from reading it to the capture, never "started by hand"."""

from __future__ import annotations

import json
import time
from pathlib import Path

from nightowl.postmortem import render_bundle
from tests.postmortem.bundles import make_bundle

LINE = "[Fri Apr  5 21:29:39 2024] NVRM: Xid (PCI:0000:a1:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off"


def test_a_watch_burst_is_the_detection_not_a_run_by_hand(tmp_path: Path) -> None:
    trigger = {"origin": "watch", "source": "/dev/kmsg", "first_line": LINE, "first_seen": time.time() - 1.2}
    bundle = make_bundle(tmp_path, ["xid79-fallen-off-bus"], extra_manifest={"trigger": trigger})
    manifest = json.loads((bundle / "manifest.json").read_text())
    assert manifest["trigger"]["origin"] == "watch"
    seen = manifest["started"] - trigger["first_seen"]
    assert seen >= 1.2
    markdown = render_bundle(bundle)
    detection = markdown.split("## Detection", 1)[1].split("\n## ", 1)[0]
    assert "started by hand" not in detection
    assert f"`nightowl watch` captured evidence automatically {seen:.1f} s after the first trigger line" in detection
    assert "Xid (PCI:0000:a1:00): 79" in detection
    assert "No alert started this run" not in markdown


def test_without_an_alert_or_a_trigger_the_run_was_by_hand(tmp_path: Path) -> None:
    markdown = render_bundle(make_bundle(tmp_path, ["xid79-fallen-off-bus"]))
    assert "started by hand" in markdown.split("## Detection", 1)[1].split("\n## ", 1)[0]


def test_the_html_draft_tells_a_watch_burst_as_the_markdown_does(tmp_path: Path) -> None:
    """The HTML Detection shows the watch sentence's backticked spans as code (not raw backticks) and the first
    fault the evidence shows, as the Markdown draft does."""
    trigger = {"origin": "watch", "source": "/dev/kmsg", "first_line": LINE, "first_seen": time.time() - 1.2}
    bundle = make_bundle(tmp_path, ["xid79-fallen-off-bus"], extra_manifest={"trigger": trigger})
    markdown = render_bundle(bundle).split("## Detection", 1)[1].split("\n## ", 1)[0]
    html = render_bundle(bundle, fmt="html").split("<h2>Detection</h2>", 1)[1].split("<h2>", 1)[0]
    assert "<code>nightowl watch</code> captured evidence automatically" in html and "`" not in html
    assert "The first fault the evidence shows: " in markdown
    assert "The first fault the evidence shows: " in html
