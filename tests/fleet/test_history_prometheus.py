"""`--history-from URL` against the real Prometheus the alerting tests start: a node with no shared disk
reads its earlier boots' incidents back from Prometheus (nightowl_gpu_incidents_total, from its textfile)."""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from nightowl.cli.main import main
from tests.fleet.daemons import LOOPBACK, wait_for
from tests.fleet.prometheus_stack import ROOT, PrometheusStack

NODE = "history-node-1"
XID79 = "NVRM: Xid (PCI:0000:a1:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus."


def export_incidents(stack: PrometheusStack, tmp_path: Path) -> Path:
    """An earlier boot's check: its store holds an Xid 79 on 0000:a1:00; its textfile exports the counter."""
    from prometheus_client import CollectorRegistry, write_to_textfile

    from nightowl.fleet.textfile import gpu_incidents

    earlier = tmp_path / "earlier" / NODE
    earlier.mkdir(parents=True)
    (earlier / "kernel-log.out").write_text(f"[Mon Nov 30 10:00:00 2026] {XID79}\n")
    db = tmp_path / "node-store.sqlite3"
    result = CliRunner().invoke(main, ["triage", "xid", "--replay", str(earlier), "--history", str(db),
                                       "--out", str(tmp_path / "b"), "--format", "json"])  # fmt: skip
    assert json.loads(result.stdout)["hosts"][0]["verdict"]["action"] == "reboot-node"

    class Incidents:
        def collect(self):  # noqa: ANN202
            return gpu_incidents({NODE}, db)

    registry = CollectorRegistry(auto_describe=False)
    registry.register(Incidents())
    textfile = stack.textfiles / "history-node.prom"
    write_to_textfile(str(textfile), registry)
    assert 'code="79"' in textfile.read_text()
    return textfile


def recorded_now(tmp_path: Path, boot_started: float) -> Path:
    """This boot (began at ``boot_started``): the GPU fell off the bus again."""
    host = tmp_path / "now" / NODE
    host.mkdir(parents=True)
    fell = time.strftime("%a %b %d %H:%M:%S %Y", time.gmtime(boot_started + 1))
    (host / "kernel-log.out").write_text(f"[{fell}] {XID79}\n")
    shutil.copy(ROOT / "fixtures" / "hosts" / "xid79-fallen-off-bus" / "nvidia-smi.out", host / "nvidia-smi.out")
    first = time.strftime("%a %Y-%m-%d %H:%M:%S UTC", time.gmtime(boot_started))
    (host / "kernel-log-boots.out").write_text(
        "IDX BOOT ID                          FIRST ENTRY                 LAST ENTRY\n"
        f"  0 1f0e9d8c7b6a45f4e3d2c1b0a9f8e7d6 {first} {first}\n"
    )
    return host


@pytest.mark.integration
def test_history_from_prometheus_makes_a_repeat_fall_a_hardware_ticket(
    prometheus_stack: PrometheusStack, tmp_path: Path
) -> None:
    textfile = export_incidents(prometheus_stack, tmp_path)
    try:
        before_scrape = time.time() - 5
        wait_for(
            "Prometheus to scrape nightowl_gpu_incidents_total",
            lambda: prometheus_stack.query(f'nightowl_gpu_incidents_total{{host="{NODE}"}}'),
            60,
        )
        time.sleep(1.5)  # a sample strictly before the boot below began
        url = f"http://{LOOPBACK}:{prometheus_stack.ports['prometheus']}"

        def triage(host: Path, *extra: str) -> dict:
            args = ["triage", "xid", "--replay", str(host), "--history", "off", "--out", str(tmp_path / "b"),
                    "--format", "json", *extra]  # fmt: skip
            return json.loads(CliRunner().invoke(main, args).stdout)["hosts"][0]["verdict"]

        rebooted = recorded_now(tmp_path / "a", time.time())
        assert triage(rebooted)["action"] == "reboot-node"  # without Prometheus: the first fall, as far as it knows
        verdict = triage(rebooted, "--history-from", url)
        assert (verdict["id"], verdict["action"]) == ("gpu-repeat-offender", "hardware-ticket"), verdict
        assert "Prometheus" in verdict["summary"]
        # a boot that began before the series existed: what Prometheus holds may be this boot's own fall
        same_boot = recorded_now(tmp_path / "b2", before_scrape - 3600)
        assert triage(same_boot, "--history-from", url)["action"] == "reboot-node"
        # Prometheus unreachable: a warning, the verdict as without it
        assert triage(rebooted, "--history-from", f"http://{LOOPBACK}:9")["action"] == "reboot-node"
    finally:
        textfile.unlink()
