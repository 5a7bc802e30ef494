"""Suite-wide test settings."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, settings

# CI machines are small and shared: a parser example that takes 300 ms under load is not a failure.
# Property tests assert behaviour (never raises, right kind), not speed; speed lives in bench/.
settings.register_profile("nightowl", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("nightowl")


def pytest_configure(config: pytest.Config) -> None:
    """The suite's runbook and data-file cache (docs/reference.md#the-runbook-cache) is a folder of its own,
    never the developer's ~/.cache/nightowl; one for the whole session, so each runbook is validated once.
    A test of the cache itself points NIGHTOWL_CACHE_DIR elsewhere with monkeypatch."""
    folder = tempfile.mkdtemp(prefix="nightowl-test-cache-")
    _SUITE_CACHE.append(folder)
    os.environ["NIGHTOWL_CACHE_DIR"] = folder


_SUITE_CACHE: list[str] = []


def pytest_unconfigure(config: pytest.Config) -> None:
    for folder in _SUITE_CACHE:
        shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture(autouse=True)
def _own_history_store(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Each test's runs record into a store of their own, never the developer's."""
    monkeypatch.setenv("NIGHTOWL_HISTORY", str(tmp_path_factory.mktemp("history") / "history.sqlite3"))
    yield


@pytest.fixture(scope="session")
def recorded_facts(tmp_path_factory: pytest.TempPathFactory) -> dict[str, list[dict[str, Any]]]:
    """Every recorded sample's facts per collector kind (tests/fact_samples.py), built once per session:
    replaying every rehearsal takes seconds, shown as this fixture's setup instead of being paid by
    whichever test asked first. The replays record into a store of their own, as every test's runs do."""
    from tests.fact_samples import sample_facts

    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("NIGHTOWL_HISTORY", str(tmp_path_factory.mktemp("history") / "history.sqlite3"))
        return sample_facts()
