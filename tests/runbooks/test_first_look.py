"""`nightowl triage first-look --host r1 --host r2 --host r3` on loopback stand-in replicas: each fault
reaches its verdict, names the next runbook, --follow runs it, and the status update is written."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from nightowl.cli.main import main
from nightowl.transports.local import LocalTransport
from tests.runbooks.firstlook_standins import Replica, Window, replicas

pytestmark = pytest.mark.skipif(shutil.which("curl") is None, reason="curl is not installed")
NAMES = ("r1", "r2", "r3")


def healthy() -> dict[str, Replica]:
    return {n: Replica() for n in NAMES}


def triage(specs: dict[str, Replica], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, *extra: str) -> Any:
    """r1..r3 are this machine (curl runs locally), each reaching its own stand-in through base_url."""
    import nightowl.transports as transports

    monkeypatch.setattr(transports, "open_transport", lambda spec, options=None: LocalTransport(spec))
    with replicas(specs):
        base = "{" + ", ".join(f"{n}: {r.url}" for n, r in specs.items()) + "}"
        argv = ["triage", "first-look", *[a for n in specs for a in ("--host", n)]]
        argv += ["--param", f"base_url={base}", "--param", "window_seconds=0", "--out", str(tmp_path)]
        argv += ["--format", "json", *extra]
        result = CliRunner().invoke(main, argv)
    assert result.exit_code in (0, 1, 3), result.output
    document = json.loads(result.output[: result.output.rindex("}") + 1])
    return result, document


def verdict_of(document: dict[str, Any]) -> dict[str, Any]:
    verdicts = {json.dumps(h["verdict"], sort_keys=True) for h in document["hosts"]}
    assert len(verdicts) == 1  # one verdict for the job
    return document["hosts"][0]["verdict"]


def test_all_healthy(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    result, document = triage(healthy(), tmp_path, monkeypatch)
    assert verdict_of(document)["id"] == "all-clear" and result.exit_code == 0
    assert (Path(document["bundle"]) / "status-update.md").exists()


def test_one_replica_down_runs_xid_on_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    specs = healthy()
    specs["r2"].health_status = 503
    result, document = triage(specs, tmp_path, monkeypatch)
    verdict = verdict_of(document)
    assert verdict["id"] == "partial-down" and result.exit_code == 1
    assert "r2: 503" in verdict["summary"] and verdict["next"]["hosts"] == ["r2"]
    assert verdict["next"]["command"] == "nightowl triage xid --host r2"


def test_follow_runs_the_next_runbook_into_the_same_bundle(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    specs = healthy()
    specs["r2"].health_status = 503
    result, document = triage(specs, tmp_path, monkeypatch, "--follow")
    followed = document["followed"]
    assert [f["runbook"] for f in followed] == ["xid"]
    assert [h["host"] for h in followed[0]["hosts"]] == ["r2"]
    assert Path(followed[0]["bundle"]).parent == Path(document["bundle"]) / "next"


def test_restarted_with_another_version_is_drift(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    specs = healthy()
    specs["r3"].version, specs["r3"].restart_at_scrape = "0.6.4", 1
    _, document = triage(specs, tmp_path, monkeypatch)
    verdict = verdict_of(document)
    assert verdict["id"] == "replica-drift" and verdict["action"] == "reconfigure"
    assert "version on r3 is 0.6.4 against 0.6.3, 0.6.3 on the others" in verdict["summary"]
    assert "restarted in or before the window: r3" in verdict["summary"]


def test_baseline_names_drift_of_every_replica(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    specs = healthy()
    for replica in specs.values():
        replica.health_status, replica.version = 503, "0.7.0"
    _, document = triage(specs, tmp_path, monkeypatch, "--param", "baseline={version: 0.6.3}")
    verdict = verdict_of(document)
    assert verdict["id"] == "all-down-after-change" and "against baseline 0.6.3" in verdict["summary"]
    _, document = triage(healthy() | {n: Replica(health_status=503) for n in NAMES}, tmp_path, monkeypatch)
    assert verdict_of(document)["id"] == "all-down"


def test_slow_replica(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    specs = healthy()
    specs["r1"].health_delay = 0.6
    _, document = triage(specs, tmp_path, monkeypatch, "--param", "slow_seconds=0.5")
    verdict = verdict_of(document)
    assert verdict["id"] == "slow-replica" and verdict["next"]["runbook"] == "p99-regression"
    assert verdict["next"]["hosts"] == ["r1"]


def test_traffic_surge(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    specs = healthy()
    for replica in specs.values():
        replica.windows = [Window(), Window(requests=20), Window(requests=70, waiting=25, ttft=0.06)]
    _, document = triage(specs, tmp_path, monkeypatch)
    verdict = verdict_of(document)
    assert verdict["id"] == "traffic-surge" and verdict["action"] == "scale-out"
    assert "210 requests in the last window against 60" in verdict["summary"]


def test_kv_full_with_preemption(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    specs = healthy()
    specs["r2"].windows = [
        Window(),
        Window(kv=0.95, preemptions=4, waiting=6),
        Window(kv=0.98, preemptions=9, waiting=14),
    ]
    _, document = triage(specs, tmp_path, monkeypatch)
    verdict = verdict_of(document)
    assert verdict["id"] == "kv-full" and "r2 KV 98%, 13 preemptions, 14 waiting" in verdict["summary"]


def short_p99_window(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, seconds: int) -> None:
    """The built-in runbooks, with p99-regression's default window (60 s, which --follow keeps: the next
    step passes only metrics_url) cut to ``seconds``. The stand-ins count scrapes, not seconds, so the
    window's length changes no answer; its own tests (tests/llmperf/test_p99.py) are about the window."""
    from nightowl.library import runbooks

    folder = tmp_path / "builtin-runbooks"
    folder.mkdir()
    for name, path in runbooks.builtin_paths().items():
        shutil.copy(path, folder / f"{name}.yaml")
    p99 = folder / "p99-regression.yaml"
    declared = "  window_seconds:\n    default: 60\n"
    assert declared in p99.read_text()
    p99.write_text(p99.read_text().replace(declared, f"  window_seconds:\n    default: {seconds}\n"))
    monkeypatch.setattr(runbooks, "builtin_dir", lambda: folder)


