"""Session fixtures that run real daemons from Debian's packages on loopback (see README in each module).

They skip, saying which binary is missing, where the packages are not installed; scripts/test
installs them (prometheus, prometheus-alertmanager, prometheus-node-exporter).
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.fleet.prometheus_stack import PrometheusStack, missing_binaries


@pytest.fixture(scope="session")
def prometheus_stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PrometheusStack]:
    missing = missing_binaries()
    if missing:
        pytest.skip(f"not installed: {', '.join(missing)} (Debian packages; scripts/test installs them)")
    stack = PrometheusStack(tmp_path_factory.mktemp("prometheus-stack")).start()
    yield stack
    stack.stop()
