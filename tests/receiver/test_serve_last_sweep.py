"""serve's index shows the last sweep's fleet page (issue 45: "the same page in serve's index for the last
sweep"): a sweep keeps its page in its bundle (fleet/sweep.py), serve links the newest bundle in its folder
that holds one and serves that one file as HTML; the bundle still verifies."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from nightowl.engine import layout
from nightowl.engine.bundle_verify import verify_bundle
from nightowl.fleet.sweep import sweep
from nightowl.library import runbooks
from nightowl.receiver.http import index_page, last_sweep
from nightowl.transports.replay import ReplayTransport
from tests.postmortem.bundles import HOSTS
from tests.receiver.test_serve import serve_factory, write_config


@pytest.fixture
def serve(tmp_path: Path) -> Iterator[Any]:
    yield from serve_factory(tmp_path)


def fleet_sweep(out: Path) -> Path:
    hosts = {"gpu-17": HOSTS / "xid79-fallen-off-bus", "gpu-18": HOSTS / "healthy-l40s"}
    transports = {name: (lambda n=name, d=folder: ReplayTransport(d, n)) for name, folder in hosts.items()}
    result = sweep(runbooks.load("node-health"), transports, out, domains={"gpu-17": {"rack": "r12"}})
    assert result.run.bundle is not None and not result.problems, result.problems
    return result.run.bundle


def test_a_sweep_keeps_its_fleet_page_and_its_bundle_still_verifies(tmp_path: Path) -> None:
    bundle = fleet_sweep(tmp_path / "bundles")
    page = (bundle / layout.SWEEP_PAGE).read_text()
    assert "gpu-17" in page and "gpu-18" in page and "r12" in page and "<script" not in page
    assert verify_bundle(bundle) == []


def test_the_index_links_the_newest_bundle_holding_a_fleet_page(tmp_path: Path) -> None:
    out = tmp_path / "bundles"
    older = fleet_sweep(out)
    newer = fleet_sweep(out)
    assert last_sweep(out) == newer.name
    (newer / layout.SWEEP_PAGE).unlink()  # a bundle without a page (a capture) is not a sweep to show
    assert last_sweep(out) == older.name
    shutil.rmtree(older)
    assert last_sweep(out) is None and last_sweep(tmp_path / "missing") is None
    assert f"/captures/{newer.name}/{layout.SWEEP_PAGE}" in index_page([], newer.name)
    assert layout.SWEEP_PAGE not in index_page([], None)


def test_serve_shows_the_last_sweeps_page(serve: Any, tmp_path: Path) -> None:
    running = serve(write_config(tmp_path))
    bundle = fleet_sweep(tmp_path / "bundles")  # a sweep run with --out at serve's bundle folder
    status, index = running.request("GET", "/")
    assert status == 200 and f'href="/captures/{bundle.name}/{layout.SWEEP_PAGE}"' in index
    status, page = running.request("GET", f"/captures/{bundle.name}/{layout.SWEEP_PAGE}")
    assert status == 200 and page == (bundle / layout.SWEEP_PAGE).read_text()
    assert running.request("GET", f"/captures/{bundle.name}/{layout.SWEEP_PAGE}", token=None)[0] == 401
