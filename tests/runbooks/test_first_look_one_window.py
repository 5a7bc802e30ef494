"""A first look takes about one window (issue 27 item 3): the three /metrics scrapes at the start, middle
and end of one ``window_seconds``, the two halves equal, and the slow parts (here a stream probe whose
stream is held open) taken in the background while the windows elapse, on loopback stand-in replicas read
by URL (tests/runbooks/firstlook_standins.py). Ordered by the manifest's own start times, not wall clock."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from click.testing import CliRunner

from nightowl.cli.main import main
from tests.runbooks.firstlook_standins import Replica, replicas

WINDOW = 2
HOLD = 2.0  # r1's stream: one chunk, then the connection held this long and closed without [DONE]


def look(tmp_path: Path, specs: dict[str, Replica], *params: str) -> tuple[dict[str, Any], dict[str, Any]]:
    with replicas(specs):
        argv = ["triage", "first-look", *[a for n, r in specs.items() for a in ("--replica", f"{n}={r.url}")]]
        argv += ["--param", f"window_seconds={WINDOW}", *params, "--out", str(tmp_path), "--format", "json"]
        result = CliRunner().invoke(main, argv)
    document = json.loads(result.output[: result.output.rindex("}") + 1])
    manifest = json.loads((Path(document["bundle"]) / "manifest.json").read_text())
    return document, manifest


def commands(manifest: dict[str, Any], host: str, kind: str) -> list[dict[str, Any]]:
    return sorted(
        (c for c in manifest["commands"] if c["host"] == host and c["kind"] == kind), key=lambda c: c["start"]
    )


def test_scrapes_span_one_window_in_two_equal_halves_while_the_probe_runs(tmp_path: Path) -> None:
    specs = {n: Replica() for n in ("r1", "r2", "r3")}
    specs["r1"].stream_done, specs["r1"].stream_hold = False, HOLD
    document, manifest = look(tmp_path, specs, "--param", "stream_probe=true")
    verdict = document["hosts"][0]["verdict"]
    assert verdict["id"] == "stream-broken" and "on r1 never ended" in verdict["summary"]
    assert document["hosts"][0]["path"][:3] == ["stream-gate", "alive-and-stream", "scrape-first"]
    (probe,) = commands(manifest, "r1", "stream-probe")
    assert probe["duration"] >= HOLD - 0.1
    for host in ("r1", "r2", "r3"):
        first, mid, after = (c["start"] for c in commands(manifest, host, "replica-metrics"))
        # the window before and the window now: halves of one window_seconds, each about WINDOW / 2
        assert abs((mid - first) - (after - mid)) < 0.5, (first, mid, after)
        assert WINDOW - 0.1 <= after - first < WINDOW + 1.0
    first, mid, _ = (c["start"] for c in commands(manifest, "r1", "replica-metrics"))
    # the second scrape was taken while the held stream was still open: the probe ran inside the window
    assert probe["start"] - 0.5 < first and mid < probe["start"] + probe["duration"]
    health = commands(manifest, "r1", "replica-health")[0]
    assert health["start"] < mid  # health, version and models too: taken meanwhile, not before the first scrape


def test_unprobed_look_has_the_same_windows_and_no_probe(tmp_path: Path) -> None:
    document, manifest = look(tmp_path, {n: Replica() for n in ("r1", "r2", "r3")})
    assert document["hosts"][0]["verdict"]["id"] == "all-clear"
    assert document["hosts"][0]["path"][:3] == ["stream-gate", "alive", "scrape-first"]
    assert not commands(manifest, "r1", "stream-probe")
    first, mid, after = (c["start"] for c in commands(manifest, "r2", "replica-metrics"))
    assert abs((mid - first) - (after - mid)) < 0.5 and WINDOW - 0.1 <= after - first < WINDOW + 1.0
