"""Suite-wide test settings."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, settings

# CI machines are small and shared: a parser example that takes 300 ms under load is not a failure.
# Property tests assert behaviour (never raises, right kind), not speed; speed lives in bench/.
settings.register_profile("nightowl", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("nightowl")


@pytest.fixture(autouse=True)
def _own_history_store(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Each test's runs record into a store of their own, never the developer's; none is left active."""
    from nightowl import history

    monkeypatch.setenv("NIGHTOWL_HISTORY", str(tmp_path_factory.mktemp("history") / "history.sqlite3"))
    yield
    history.deactivate()
