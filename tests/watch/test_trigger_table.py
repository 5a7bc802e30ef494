"""The trigger table as data (nightowl/knowledge/watch_triggers.csv): every row can fire, and a row that
cannot be read stops with the file named."""

from __future__ import annotations

from pathlib import Path

import pytest

from nightowl import knowledge
from nightowl.watch import triggers
from nightowl.watch.triggers import LineJudge

# One kernel line per trigger that fires it (the Xid first where the trigger needs one before it).
SAMPLES = {
    "xid": ["[ 1200.0] NVRM: Xid (PCI:0000:3b:00): 45, pid=1, name=python, Ch 00000010"],
    "sxid": ["[ 10.0] nvidia-nvswitch0: SXid (PCI:0000:c3:00.0): 20034, Fatal, Link 30 LTSSM Fault Up"],
    "fallen-off-bus": ["[ 10.0] NVRM: The NVIDIA GPU 0000:3b:00.0 (PCI ID: 10de:2330) has fallen off the bus."],
    "aer-fatal": ["[ 10.0] pcieport 0000:00:01.0: AER: Uncorrected (Fatal) error received: 0000:3b:00.0"],
    "edac-uncorrectable": ["[ 5.0] EDAC MC3: 1 UE memory read error on CPU_SrcID#1_MC#1_Chan#2_DIMM#0 (x)"],
    "gpu-init-failed": ["[ 10.0] NVRM: GPU 0000:3b:00.0: RmInitAdapter failed! (0x26:0xffff:1601)"],
    "hung-task-after-xid": [
        "[ 1200.0] NVRM: Xid (PCI:0000:3b:00): 45, pid=1, name=python, Ch 00000010",
        "[ 1234.5] INFO: task nvidia-smi:4242 blocked for more than 120 seconds.",
    ],
    "pattern-action": [
        "[ 24.3] NVRM: GPU6 _kgspIsHeartbeatTimedOut: Heartbeat timed out, currentTimeMs 812751949 "
        "heartbeat 1899482 heartbeatWithOffsetMs 812745879 diff 6070 timeout 5200"
    ],
    "gpu-reset-required": ["[ 10.0] NVRM: GPU 0000:3b:00.0: GPU requires a reset"],
    "gsp-error": ["[ 10.0] NVRM: _kgspLogRpcTimeout: GSP Timeout while waiting for RPC response"],
    "aer-nonfatal": ["[ 10.0] pcieport 0000:00:01.0: AER: Uncorrected (Non-Fatal) error received: 0000:3b:00.0"],
    "oom-kill": ["[ 9.0] Out of memory: Killed process 4242 (python3) total-vm:1kB"],
    "hung-task": ["[ 1234.5] INFO: task nvidia-smi:4242 blocked for more than 120 seconds."],
    "driver-mismatch": [
        "[ 10.0] NVRM: API mismatch: the client has the version 535.104.05, but this kernel module has the "
        "version 535.54.03."
    ],
}


def test_every_trigger_of_the_table_has_a_sample() -> None:
    assert set(SAMPLES) == set(triggers.BY_NAME)


@pytest.mark.parametrize("name", sorted(SAMPLES))
def test_every_trigger_fires_on_its_line(name: str) -> None:
    judge = LineJudge((name,))
    *before, line = SAMPLES[name]
    for earlier in before:
        judge.fired(earlier)
    assert judge.fired(line) == [name]


def test_the_default_set_is_the_one_the_table_marks() -> None:
    rows = knowledge.read_csv("watch_triggers.csv", required=())
    assert tuple(row["name"] for row in rows if row["default"] == "yes") == triggers.DEFAULT_TRIGGERS
    assert "oom-kill" not in triggers.DEFAULT_TRIGGERS and "xid" in triggers.DEFAULT_TRIGGERS


def test_a_row_that_cannot_be_read_names_the_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(knowledge, "HERE", tmp_path)
    (tmp_path / "watch_triggers.csv").write_text(
        "name,signal,default,description,source\nxid,xid,maybe,any Xid,https://docs.nvidia.com/deploy/xid-errors/\n"
    )
    with pytest.raises(knowledge.KnowledgeError, match="watch_triggers.csv: xid: default must be yes or no"):
        triggers._triggers()
    (tmp_path / "watch_triggers.csv").write_text(
        "name,signal,default,description,source\nxid,,yes,any Xid,https://docs.nvidia.com/deploy/xid-errors/\n"
    )
    with pytest.raises(knowledge.KnowledgeError, match="empty signal"):
        triggers._triggers()
