"""A sweep's inventory says each host's tenancy (its label ``tenancy``), host by host (issue 43 item 5)."""

from __future__ import annotations

from pathlib import Path

from nightowl.collectors import get_collector
from nightowl.engine.runner import RunOptions
from nightowl.engine.session import run_runbook
from nightowl.fleet.inventory import declared_tenancies, load_inventory
from nightowl.knowledge import actions
from nightowl.library import runbooks
from nightowl.paths import data_dir
from nightowl.transports.replay import ReplayTransport

HOSTS = data_dir("fixtures") / "hosts"


def test_the_inventory_label_is_each_hosts_declared_tenancy(tmp_path: Path) -> None:
    inventory = tmp_path / "inventory.yaml"
    inventory.write_text(
        "hosts:\n"
        "  - {name: gpu-01, address: 10.0.0.1, labels: {tenancy: vm}}\n"
        "  - {name: gpu-02, address: 10.0.0.2}\n"
    )
    assert declared_tenancies(load_inventory(inventory)) == {"gpu-01": "vm"}


def test_a_mapping_gives_each_host_its_own_and_an_unnamed_host_its_evidence() -> None:
    by_host = {"gpu-01": "vm"}
    assert actions.first_steps("reboot-node", {}, by_host, "gpu-01")["tenancy"] == "vm"
    assert actions.first_steps("reboot-node", {}, by_host, "gpu-02")["tenancy"] is None


def test_a_run_with_the_sweeps_mapping_gives_the_vm_its_instance_steps(tmp_path: Path) -> None:
    loaded = runbooks.load("xid")
    params = {k: p.default for k, p in loaded.runbook.parameters.items()}
    params["tenancy"] = {"xid79-fallen-off-bus": "vm"}
    folder = HOSTS / "xid79-fallen-off-bus"
    (run,), _ = run_runbook(
        loaded, {folder.name: lambda: ReplayTransport(folder, folder.name)}, get_collector, RunOptions(params=params),
        tmp_path,
    )  # fmt: skip
    assert run.verdict["action"] == "reboot-node"
    assert run.verdict["first_step"]["tenancy"] == "vm" and run.verdict["first_step"]["determined_by"] == "declared"
    assert "stop and start the instance" in run.verdict["first_step"]["steps"]
