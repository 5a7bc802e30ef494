"""The Xid catalog's small judgements on their own (issue 30 mutation figures): action ranks, Xid 154's
recovery text, NVLink5 severity, and a site policy's every refusal. Imports go through the public
module, which keeps its names when its parts move."""

from __future__ import annotations

from pathlib import Path

import pytest

from nightowl.collectors.gpu import xid_catalog as catalog


def _table_order() -> tuple[str, ...]:
    """actions.csv's actions by rank, read with the csv module alone (the oracle the ranking must match)."""
    import csv

    from nightowl import knowledge

    text = knowledge.path("actions.csv").read_text()
    rows = csv.DictReader(line for line in text.splitlines() if not line.startswith("#"))
    return tuple(row["action"] for row in sorted(rows, key=lambda row: int(row["rank"])))


ORDER = _table_order()


def test_action_ranks_and_the_strictest_action() -> None:
    assert tuple(catalog.ACTION_ORDER) == ORDER
    assert [catalog.action_rank(a) for a in ORDER] == list(range(len(ORDER)))
    assert catalog.action_rank("melt-gpu") == catalog.action_rank("escalate")
    assert catalog.strictest([]) == "none"
    assert catalog.strictest(["none", "reset-gpu", "restart-app"]) == "reset-gpu"
    assert catalog.strictest(["reset-gpu", "reset-gpu"]) == "reset-gpu"
    assert catalog.strictest(["melt-gpu"]) == "escalate"  # an unknown action is never lost
    assert catalog.strictest(["reboot-node", "melt-gpu"]) == "reboot-node"
    assert catalog.strictest(["hardware-ticket", "reboot-node"]) == "hardware-ticket"


@pytest.mark.parametrize(
    ("text", "name", "recovery"),
    [
        ("GPU recovery action changed from 0x0 (None) to 0x2 (Node Reboot Required)", "Node Reboot Required",
         "node-reboot"),
        ("to 0x1 (GPU Reset Required)", "GPU Reset Required", "gpu-reset"),
        ("to 0x9 (OS Reboot)", "OS Reboot", "node-reboot"),  # a name outside the list: read by its words
        ("to 0x3 (Drain P2P)", "Drain P2P", "drain-p2p"),
        ("x (Drain and Reset)", "Drain and Reset", "drain-and-reset"),
        ("nothing", None, None),
        ("", None, None),
        (None, None, None),
    ],
)  # fmt: skip
def test_xid_154_recovery_from_its_text(text: str | None, name: str | None, recovery: str | None) -> None:
    assert catalog.recovery_name(text) == name
    assert catalog.recovery_from_text(text) == recovery


def test_recovery_names_and_the_strictest_recovery() -> None:
    assert catalog.normalize_recovery_action("GPU Reset Required") == "gpu-reset"
    assert catalog.normalize_recovery_action("Node Reboot Required") == "node-reboot"
    assert catalog.normalize_recovery_action("bogus") is None
    assert catalog.normalize_recovery_action("") is None and catalog.normalize_recovery_action(None) is None
    assert catalog.strictest_recovery([None, "gpu-reset", "node-reboot"]) == "node-reboot"
    assert catalog.strictest_recovery(["node-reboot", "gpu-reset"]) == "node-reboot"
    assert catalog.strictest_recovery([]) is None and catalog.strictest_recovery(["bogus"]) is None


def test_nvlink5_severity_decides_its_action() -> None:
    assert catalog.nvlink_severity("Nonfatal error") == "nonfatal"
    assert catalog.nvlink_severity("Non-fatal error") == "nonfatal"
    assert catalog.nvlink_severity("a Fatal error") == "fatal"
    assert catalog.nvlink_severity("no word") is None
    assert catalog.nvlink_severity("") is None and catalog.nvlink_severity(None) is None
    assert catalog.action_for(144, "Fatal") == "drain-and-reset"
    assert catalog.action_for(144, "Nonfatal") == "none"
    assert catalog.action_for(144, None) == "reset-gpu"  # the catalog's own action when the text says neither


