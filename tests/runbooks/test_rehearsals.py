"""Every rehearsal in fixtures/rehearsals/ reaches its expected path and verdict."""

from __future__ import annotations

import pytest

from nightowl.library import runbooks
from nightowl.library.rehearse import rehearsal_cases, rehearse

CASES = [(name, case) for name in runbooks.builtin_paths() for case in rehearsal_cases(name)]


@pytest.mark.parametrize(("runbook", "case"), CASES, ids=[f"{n}:{c.get('name', c.get('host'))[:60]}" for n, c in CASES])
def test_rehearsal(runbook: str, case: dict) -> None:
    result = rehearse(runbook, case)
    assert result.passed, f"{result.name}: {'; '.join(result.problems)} (path {result.path})"


# Verdicts no public report in the corpus shows; listed so a gap is a decision, not an accident.
NOT_IN_CORPUS = {
    "xid": {
        # issue 24: no public NVLink5 line decodes to a non-fatal RESET_GPU or to CONTACT_SUPPORT / XID_154_EVAL alone
        "nvlink5-reset",
        "nvlink5-escalate",
        "recovery-node-reboot",
        "recovery-drain-and-reset",
        "row-remap-failed",
        "sram-threshold-exceeded",
        "uncorrectable-ecc-dbe",
        "uncontained-memory-error",
        "suspect-gpu",
        "unknown-xid",
        "xid-check-mechanicals",
        "xid-report-to-vendor",
        "thermal-or-power-slowdown",
        "pcie-link-degraded",
        # issue 13: no public sample shows a non-fatal AER on a GPU address, or an uncorrectable AER on a port
        # with nothing below it named (pop-os/pop#3363 is correctable). (The corrected-only DIMM is rehearsed on
        # radiasoft/devops#134 beside the healthy L40S nvidia-smi: host-memory-single-ce-sbridge.)
        "pcie-uncorrectable-on-gpu",
        "pcie-error-unattributed",
        # issue 29: reached only under a site policy's count-in-window or after-reboot rule;
        # tests/history/test_history.py replays it with docs/xid-policy.example.yaml
        "xid-repeating",
    },
    "oom": {
        # PyTorch listing this process AND another: no public sample (the "Process N" samples in
        # fixtures/corpus-extra/engine-log are the engine itself seen from a container, per their threads)
        "gpu-held-by-other-process",
        "gpu-occupied-at-start",
        "gpu-oom-unplaced",
        "host-oom-during-load",
        "runtime-activation-oom",
    },
    "p99-regression": {
        "admission-cap",
        "batch-growth",
        "kv-capacity",
        "output-length-shift",
        "preemption",
        "prefix-cache-miss",
        "server-overhead",
    },
    "nccl-hang": {"gdr-not-used", "rail-below-baseline"},
    "preflight": {"tp-group-without-nvlink", "cpu-governor-not-performance"},
    "engine-start": {
        "driver-older-than-runtime",
        "hub-unreachable",
        "architecture-not-supported",
        "port-in-use",
        "host-oom-killed",
    },
    "node-health": {
        "xid-repeating",  # issue 29: only under a site policy rule (tests/history/test_history.py)
        "app-xids-seen",
        "xid-reboot-node",
        "xid-hardware-check",
        "xid-escalate",
        "row-remap-failed",
        "hw-slowdown",
        "pcie-degraded",
        # issue 13: no public sample shows a non-fatal AER on a GPU address, or an uncorrectable AER on a port
        # with nothing below it named (pop-os/pop#3363 is correctable). (The corrected-only DIMM is rehearsed on
        # radiasoft/devops#134 beside the healthy L40S nvidia-smi: host-memory-single-ce-sbridge.)
        "pcie-uncorrectable-on-gpu",
        "pcie-error-unattributed",
    },
}


@pytest.mark.parametrize("runbook", sorted(runbooks.builtin_paths()))
def test_every_verdict_is_rehearsed_or_listed(runbook: str) -> None:
    loaded = runbooks.load(runbook)
    verdicts = {n.verdict.id for n in loaded.runbook.nodes.values() if n.verdict}
    rehearsed = {c["expect"].get("verdict") for c in rehearsal_cases(runbook)}
    assert verdicts - rehearsed - NOT_IN_CORPUS.get(runbook, set()) == set()
    assert NOT_IN_CORPUS.get(runbook, set()) & rehearsed == set(), "now rehearsed: drop it from NOT_IN_CORPUS"


def test_site_policy_overrides_a_code_and_the_verdict_says_why(tmp_path) -> None:  # noqa: ANN001
    """Where public tools disagree with the catalog, a site policy decides, and the verdict shows its reason."""
    policy = tmp_path / "xid-policy.yaml"
    policy.write_text('overrides:\n  62: {action: reboot-node, reason: "site: PMU halts here need a power cycle"}\n')
    plain = rehearse("xid", {"host": "xid62-pmu-halt", "expect": {"verdict": "xid-requires-gpu-reset"}})
    assert plain.passed, plain.problems
    case = {
        "host": "xid62-pmu-halt",
        "params": {"xid_policy": str(policy)},
        "expect": {"verdict": "xid-requires-reboot", "action": "reboot-node"},
    }
    assert rehearse("xid", case).passed
    from nightowl.collectors import get_collector
    from nightowl.engine.runner import RunOptions
    from nightowl.engine.session import run_runbook
    from nightowl.library import runbooks as rb
    from nightowl.paths import data_dir
    from nightowl.transports.replay import ReplayTransport

    loaded = rb.load("xid")
    defaults = {k: p.default for k, p in loaded.runbook.parameters.items()}
    host = data_dir("fixtures") / "hosts" / "xid62-pmu-halt"
    runs, _ = run_runbook(
        loaded,
        {"h": lambda: ReplayTransport(host, "h")},
        get_collector,
        RunOptions(params={**defaults, "xid_policy": str(policy)}),
        tmp_path / "out",
    )
    assert "PMU halts here need a power cycle" in runs[0].verdict["summary"]
