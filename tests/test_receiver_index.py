"""The receiver's index page (templates/receiver-index.html.j2): escaped cells, draft links, empty state."""

from __future__ import annotations

from nightowl.receiver.http import index_page


def capture(**fields: object) -> dict[str, object]:
    return {"received_at": 1700000000, "status": "captured", **fields}


def test_alert_text_is_escaped_never_markup() -> None:
    page = index_page([capture(alert="<script>alert(1)</script>", reason='a "quoted" & odd reason')])
    assert "<script>" not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "&amp; odd reason" in page


def test_each_capture_is_one_row_with_links_only_when_it_has_a_bundle() -> None:
    page = index_page(
        [
            capture(alert="GpuXidErrors", run_id="20240405T213009Z-xid-ab12", verdict={"id": "v1", "action": "x"}),
            capture(alert="NodeDown", status="not_captured", reason="queue full"),
        ]
    )
    assert page.count('<tr class="sev-') == 2
    assert '<a href="/captures/20240405T213009Z-xid-ab12/postmortem.html">draft</a>' in page
    assert page.count("/postmortem.") == 2  # .html and .md of the one bundle, none for the other
    assert '<a href="/captures/20240405T213009Z-xid-ab12/">evidence</a>' in page
    assert "<td>2023-11-14 22:13:20Z</td>" in page and "<td>v1 → x</td>" in page
    assert "no alert received yet" not in page


def test_no_capture_says_so() -> None:
    page = index_page([])
    assert page.startswith("<!DOCTYPE html>") and page.endswith("</html>\n")
    assert "no alert received yet" in page


def test_severity_column_and_colours_follow_the_verdict() -> None:
    page = index_page(
        [
            capture(alert="A", run_id="r1", verdict={"id": "gpu-fell-off-bus", "severity": "critical", "action": "x"}),
            capture(alert="B", run_id="r2", verdict={"id": "healthy", "severity": "ok", "action": "none"}),
            capture(alert="C", run_id="r3", outcome="no verdict: host h unreachable: cannot open transport"),
            capture(alert="D", status="ignored", reason="no rule"),
        ]
    )
    rows = [line for line in page.splitlines() if line.startswith("<tr class=")]
    assert [r.split('"')[1] for r in rows] == ["sev-critical", "sev-ok", "sev-unknown", "sev-none"]
    assert "<td>critical</td><td>gpu-fell-off-bus → x</td>" in rows[0]
    assert "<td>no verdict</td><td>no verdict: host h unreachable: cannot open transport</td>" in rows[2]
    assert "tr.sev-critical td:nth-child(7){background:#d93025" in page  # the severity cell is coloured
    assert page.count("<th>") == 11 and "<th>severity</th><th>verdict</th>" in page