def test_action_for() -> None:
    assert catalog.action_for(79) == "reboot-node"
    assert catalog.action_for(13) == "restart-app"
    assert catalog.action_for(9999) == "escalate"  # unknown codes escalate, never `none`
    assert catalog.action_for(154, "to 0x2 (Node Reboot Required)") == "reboot-node"
    assert catalog.action_for(154, "to 0x1 (GPU Reset Required)") == "reset-gpu"
    assert catalog.action_for(154, None) == "escalate"
    assert catalog.lookup(79) is not None and catalog.lookup(79).mnemonic == "GPU_HAS_FALLEN_OFF_THE_BUS"
    assert catalog.lookup(9999) is None


def write(tmp_path: Path, text: str) -> str:
    path = tmp_path / "policy.yaml"
    path.write_text(text, encoding="utf-8")
    return str(path)


def test_a_policy_and_its_history_rules(tmp_path: Path) -> None:
    path = write(tmp_path, (
        "overrides:\n"
        "  63: {action: reset-gpu, reason: remap now}\n"
        "  '92': {action: hardware-ticket}\n"
        "  43: {count: 3, window: 10m, action: drain-and-reset, reason: three in ten}\n"
        "  79: {after_reboots: 1, action: hardware-ticket}\n"
    ))  # fmt: skip
    assert catalog.load_policy(path) == {63: ("reset-gpu", "remap now"), 92: ("hardware-ticket", "site policy")}
    assert catalog.load_history_rules(path) == [
        {"code": 43, "action": "drain-and-reset", "reason": "three in ten", "count": 3, "window_seconds": 600},
        {"code": 79, "action": "hardware-ticket", "reason": "", "after_reboots": 1},
    ]
    assert catalog.load_policy(write(tmp_path, "")) == {}
    assert catalog.load_policy(write(tmp_path, "overrides: {}\n")) == {}
    assert catalog.load_history_rules(write(tmp_path, "overrides: {63: {action: none}}\n")) == []


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("[1, 2]\n", "'overrides' must be a mapping of Xid code to {action, reason}"),
        ("overrides: [63]\n", "'overrides' must be a mapping of Xid code to {action, reason}"),
        ("overrides: {x63: {action: none}}\n", "override key 'x63' is not a Xid code"),
        ("overrides: {63: reset-gpu}\n", "override for Xid 63 needs an action, one of none, restart-app, "),
        ("overrides: {63: {action: melt}}\n", "override for Xid 63 needs an action, one of none, restart-app, "),
        ("overrides: {63: {reason: x}}\n", "override for Xid 63 needs an action"),
        ("overrides: {43: {count: 0, window: 10m, action: none}}\n", "Xid 43: count needs a positive integer"),
        ("overrides: {43: {count: true, window: 10m, action: none}}\n", "Xid 43: count needs a positive integer"),
        ("overrides: {43: {count: '3', window: 10m, action: none}}\n", "Xid 43: count needs a positive integer"),
        ("overrides: {43: {count: 3, action: none}}\n", "Xid 43: count needs a positive integer and window an age"),
        ("overrides: {43: {window: 10m, action: none}}\n", "Xid 43: count needs a positive integer"),
        ("overrides: {43: {count: 3, window: soon, action: none}}\n", "Xid 43: count needs a positive integer"),
        ("overrides: {79: {after_reboots: 0, action: none}}\n", "Xid 79: after_reboots needs a positive integer"),
        ("overrides: {79: {after_reboots: true, action: none}}\n", "Xid 79: after_reboots needs a positive integer"),
        ("overrides: {79: {after_reboots: '1', action: none}}\n", "Xid 79: after_reboots needs a positive integer"),
    ],
)
def test_a_policy_refused_names_the_file_and_the_code(tmp_path: Path, text: str, message: str) -> None:
    path = write(tmp_path, text)
    with pytest.raises(ValueError) as caught:
        catalog.load_policy(path)
    assert str(caught.value).startswith(f"{path}: {message}")
    with pytest.raises(ValueError):
        catalog.load_history_rules(path)


def test_a_count_rule_of_one_and_an_after_reboots_rule_of_one_are_accepted(tmp_path: Path) -> None:
    rules_text = "overrides:\n  43: {count: 1, window: 1h, action: none}\n  79: {after_reboots: 1, action: none}\n"
    path = write(tmp_path, rules_text)
    rules = catalog.load_history_rules(path)
    assert [(r["code"], r.get("count"), r.get("window_seconds"), r.get("after_reboots")) for r in rules] == [
        (43, 1, 3600, None),
        (79, None, None, 1),
    ]


