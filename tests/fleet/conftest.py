"""Session fixtures that run real daemons from Debian's packages on loopback (each module's docstring says how).

They skip, saying which binary is missing, where the packages are not installed; scripts/test
installs them (prometheus, prometheus-alertmanager, prometheus-node-exporter; munge, slurmctld,
slurmd, slurm-client).
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.fleet.prometheus_stack import ROOT, PrometheusStack, missing_binaries
from tests.fleet.slurm_cluster import SlurmCluster
from tests.fleet.slurm_cluster import why_not as slurm_why_not

HEALTHY = ROOT / "fixtures" / "hosts" / "healthy-l40s"


@pytest.fixture(scope="session")
def prometheus_stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PrometheusStack]:
    missing = missing_binaries()
    if missing:
        pytest.skip(f"not installed: {', '.join(missing)} (Debian packages; scripts/test installs them)")
    stack = PrometheusStack(tmp_path_factory.mktemp("prometheus-stack")).start()
    yield stack
    stack.stop()


@pytest.fixture(scope="session")
def slurm_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SlurmCluster]:
    reason = slurm_why_not()
    if reason:
        pytest.skip(reason)
    # Not under pytest's basetemp: munged refuses a socket below a directory without o+x (pytest's are 0700).
    root = Path(tempfile.mkdtemp(prefix="nightowl-slurm-"))
    try:
        cluster = SlurmCluster(root, HEALTHY).start()
        yield cluster
        cluster.stop()
    finally:
        shutil.rmtree(root, ignore_errors=True)
