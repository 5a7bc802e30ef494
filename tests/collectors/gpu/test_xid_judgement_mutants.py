"""The xid-judgement collector on its own (issue 30 mutation figures): what it derives from the kernel
log's events with and without a site policy, and why it refuses a policy before the run."""

from __future__ import annotations

from pathlib import Path

import pytest

from nightowl.collectors.gpu.xid_judgement import COLLECTOR, KIND, check_params, derive

EXAMPLE_POLICY = Path(__file__).resolve().parents[3] / "docs" / "xid-policy.example.yaml"


def xid(code: int, pci: str = "0000:5a:00") -> dict[str, object]:
    return {"kind": "xid", "code": code, "pci": pci, "time": None, "pid": None, "process": None,
            "text": f"NVRM: Xid (PCI:{pci}): {code}, pid=1"}  # fmt: skip


def test_without_a_policy_the_catalog_decides() -> None:
    facts = derive({"kernel_log": {"events": [xid(63)]}})
    assert facts["kind"] == KIND == "xid-judgement"
    assert facts["warnings"] == []
    assert facts["policy"] is None
    assert facts["action"] == "none"
    assert facts["reasons"] == ["Xid 63 on 0000:5a:00: catalog IGNORE -> none"]
    assert facts["gpu_actions"] == {"0000:5a:00": "none"}
    assert facts["gpus"] == []


def test_a_site_policy_overrides_the_catalog_and_says_so() -> None:
    facts = derive({"kernel_log": {"events": [xid(63)]}}, {"xid_policy": str(EXAMPLE_POLICY)})
    assert facts["policy"] == str(EXAMPLE_POLICY)
    assert facts["action"] == "reset-gpu"
    assert facts["gpus"] == ["0000:5a:00"]
    assert facts["gpu_actions"] == {"0000:5a:00": "reset-gpu"}
    (reason,) = facts["reasons"]
    assert reason.startswith("Xid 63 on 0000:5a:00: site policy -> reset-gpu: site policy: activate row remaps")


@pytest.mark.parametrize("params", [None, {}, {"xid_policy": ""}, {"xid_policy": None}])
def test_no_policy_named_is_no_policy(params: dict[str, object] | None) -> None:
    facts = derive({"kernel_log": {"events": [xid(48)]}}, params)
    assert facts["policy"] is None
    assert facts["action"] == "reset-gpu"  # 48 alone: catalog pairing rule


def test_a_kernel_log_without_events_judges_nothing() -> None:
    for log in ({}, {"events": None}, {"events": []}):
        facts = derive({"kernel_log": log})
        assert (facts["action"], facts["reasons"], facts["gpus"], facts["gpu_actions"]) == ("none", [], [], {})


def test_check_params_accepts_no_policy_and_a_readable_one() -> None:
    assert check_params({}) == []
    assert check_params({"xid_policy": ""}) == []
    assert check_params({"xid_policy": str(EXAMPLE_POLICY)}) == []


def test_check_params_names_a_policy_it_cannot_read(tmp_path: Path) -> None:
    missing = tmp_path / "absent.yaml"
    assert check_params({"xid_policy": str(missing)}) == [
        f"xid_policy {missing}: cannot read it: No such file or directory"
    ]


def test_check_params_names_a_malformed_policy(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("overrides:\n  63: {action: melt-gpu}\n", encoding="utf-8")
    (problem,) = check_params({"xid_policy": str(bad)})
    assert problem.startswith(f"xid_policy: {bad}: override for Xid 63 needs an action, one of none, ")


def test_check_params_names_a_policy_that_is_not_yaml(tmp_path: Path) -> None:
    broken = tmp_path / "broken.yaml"
    broken.write_text("overrides: [unclosed\n", encoding="utf-8")
    (problem,) = check_params({"xid_policy": str(broken)})
    assert problem.startswith(f"xid_policy {broken}: not a valid policy: ")
    assert "\n" not in problem and "  " not in problem and ", line 1, column " in problem  # one line, folded


def test_the_collector_is_derived_from_the_kernel_log_and_runs_nothing() -> None:
    assert COLLECTOR.kind == KIND
    assert COLLECTOR.inputs == ("kernel_log",)
    assert COLLECTOR.commands == ()
    assert COLLECTOR.derive is derive and COLLECTOR.check_params is check_params
    declared = {fact.name: fact for fact in COLLECTOR.produces}
    assert {"policy", "action", "reasons", "gpus", "gpu_actions"} <= set(declared)
    assert not any(declared[name].optional for name in ("policy", "action", "reasons", "gpus", "gpu_actions"))
    assert all(fact.meaning for fact in COLLECTOR.produces)
    assert "xid_policy" in COLLECTOR.description


TYPES = {"str": (str,), "str | None": (str, type(None)), "list[str]": (list,), "dict": (dict,), "bool": (bool,),
         "int": (int,), "list[str] | None": (list, type(None))}  # fmt: skip


def test_what_derive_returns_has_the_declared_types() -> None:
    produced = derive({"kernel_log": {"events": [xid(63)]}}, {"xid_policy": str(EXAMPLE_POLICY)})
    for fact in COLLECTOR.produces:
        if fact.name in produced:
            assert isinstance(produced[fact.name], TYPES[fact.type]), fact
        else:
            assert fact.optional, fact
