"""Absence is not health: no output is "cannot judge" (exit 3), never "clean", "at baseline" or "no regression"."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from click.testing import CliRunner

from nightowl.cli.main import main
from nightowl.collectors import get_collector
from nightowl.engine.runner import RunOptions, collect_on
from nightowl.transports.base import CommandResult
from tests.helpers import ROOT

HOSTS = ROOT / "fixtures" / "hosts"
NCCL = ["--param", "nccl_log=/n.log", "--param", "nccl_tests_file=/t.txt"]


def triage(*args: str) -> tuple[int, dict]:
    result = CliRunner().invoke(main, ["triage", *args, "--format", "json"])
    return result.exit_code, json.loads(result.output) if result.output.startswith("{") else {}


def copy_host(tmp_path: Path, name: str, drop: str | None = None, empty: str | None = None) -> Path:
    host = tmp_path / name
    shutil.copytree(HOSTS / name, host)
    if drop:
        (host / drop).unlink()
    if empty:
        (host / empty).write_text("")
    return host


class FakeHost:
    """A live host whose journal has nothing for this boot and whose dmesg works."""

    host = "box"

    def __init__(self, outputs: dict[str, str]) -> None:
        self.outputs = outputs
        self.ran: list[tuple[str, ...]] = []

    def run(self, argv, timeout, kind=None):  # noqa: ANN001, ANN201
        self.ran.append(tuple(argv))
        return CommandResult(tuple(argv), 0, self.outputs.get(argv[0], ""), "", 0.0, 0.0)


class Keep:
    def record_command(self, host, kind, result, keep_output):  # noqa: ANN001, ANN201
        return None


def test_empty_journal_falls_back_to_dmesg() -> None:
    xid = "[ 10.0] NVRM: Xid (PCI:0000:07:00): 79, pid=1, GPU has fallen off the bus.\n"
    host = FakeHost({"journalctl": "-- No entries --\n", "dmesg": xid})
    run = collect_on(host, get_collector("kernel-log"), Keep(), RunOptions())
    assert [argv[0] for argv in host.ran] == ["journalctl", "dmesg"]
    assert run.status == "ok" and run.facts["fallen_off_bus_gpus"] == ["0000:07:00"]


def test_only_an_empty_journal_is_no_data_not_clean() -> None:
    host = FakeHost({"journalctl": "-- No entries --\n"})
    run = collect_on(host, get_collector("kernel-log"), Keep(), RunOptions())
    assert run.status == "no_data" and run.facts is None and "No entries" in run.reason


def test_healthy_host_without_its_kernel_log_is_cannot_judge(tmp_path: Path) -> None:
    for runbook in ("xid", "node-health"):
        for variant in ({"drop": "kernel-log.out"}, {"empty": "kernel-log.out"}):
            host = copy_host(tmp_path / f"{runbook}-{len(variant)}-{next(iter(variant))}", "healthy-l40s", **variant)
            code, out = triage(runbook, "--replay", str(host), "--out", str(tmp_path / "b"))
            assert code == 3, (runbook, variant, out)
            entry = out["hosts"][0]
            assert entry["verdict"] is None and entry["status"] == "incomplete" and "kernel log" in entry["error"]
        code, out = triage(runbook, "--replay", str(HOSTS / "healthy-l40s"), "--out", str(tmp_path / "b"))
        assert code == 0 and out["hosts"][0]["verdict"]["severity"] == "ok"  # the full recording is healthy


def test_p99_with_an_empty_second_scrape_is_not_no_regression(tmp_path: Path) -> None:
    host = copy_host(tmp_path, "p99-vllm-queue-growth", empty="metrics.2.out")
    code, out = triage("p99-regression", "--replay", str(host), "--out", str(tmp_path / "b"))
    verdict = out["hosts"][0]["verdict"]
    assert code in (1, 3) and (verdict is None or verdict["id"] != "no-regression"), out


def test_nccl_tests_without_rows_is_not_at_baseline(tmp_path: Path) -> None:
    host = copy_host(tmp_path, "nccl-busbw-h100")
    rows = [line for line in (host / "nccl-tests.out").read_text().splitlines() if line.lstrip().startswith("#")]
    (host / "nccl-tests.out").write_text("\n".join(rows) + "\n")
    other = copy_host(tmp_path, "nccl-busbw-low")
    code, out = triage("nccl-hang", "--replay", str(host), "--replay", str(other), *NCCL, "--out", str(tmp_path / "b"))
    assert code == 3 or all(h["verdict"]["id"] != "busbw-at-baseline" for h in out["hosts"]), out


def test_one_rank_without_a_baseline_is_cannot_judge(tmp_path: Path) -> None:
    code, out = triage("nccl-hang", "--replay", str(HOSTS / "nccl-busbw-h100"), *NCCL, "--out", str(tmp_path / "b"))
    assert code == 3, out
    assert out["hosts"][0]["verdict"] is None and "baseline" in out["hosts"][0]["error"]
    code, out = triage(
        "nccl-hang",
        "--replay",
        str(HOSTS / "nccl-busbw-h100"),
        *NCCL,
        "--param",
        "busbw_baseline=350",
        "--out",
        str(tmp_path / "b"),
    )
    assert code == 0 and out["hosts"][0]["verdict"]["id"] == "busbw-at-baseline"