@pytest.mark.parametrize(
    ("event", "meaning", "action", "first_step"),
    [
        ({"kind": "fallen_off_bus", "text": "t"}, "GPU fell off the bus (no Xid line)", "reboot-node",
         "drain the node, run nvidia-bug-report.sh, then power-cycle it (a GPU reset cannot work); if it "
         "recurs, hardware ticket (GPU, riser, slot, power)"),
        ({"kind": "gpu_reset_required", "text": "t"}, "driver reports the GPU needs a reset", "reset-gpu",
         "reset the GPU (nvidia-smi -r after stopping its processes); if it recurs reboot, then replace"),
        ({"kind": "other_nvrm", "text": "NVRM: foo"}, "NVIDIA driver message", "none",
         "read it alongside the Xids around it"),
        ({"kind": "oom_kill", "text": "oom"}, "the kernel killed a process: host out of memory", "none",
         "check the process's memory limit"),
        ({"kind": "pcie_aer", "text": "AER"}, "PCIe Advanced Error Reporting event", "none",
         "watch the link; uncorrected or repeating errors: check riser, slot and cabling"),
        ({"kind": "xid", "code": 78, "pci": "0000:5a:00", "text": "x"}, "vGPU Start Error", "reconfigure",
         "update the driver and GPU firmware to current versions, then retry"),
        ({"kind": "xid", "code": 144, "text": "Nonfatal"}, "NVLink5 SAW unit error", "none",
         "non-fatal: no action now; watch for repeats on the same link"),
    ],
)  # fmt: skip
def test_explain_gives_the_meaning_action_and_first_step(
    event: dict[str, object], meaning: str, action: str, first_step: str
) -> None:
    explained = catalog.explain({"code": None, "pci": None, **event})
    assert (explained["meaning"], explained["action"], explained["first_step"]) == (meaning, action, first_step)
    assert explained["kind"] == event["kind"]


def test_judge_treats_a_gpu_off_the_bus_without_xid_79_as_79() -> None:
    off = {"kind": "fallen_off_bus", "code": None, "pci": "0000:5a:00", "text": "fell off the bus"}
    judged = catalog.judge([off])
    assert judged["action"] == "reboot-node"
    assert judged["reasons"] == ["0000:5a:00 fell off the bus (no Xid 79 line) -> treated as Xid 79 -> reboot-node"]
    with_79 = catalog.judge([off, {"kind": "xid", "code": 79, "pci": "0000:5a:00", "text": "Xid 79"}])
    assert not any("no Xid 79 line" in reason for reason in with_79["reasons"])
    assert with_79["action"] == "reboot-node"


def test_judge_names_an_event_without_a_pci_address_unknown_gpu() -> None:
    judged = catalog.judge([{"kind": "xid", "code": 13, "pci": None, "text": "x"}])
    assert judged["reasons"] == ["Xid 13 on unknown GPU: catalog RESTART_APP -> restart-app"]
    assert judged["gpu_actions"] == {"unknown": "restart-app"}


def test_the_first_step_of_each_action() -> None:
    steps = catalog.FIRST_STEP_BY_ACTION
    assert steps["drain-and-reset"].startswith("drain the GPU's peer-to-peer / NVLink users, then reset the GPU")
    assert steps["escalate"] == "collect nvidia-bug-report.sh output and escalate to NVIDIA support"
    assert set(steps) >= set(catalog.ACTION_ORDER) - {"none"}
    assert all(steps[action] for action in steps)


def test_the_recovery_tables_read_from_the_knowledge_file() -> None:
    assert catalog.RECOVERY_TO_ACTION["gpu-reset"] == "reset-gpu"
    assert catalog.RECOVERY_TO_ACTION["node-reboot"] == "reboot-node"
    assert catalog.RECOVERY_ORDER[0] == "none" and catalog.RECOVERY_ORDER[-1] == "node-reboot"
    assert {value for _, value in catalog.RECOVERY_PATTERNS} == set(catalog.RECOVERY_ORDER)
