"""NVIDIA's Xid catalog as data, and the rules that turn Xids into one action."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from nightowl.collectors.gpu import xid_catalog as xc
from nightowl.knowledge import actions


def xid(code: int, pci: str = "0000:3b:00", text: str = "", **extra: Any) -> dict[str, Any]:
    return {"kind": "xid", "code": code, "pci": pci, "text": text, "pid": None, "process": None, **extra}


# The verdict actions the outside contract names (docs/reference.md#verdicts); actions.csv may add more.
CONTRACT_ACTIONS = {
    "none", "restart-app", "reset-gpu", "drain-and-reset", "reboot-node",
    "hardware-ticket", "reconfigure", "scale-out", "escalate",
}  # fmt: skip


def test_action_order_is_the_action_table_and_holds_the_contract_actions() -> None:
    assert actions.names() == xc.ACTION_ORDER
    assert set(xc.ACTION_ORDER) >= CONTRACT_ACTIONS


def test_every_bucket_in_the_catalog_maps_to_a_contract_action() -> None:
    for entry in xc.CATALOG.values():
        if entry.immediate_action:
            assert entry.immediate_action in xc.BUCKET_TO_ACTION, entry
        else:  # the catalog names no action (162-172): a person reads its words
            assert xc.action_for(entry.code) == "escalate", entry
    assert set(xc.BUCKET_TO_ACTION.values()) <= set(xc.ACTION_ORDER)


def test_rows_keep_their_source_tag() -> None:
    for entry in xc.CATALOG.values():
        assert any(tag in entry.source for tag in ("[P]", "[S]", "[M]", "[D]")), entry
        assert entry.source_date and entry.meaning


@pytest.mark.parametrize(
    ("bucket", "action"),
    [
        ("IGNORE", "none"),
        ("RESTART_APP", "restart-app"),
        ("RESET_GPU", "reset-gpu"),
        ("RESTART_BM", "reboot-node"),
        ("RESTART_VM", "reboot-node"),
        ("CHECK_MECHANICALS", "hardware-ticket"),
        ("UPDATE_SWFW", "reconfigure"),
        ("CONTACT_SUPPORT", "escalate"),
    ],
)
def test_bucket_to_action(bucket: str, action: str) -> None:
    assert xc.BUCKET_TO_ACTION[bucket] == action


@pytest.mark.parametrize(
    ("code", "text", "action"),
    [
        (13, None, "restart-app"),
        (31, None, "restart-app"),
        (43, None, "none"),
        (48, None, "reset-gpu"),
        (63, None, "none"),
        (64, None, "reset-gpu"),
        (79, None, "reboot-node"),
        (94, None, "restart-app"),
        (95, None, "reset-gpu"),
        (119, None, "reset-gpu"),
        (61, None, "escalate"),
        (54, None, "hardware-ticket"),
        (149, "NETIR_LINK_EVT Fatal XC0 i0 Link 00 (0x026001c6)", "drain-and-reset"),
        (144, "SAW_MVB Nonfatal XC0 i0 Link 0 (0x00000001)", "none"),
        (145, None, "reset-gpu"),
        (154, "GPU recovery action changed from 0x0 (None) to 0x2 (Node Reboot Required)", "reboot-node"),
        (154, "GPU recovery action changed from 0x0 (None) to 0x1 (GPU Reset Required)", "reset-gpu"),
        (154, "GPU recovery action changed from 0x0 (None) to 0x3 (Drain P2P)", "drain-and-reset"),
        (154, "GPU recovery action changed from 0x1 (GPU Reset Required) to 0x0 (None)", "none"),
        (154, "GPU recovery action changed to something unheard of", "escalate"),
    ],
)
def test_action_for(code: int, text: str | None, action: str) -> None:
    assert xc.action_for(code, text) == action


@pytest.mark.parametrize("code", [0, 173, 200, 9999])
def test_unknown_codes_escalate_never_none(code: int) -> None:
    assert xc.lookup(code) is None
    assert xc.action_for(code) == "escalate"
    assert xc.explain(xid(code))["first_step"].startswith("look up this code in NVIDIA's Xid catalog")


def test_strictest() -> None:
    assert xc.strictest([]) == "none"
    assert xc.strictest(["restart-app", "reset-gpu", "none"]) == "reset-gpu"
    assert xc.strictest(["reboot-node", "escalate"]) == "reboot-node"
    assert xc.strictest(["restart-app", "made-up"]) == "escalate"


def test_explain_gives_one_line_of_facts() -> None:
    line = xc.explain(xid(95, time="2024-03-05T10:00:00"))
    assert line == {
        "time": "2024-03-05T10:00:00",
        "pci": "0000:3b:00",
        "kind": "xid",
        "code": 95,
        "mnemonic": "UNCONTAINED_ERROR",
        "meaning": xc.CATALOG[95].meaning,
        "action": "reset-gpu",
        "first_step": xc.FIRST_STEP_BY_CODE[95],
    }
    assert "nvidia-smi -r" in xc.explain(xid(62))["first_step"]
    assert "Node Reboot Required" in xc.explain(xid(154, text="... to 0x2 (Node Reboot Required)"))["first_step"]
    sxid = xc.explain({"kind": "sxid", "code": 20034, "pci": "0000:05:00", "severity": "fatal"})
    assert sxid["action"] == "reset-gpu" and sxid["mnemonic"] == "NVSWITCH_ERR_HW_DLPL_LTSSM_FAULT_UP"
    unknown = xc.explain({"kind": "sxid", "code": 99999, "pci": "0000:05:00", "severity": "non-fatal"})
    assert unknown["action"] == "escalate" and "not in the SXid catalog" in unknown["meaning"]


# --- pairing rules (NVIDIA Xid catalog, docs/sources.md#xid) ----------------------------------------------------
@pytest.mark.parametrize(
    ("codes", "action"),
    [
        ([48], "reset-gpu"),
        ([48, 63], "drain-and-reset"),
        ([48, 64], "drain-and-reset"),
        ([94], "restart-app"),
        ([95], "reset-gpu"),
        ([13, 43], "restart-app"),
        ([45], "restart-app"),
        ([79, 45], "reboot-node"),
        ([63], "none"),
    ],
)
def test_judge_pairing(codes: list[int], action: str) -> None:
    assert xc.judge([xid(code) for code in codes])["action"] == action


def test_sympathetic_xids_are_named_in_reasons() -> None:
    verdict = xc.judge([xid(48), xid(43), xid(45)])
    assert any("Xid 43" in r and "sympathetic" in r for r in verdict["reasons"])
    assert any("Xid 45" in r and "sympathetic" in r for r in verdict["reasons"])


def test_154_overrides_when_stricter_only() -> None:
    reboot = "GPU recovery action changed from 0x0 (None) to 0x2 (Node Reboot Required)"
    none = "GPU recovery action changed from 0x1 (GPU Reset Required) to 0x0 (None)"
    assert xc.judge([xid(95), xid(154, text=reboot)])["action"] == "reboot-node"
    assert xc.judge([xid(95), xid(154, text=none)])["action"] == "reset-gpu"


def test_judge_is_per_gpu() -> None:
    verdict = xc.judge([xid(48, "0000:5a:00"), xid(63, "0000:6b:00")])
    assert verdict["action"] == "reset-gpu"  # 48 and 63 on different GPUs do not pair
    assert verdict["gpus"] == ["0000:5a:00"]
    assert verdict["gpu_actions"] == {"0000:5a:00": "reset-gpu", "0000:6b:00": "none"}


def test_45_caused_by_another_xid_stands_for_it() -> None:
    verdict = xc.judge([xid(45, text="Ch 00000001 caused by previous Xid 149", caused_by_xid=149)])
    assert verdict["action"] == "reset-gpu"
    assert any("Xid 149 (named as the cause of Xid 45)" in r for r in verdict["reasons"])


def test_non_xid_kinds() -> None:
    assert xc.judge([{"kind": "fallen_off_bus", "pci": "0000:01:00"}])["action"] == "reboot-node"
    assert xc.judge([{"kind": "gpu_reset_required", "pci": None}])["action"] == "reset-gpu"
    fatal_sxid = {"kind": "sxid", "code": 20034, "pci": "0000:05:00", "severity": "fatal"}
    assert xc.judge([fatal_sxid])["action"] == "reset-gpu"
    assert xc.judge([{"kind": "other_nvrm", "pci": None, "code": None}]) == {
        "action": "none",
        "reasons": [],
        "gpus": [],
        "gpu_actions": {},
    }


# --- site policy ------------------------------------------------------------------------------------------
def test_policy_overrides_with_its_reason(tmp_path: Path) -> None:
    path = tmp_path / "policy.yaml"
    path.write_text('overrides:\n  63: {action: reset-gpu, reason: "EC2 replaces hosts with repeated remaps"}\n')
    policy = xc.load_policy(str(path))
    assert policy == {63: ("reset-gpu", "EC2 replaces hosts with repeated remaps")}
    verdict = xc.judge([xid(63)], policy=policy)
    assert verdict["action"] == "reset-gpu"
    assert any("site policy" in r and "EC2 replaces" in r for r in verdict["reasons"])


@pytest.mark.parametrize(
    "document",
    ["overrides: [1, 2]\n", "overrides:\n  63: {action: explode}\n", "overrides:\n  sixty: {action: none}\n"],
)
def test_bad_policy_is_refused(tmp_path: Path, document: str) -> None:
    path = tmp_path / "policy.yaml"
    path.write_text(document)
    with pytest.raises(ValueError):
        xc.load_policy(str(path))
