"""`sweep --format html` (issue 45, "a picture of the fleet"): one self-contained page with the hosts grouped by
failure domain, each tile coloured by its verdict's severity, its action on hover, a link to its evidence in
the bundle, and a domain finding drawn as a frame around its members. A real sweep over recorded hosts."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path
from urllib.parse import unquote, urlparse

import pytest
from click.testing import CliRunner

from nightowl.cli.common import param_values
from nightowl.cli.main import main
from nightowl.cli.sweep_report import run_sweep
from nightowl.fleet.sweep_page import page_context, sweep_html
from nightowl.library import runbooks
from nightowl.paths import data_dir
from nightowl.transports.replay import ReplayTransport

HOSTS = data_dir("fixtures") / "hosts"
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
# rack r1: three nodes off the bus and a healthy one (a finding: 3 of 4); rack r2: the two-GPU node and a
# healthy one; each rack behind its own leaf switch.
FLEET = {
    "r1-a": ("xid79-fallen-off-bus", "r1"),
    "r1-b": ("xid79-fallen-off-bus", "r1"),
    "r1-c": ("xid79-fallen-off-bus", "r1"),
    "r1-d": ("healthy-l40s", "r1"),
    "r2-a": ("xid48-xid64-dbe", "r2"),
    "r2-b": ("healthy-l40s", "r2"),
}


def swept(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> str:
    transports = {n: (lambda d=HOSTS / d, n=n: ReplayTransport(d, n)) for n, (d, _) in FLEET.items()}
    run_sweep(
        runbooks.load("node-health"),
        transports,
        param_values((), None),
        {"command_timeout": None, "host_timeout": None},
        fmt="html",
        textfile=None,
        log_format=None,
        out_dir=tmp_path / "b",
        forks=3,
        domains={n: {"rack": rack, "switch": f"leaf-{rack}"} for n, (_, rack) in FLEET.items()},
    )
    return capsys.readouterr().out


@pytest.fixture
def page(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> str:
    return swept(tmp_path, capsys)


def tiles(html: str) -> dict[str, str]:
    """Each host tile's opening tag by host name."""
    return {m.group(2): m.group(1) for m in re.finditer(r'(<a class="host [^>]*>)<b>([^<]+)</b>', html)}


def test_hosts_are_grouped_by_domain_and_coloured_by_severity(page: str) -> None:
    racks = page.split("<h2>Racks</h2>", 1)[1].split("<h2>", 1)[0]
    assert "<h2>Switches</h2>" in page
    r1, r2 = racks.split("<h3>rack r1 ", 1)[1].split("<h3>rack r2 ", 1)
    assert set(tiles(r1)) == {"r1-a", "r1-b", "r1-c", "r1-d"} and set(tiles(r2)) == {"r2-a", "r2-b"}
    found = tiles(racks)
    assert all('class="host sev-critical"' in found[h] for h in ("r1-a", "r1-b", "r1-c", "r2-a"))
    assert all('class="host sev-ok"' in found[h] for h in ("r1-d", "r2-b"))
    assert 'title="gpu-fell-off-bus (critical) -&gt; reboot-node: GPU 0000:a1:00 fell off' in found["r1-a"]
    assert "GPU 0a:00, 07:00 48+64" in r2  # every GPU with a finding, as the GPUS column has it


def test_a_domain_finding_is_drawn_around_its_members(page: str) -> None:
    racks = page.split("<h2>Racks</h2>", 1)[1].split("<h2>", 1)[0]
    r1 = racks.split("<h3>rack r1 ", 1)[1].split("<h3>rack r2 ", 1)[0]
    frame, rest = r1.split('<div class="finding sev-critical"', 1)[1].split("</div>\n</div>", 1)
    assert "3 of 4: gpu-fell-off-bus</strong>: inspect rack r1 (rack power" in frame
    assert set(tiles(frame)) == {"r1-a", "r1-b", "r1-c"} and set(tiles(rest)) == {"r1-d"}
    assert 'class="finding' not in racks.split("<h3>rack r2 ", 1)[1]  # one faulty node of two: no finding