def test_latency_up_with_flat_traffic_follows_into_p99(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    short_p99_window(tmp_path, monkeypatch, 1)
    specs = healthy()
    specs["r3"].windows = [Window(), Window(), Window(itl=0.3)]
    _, document = triage(specs, tmp_path, monkeypatch, "--follow")
    verdict = verdict_of(document)
    assert verdict["id"] == "latency-up-flat-traffic" and verdict["next"]["hosts"] == ["r3"]
    assert "sudden" in verdict["summary"]
    (followed,) = document["followed"]
    assert followed["runbook"] == "p99-regression" and followed["hosts"][0]["host"] == "r3"
    assert followed["hosts"][0]["verdict"] is not None  # its own scrapes reached the stand-in


def test_stream_that_never_ends(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    specs = healthy()
    specs["r1"].stream_done = False
    _, document = triage(specs, tmp_path, monkeypatch)
    assert verdict_of(document)["id"] == "all-clear"  # off by default: no POST was sent
    _, document = triage(specs, tmp_path, monkeypatch, "--param", "stream_probe=true")
    verdict = verdict_of(document)
    assert verdict["id"] == "stream-broken" and "on r1 never ended" in verdict["summary"]


def test_status_update_printed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    specs = healthy()
    specs["r2"].health_status = 503
    result, document = triage(specs, tmp_path, monkeypatch, "--status-update")
    text = (Path(document["bundle"]) / "status-update.md").read_text()
    assert text.strip() in result.output
    assert "Impact: replica down on r2 (3 checked: r1, r2, r3; not implicated: r1, r3)" in text
    # dated by the failing answer's own Date header, with its source (issue 27 item 3)
    assert "Since: at or before " in text and "; source: the first failing answer seen: r2 /health 503" in text
    assert "Next check: run the xid runbook on r2 (exact command in the report)" in text
    assert "nightowl triage xid --host r2" in result.output  # the exact command, in the report
    assert "Next update: ____ (yours to set" in text and "<" not in text


def test_engine_argument_drift_is_named(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """vLLM V1's start-up line "non-default args: {...}" read from each replica's log file."""
    line = "(APIServer pid=1) INFO 10-24 01:21:55 [utils.py:233] non-default args: {args}\n"
    logs = {}
    for name in NAMES:
        seqs = 128 if name == "r3" else 256
        logs[name] = tmp_path / f"{name}.log"
        logs[name].write_text(
            line.format(args=f"{{'model': '/models/q', 'max_num_seqs': {seqs}, 'enforce_eager': True}}")
        )
    files = "engine_log_file={" + ", ".join(f"{n}: {p}" for n, p in logs.items()) + "}"
    _, document = triage(healthy(), tmp_path, monkeypatch, "--param", files)
    verdict = verdict_of(document)
    assert verdict["id"] == "replica-drift"
    assert "engine argument max_num_seqs on r3 is 128 against 256 on the others" in verdict["summary"]
    assert "enforce_eager" not in verdict["summary"]  # the same everywhere: not drift
    _, document = triage(healthy(), tmp_path, monkeypatch, "--param", files, "--param", "baseline={max_num_seqs: 128}")
    summary = verdict_of(document)["summary"]
    assert "engine argument max_num_seqs on r1, r2 is 256, 256 against the baseline 128" in summary


def test_all_clear_says_what_was_not_compared(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _, document = triage(healthy(), tmp_path, monkeypatch)
    summary = verdict_of(document)["summary"]
    assert "Not compared: image on any replica (no container-state: pass container or pod)" in summary
    assert "engine arguments on any replica" in summary
