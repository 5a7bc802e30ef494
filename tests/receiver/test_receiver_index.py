"""The receiver's index page (templates/receiver-index.html.j2): escaped cells, draft links, empty state."""

from __future__ import annotations

from pathlib import Path

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


# --- issue 30, item 15: every link of an IPv6 host's evidence resolves ------------------------------
def test_every_evidence_link_of_an_ipv6_host_resolves(tmp_path: Path) -> None:
    import re
    import shutil
    from urllib.parse import urljoin

    from tests.postmortem.bundles import HOSTS
    from tests.receiver.test_serve import TOKEN, Running, payload, write_config
    from tests.receiver.test_serve_browser import fetch

    hosts = tmp_path / "hosts"
    shutil.copytree(HOSTS / "xid79-fallen-off-bus", hosts / "fe80::1")
    config = write_config(tmp_path)
    config.write_text(config.read_text().replace(str(HOSTS), str(hosts)))
    from nightowl.receiver.config import load_config
    from nightowl.receiver.queue import Receiver

    receiver = Receiver(load_config(config))
    receiver.start()
    running = Running(receiver)
    running.thread.start()
    try:
        body = payload("alertmanager-xid-firing.json")
        alert = body["alerts"][0]
        body["alerts"] = [{**alert, "labels": {**alert["labels"], "Hostname": "fe80::1"}}]
        assert running.request("POST", "/alertmanager", body)[1]["statuses"] == ["queued"]
        running.wait_idle()
        (capture,) = running.receiver.captures()
        base = f"/captures/{capture['run_id']}/"
        auth_header = {"Authorization": f"Bearer {TOKEN}"}
        checked = 0
        for page in (base, base + "postmortem.html"):
            status, _, html = fetch(running.url, path=page, headers=auth_header)
            assert status == 200
            links = [urljoin(page, h) for h in re.findall(r'href="([^"#]+)"', html) if "hosts/" in h]
            assert links, f"{page} links no host file"
            for link in links:
                assert fetch(running.url, path=link, headers=auth_header)[0] == 200, link
                checked += 1
        assert checked >= 2
    finally:
        running.server.shutdown()
        running.server.server_close()
        receiver.stop(timeout=5)