def test_each_tile_links_to_its_hosts_evidence_and_the_page_fetches_nothing(page: str) -> None:
    links = re.findall(r'href="([^"]+)"', page)
    assert len(links) == 2 * len(FLEET)  # each host once per domain kind
    for link in links:
        folder = Path(unquote(urlparse(link).path))
        assert link.startswith("file://") and (folder / "kernel-log.out").is_file(), link
    assert "<script" not in page.lower() and not re.search(r"(src|href)=\"(https?:)?//", page)
    assert "<link" not in page and "@import" not in page and "url(" not in page


def test_names_are_escaped_and_a_fleet_without_domains_is_one_group() -> None:
    summary = {
        "runbook": "node-health",
        "run_id": "r",
        "bundle": None,
        "hosts": [{"host": "<img src=x onerror=alert(1)>", "status": "unreachable", "verdict": None, "error": "a&b"}],
    }
    html = sweep_html(summary)
    assert "<img" not in html and "&lt;img src=x" in html and 'title="no verdict: unreachable: a&amp;b"' in html
    (section,) = page_context(summary)["sections"]
    assert [g["name"] for g in section["groups"]] == ["every host (the inventory names no domain)"]


def test_sweep_offers_the_html_format(tmp_path: Path) -> None:
    inventory = tmp_path / "hosts.yaml"
    inventory.write_text("hosts:\n  - name: gpu-1\n    labels: {rack: r7}\n")
    result = CliRunner().invoke(
        main, ["sweep", "--inventory", str(inventory), "--format", "html", "--out", str(tmp_path / "o")]
    )
    assert result.stdout.startswith("<!DOCTYPE html>") and "<h3>rack r7 " in result.stdout, result.output


@pytest.mark.integration
@pytest.mark.skipif(CHROMIUM is None, reason="chromium not installed (Debian package `chromium`)")
def test_headless_chromium_draws_the_fleet(page: str, tmp_path: Path) -> None:
    """The page as a browser draws it: critical tiles red, healthy ones green, the finding's frame around them."""
    from tests.postmortem.test_html_chromium import read_png

    path, shot = tmp_path / "fleet.html", tmp_path / "shot.png"
    path.write_text(page)
    argv = [str(CHROMIUM), "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars"]
    argv += ["--window-size=1000,900", f"--screenshot={shot}", path.as_uri()]
    subprocess.run(argv, capture_output=True, timeout=90, check=False)
    assert shot.exists(), "chromium wrote no screenshot"
    _, _, rows, step = read_png(shot)

    def pixels(hex_colour: str) -> int:
        colour = bytes.fromhex(hex_colour)
        return sum(1 for row in rows for x in range(0, len(row), step) if row[x : x + 3] == colour)

    tile = 100 * 30  # a tile is about 150 x 60 px
    assert pixels("d64545") > 8 * tile  # 4 critical hosts, each drawn twice (racks, switches), and the frames
    assert pixels("2e9e44") > 4 * tile  # 2 healthy hosts, twice
    assert pixels("fde8e8") > 2 * tile  # the finding's frame filled around its members, in both kinds


def test_the_counts_line_counts_hosts_by_verdict_or_status() -> None:
    """The heading counts each verdict, and each reason for no verdict, once per host, most first."""
    summary = {
        "hosts": [
            {"host": "a", "status": "ok", "verdict": {"id": "xid-79", "severity": "critical", "action": "drain"}},
            {"host": "b", "status": "unreachable", "error": "timed out"},
            {"host": "c", "status": "ok", "verdict": {"id": "xid-79", "severity": "critical", "action": "drain"}},
            {"host": "d", "status": "ok", "verdict": {"id": "healthy", "severity": "ok", "action": "none"}},
            {"host": "e", "status": "ok", "verdict": {"id": "xid-79", "severity": "critical", "action": "drain"}},
            {"host": "f", "status": "unreachable", "error": "refused"},
        ]
    }
    counts = page_context(summary)["counts"]
    assert counts == [("xid-79", 3), ("(unreachable)", 2), ("healthy", 1)]
    assert "xid-79: 3" in sweep_html(summary) and "(unreachable): 2" in sweep_html(summary)
