"""One test per command, through click's runner, on real recorded outputs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from nightowl.cli.main import main
from nightowl.paths import data_dir
from tests.receiver.xid_alert import XID_ALERT, xid_rules

HOSTS = data_dir("fixtures") / "hosts"
CORPUS = data_dir("fixtures") / "corpus"


def invoke(*args: str, input: str | None = None):
    return CliRunner().invoke(main, list(args), input=input, catch_exceptions=False)


def test_version() -> None:
    result = invoke("--version")
    assert result.exit_code == 0 and "nightowl" in result.output


def test_demo_text_and_json(tmp_path: Path) -> None:
    result = invoke("demo", "--out", str(tmp_path))
    assert result.exit_code == 1  # a host needs action
    assert "gpu-fell-off-bus" in result.output and "first action: reboot-node" in result.output
    data = json.loads(invoke("demo", "--out", str(tmp_path), "--format", "json").output)
    host = data["hosts"][0]
    assert host["verdict"]["action"] == "reboot-node" and host["status"] == "ok"
    assert host["path"] == ["collect", "gpu-visible", "gpu-fell-off-bus"]
    bundle = Path(data["bundle"])
    for name in ("manifest.json", "trace.json", "verdicts.json", "postmortem.md", "runbook.yaml"):
        assert (bundle / name).is_file(), name
    assert (bundle / "hosts" / "xid79-fallen-off-bus" / "kernel-log.out").is_file()


def test_parse_kernel_log_from_stdin() -> None:
    text = (HOSTS / "xid79-fallen-off-bus" / "kernel-log.out").read_text()
    result = invoke("parse", "kernel-log", "-", input=text)
    data = json.loads(result.output)
    assert data["kind"] == "kernel-log"
    assert [e["code"] for e in data["events"] if e["kind"] == "xid"] == [79]


def test_parse_nvidia_smi_file() -> None:
    result = invoke("parse", "nvidia-smi", str(CORPUS / "gpu" / "nvsmi-unable-device-handle-unknown-error.txt"))
    data = json.loads(result.output)
    assert result.exit_code == 0 and data["errors"][0]["pci"] == "0000:0b:00"


def test_parse_garbage_is_json_with_warnings() -> None:
    result = invoke("parse", "nvidia-smi", "-", input="\x00\x01 garbage <gpu>\n")
    assert result.exit_code == 0
    assert json.loads(result.output)["kind"] == "nvidia-smi"


def test_parse_unknown_kind_and_unreadable_file(tmp_path: Path) -> None:
    assert invoke("parse", "nope", "-", input="").exit_code == 2
    assert CliRunner().invoke(main, ["parse", "kernel-log", str(tmp_path / "missing")]).exit_code == 2


def test_xid_command_lines() -> None:
    text = (CORPUS / "gpu" / "xid48-xid64-dbe-rminitadapter-syslog-gpuop1146.txt").read_text()
    result = invoke("xid", input=text)
    lines = [line for line in result.output.splitlines() if " XID " in line]
    assert len(lines) == 2
    assert "0000:07:00" in lines[0] and "48" in lines[0]
    assert "64" in lines[1]
    data = json.loads(invoke("xid", "--format", "json", input=text).output)
    assert [e["code"] for e in data["events"] if e["kind"] == "xid"] == [48, 64]
    # the other GPU's RmInitAdapter failure is listed too, judged by its line (kernel_patterns.csv)
    init = [e for e in data["events"] if e["label"] == "rm_init_adapter_failed"]
    assert init and {e["pci"] for e in init} == {"0000:0a:00"} and {e["action"] for e in init} == {"reboot-node"}


def test_xid_command_lists_hung_tasks_after_xid45_as_a_wedged_driver() -> None:
    text = (
        data_dir("fixtures") / "corpus-extra" / "kernel-log" / "xid45-then-hung-task-120s-dmesg-ctime-gpud-pr117.txt"
    ).read_text()
    rows = json.loads(invoke("xid", "--format", "json", input=text).output)["events"]
    hung = [r for r in rows if r["kind"] == "hung_task"]
    assert len(hung) == 1 and hung[0]["action"] == "reboot-node" and "wedged" in hung[0]["first_step"]


def test_xid_unknown_code_says_look_up() -> None:
    line = "[ 10.0] NVRM: Xid (PCI:0000:3b:00): 999, pid=1, name=x, something new\n"
    result = invoke("xid", "--format", "json", input=line)
    event = json.loads(result.output)["events"][0]
    assert event["action"] == "escalate"
    assert "look" in event["first_step"].lower()


def test_triage_replay_several_hosts_and_exit_codes(tmp_path: Path) -> None:
    def triage_xid(*hosts: str, form: tuple[str, ...] = ("--format", "json")):  # noqa: ANN202
        replays = [arg for host in hosts for arg in ("--replay", str(HOSTS / host))]
        return invoke("triage", "xid", *replays, "--out", str(tmp_path), *form)

    result = triage_xid("healthy-l40s")
    assert result.exit_code == 0
    assert json.loads(result.output)["hosts"][0]["verdict"]["id"] == "healthy"
    result = triage_xid("healthy-l40s", "unreachable-node")
    assert result.exit_code == 3
    hosts = json.loads(result.output)["hosts"]
    assert [h["status"] for h in hosts] == ["ok", "unreachable"]
    result = triage_xid("healthy-l40s", "xid48-xid64-dbe", form=())
    assert result.exit_code == 1


def test_triage_replay_of_a_bundle(tmp_path: Path) -> None:
    first = json.loads(invoke("demo", "--out", str(tmp_path), "--format", "json").output)
    again = json.loads(
        invoke("triage", "xid", "--replay", first["bundle"], "--out", str(tmp_path), "--format", "json").output
    )
    assert again["hosts"][0]["verdict"]["id"] == "gpu-fell-off-bus"
    assert again["hosts"][0]["host"] == "xid79-fallen-off-bus"


def test_a_bundles_unreachable_host_replays_unreachable(tmp_path: Path) -> None:
    """An unreachable host has no folder in the bundle: its verdicts.json entry is what replays it."""
    args = ["triage", "xid", "--replay", str(HOSTS / "healthy-l40s"), "--replay", str(HOSTS / "unreachable-node")]
    first = json.loads(invoke(*args, "--out", str(tmp_path), "--format", "json").output)
    bundle = Path(first["bundle"])
    assert not (bundle / "hosts" / "unreachable-node").exists()
    replayed = invoke("triage", "xid", "--replay", str(bundle), "--out", str(tmp_path), "--format", "json")
    assert replayed.exit_code == 3
    hosts = {h["host"]: h for h in json.loads(replayed.output)["hosts"]}
    gone = next(h for h in first["hosts"] if h["status"] == "unreachable")
    assert hosts["unreachable-node"]["status"] == "unreachable"
    assert hosts["unreachable-node"]["error"] == gone["error"]
    assert hosts["healthy-l40s"]["status"] == "ok"
    # Unreadable: an error, never a replay that quietly drops the host and says healthy.
    (bundle / "verdicts.json").write_text('{"hosts": [')
    broken = invoke("triage", "xid", "--replay", str(bundle), "--out", str(tmp_path), "--format", "json")
    assert broken.exit_code == 2
    assert "verdicts.json" in broken.output


def test_triage_param_and_usage_errors(tmp_path: Path) -> None:
    result = invoke(
        "triage",
        "xid",
        "--replay",
        str(HOSTS / "healthy-l40s"),
        "--param",
        "expected_gpus=8",
        "--out",
        str(tmp_path),
        "--format",
        "json",
    )
    assert json.loads(result.output)["hosts"][0]["verdict"]["id"] == "gpu-missing"
    assert invoke("triage", "xid", "--out", str(tmp_path)).exit_code == 2
    assert invoke("triage", "nosuch", "--host", "local").exit_code == 2
    assert (
        invoke(
            "triage", "xid", "--replay", str(HOSTS / "healthy-l40s"), "--param", "bogus=1", "--out", str(tmp_path)
        ).exit_code
        == 2
    )


def test_triage_invalid_runbook_names_file_and_line(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text(
        "id: x\ntitle: t\nentry: a\nnodes:\n  a:\n    verdict: {id: v, severity: ok, action: nap, summary: s}\n"
    )
    result = CliRunner().invoke(main, ["triage", str(bad), "--host", "local"])
    assert result.exit_code == 2
    assert f"{bad}:6" in result.output


def test_triage_local_host_never_hangs(tmp_path: Path) -> None:
    """On this GPU-less machine the collectors fail; the run still ends with a bundle."""
    result = invoke("triage", "xid", "--host", "local", "--out", str(tmp_path), "--format", "json")
    assert result.exit_code in (0, 1, 3)
    data = json.loads(result.output)
    assert Path(data["bundle"]).is_dir()


def test_plan_connects_to_nothing() -> None:
    result = invoke("plan", "xid", "--host", "ssh://root@gpu-17:22", "--format", "json")
    steps = json.loads(result.output)["hosts"][0]["steps"]
    assert ["nvidia-smi", "-q", "-x"] in [argv for s in steps for argv in s["commands"]]
    text = invoke("plan", "xid", "--host", "gpu-17").output
    assert text.startswith("gpu-17:\n") and "journalctl -k" in text
    assert "flowchart TD" not in text  # the graph only on request
    assert "xid-judgement: runs no command; derived from kernel_log" in text
    with_graph = invoke("plan", "xid", "--host", "gpu-17", "--graph").output
    assert with_graph.startswith(text) and "flowchart TD" in with_graph[len(text) :]


def test_postmortem_and_verify(tmp_path: Path) -> None:
    bundle = Path(json.loads(invoke("demo", "--out", str(tmp_path), "--format", "json").output)["bundle"])
    text = invoke("postmortem", str(bundle)).output
    assert "## Decision path" in text and "gpu-fell-off-bus" in text
    manifest = json.loads((bundle / "manifest.json").read_text())
    digests = {f["path"]: f["sha256"] for f in manifest["files"]}
    assert digests["hosts/xid79-fallen-off-bus/kernel-log.out"] in text
    assert invoke("postmortem", "--verify", str(bundle)).exit_code == 0
    (bundle / "hosts" / "xid79-fallen-off-bus" / "kernel-log.out").write_text("tampered\n")
    (bundle / "hosts" / "xid79-fallen-off-bus" / "nvidia-smi.out").unlink()
    result = invoke("postmortem", "--verify", str(bundle))
    assert result.exit_code == 1
    assert "changed: hosts/xid79-fallen-off-bus/kernel-log.out" in result.output
    assert "missing: hosts/xid79-fallen-off-bus/nvidia-smi.out" in result.output
    out = tmp_path / "draft.md"
    assert invoke("postmortem", str(bundle), "-o", str(out)).exit_code == 0 and out.read_text().startswith("#")


def test_runbook_commands(tmp_path: Path) -> None:
    assert "xid" in invoke("runbook", "list").output
    assert "entry:" in invoke("runbook", "show", "xid").output
    assert invoke("runbook", "validate").exit_code == 0
    broken = tmp_path / "cycle.yaml"
    broken.write_text(
        "id: c\ntitle: c\nentry: a\nnodes:\n  a:\n    collect: [kernel-log]\n    next: b\n"
        "  b:\n    collect: [nvidia-smi]\n    next: a\n"
    )
    result = CliRunner().invoke(main, ["runbook", "validate", str(broken)])
    assert result.exit_code == 2 and "cycle" in result.output and str(broken) in result.output
    graph = invoke("runbook", "graph", "xid").output
    assert graph.startswith("flowchart TD") and "n_gpu_visible" in graph


def test_runbook_graph_marks_bundle_path(tmp_path: Path) -> None:
    bundle = json.loads(invoke("demo", "--out", str(tmp_path), "--format", "json").output)["bundle"]
    graph = invoke("runbook", "graph", "xid", "--path", bundle).output
    assert "class n_collect,n_gpu_visible,n_gpu_fell_off_bus taken" in graph
    assert "linkStyle" in graph


def test_runbook_test_rehearses(tmp_path: Path) -> None:
    result = invoke("runbook", "test", "xid")
    assert result.exit_code == 0 and " 0 failed" in result.output


def test_interrupted_run_keeps_a_partial_bundle(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from nightowl.engine import runner

    def interrupt(self):  # noqa: ANN001, ANN202
        raise KeyboardInterrupt

    monkeypatch.setattr(runner.HostRunner, "execute", interrupt)
    result = CliRunner().invoke(main, ["demo", "--out", str(tmp_path)])
    assert result.exit_code == 130
    bundles = [p for p in tmp_path.iterdir() if not p.name.startswith(".")]
    assert len(bundles) == 1
    assert json.loads((bundles[0] / "manifest.json").read_text())["partial"] is True


def test_bundled_data_ships_in_the_wheel(tmp_path: Path) -> None:
    """`pip install .` (not only -e) carries runbooks, templates and fixtures."""
    import importlib.util
    import subprocess
    import sys

    if importlib.util.find_spec("hatchling") is None:
        pytest.skip("hatchling is not installed (pip install -e '.[test]')")
    root = Path(__file__).resolve().parents[2]
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "-q",
            "-w",
            str(tmp_path),
            str(root),
        ],
        capture_output=True,
        text=True,
    )
    assert out.returncode == 0, out.stderr[-2000:]  # a broken build is a failure, not a skip
    import zipfile

    names = zipfile.ZipFile(next(tmp_path.glob("*.whl"))).namelist()
    assert "nightowl/_data/runbooks/xid.yaml" in names
    assert "nightowl/_data/templates/postmortem.md.j2" in names
    assert "nightowl/_data/fixtures/hosts/xid79-fallen-off-bus/kernel-log.out" in names


def test_triage_alert_payload(tmp_path: Path) -> None:
    config, payload = xid_rules(tmp_path), str(XID_ALERT)
    result = invoke("triage", "--alert", payload, "--config", str(config), "--out", str(tmp_path), "--format", "json")
    captures = json.loads(result.output)["captures"]
    assert [c["status"] for c in captures] == ["captured", "captured", "ignored"]
    assert [c["verdict"]["id"] for c in captures[:2]] == ["gpu-fell-off-bus", "gpu-failed-to-initialise"]
    assert result.exit_code == 1
    manifest = json.loads((Path(captures[0]["bundle"]) / "manifest.json").read_text())
    assert manifest["alert"]["name"] == "GpuXidErrors"
    assert invoke("triage", "--alert", payload, "--out", str(tmp_path)).exit_code == 2  # no --config
    config.write_text(config.read_text() + f"out: {tmp_path / 'from-config'}\n")
    result = invoke("triage", "--alert", payload, "--config", str(config), "--format", "json")
    bundle = Path(json.loads(result.output)["captures"][0]["bundle"])
    assert bundle.parent == tmp_path / "from-config"  # without --out, the rules file's `out` decides


def test_local_host_spec_in_any_case_runs_locally(tmp_path: Path) -> None:
    result = invoke("triage", "xid", "--host", "LOCAL", "--out", str(tmp_path), "--format", "json")
    assert json.loads(result.output)["hosts"][0]["status"] != "unreachable"


@pytest.mark.parametrize("flag", ["--status-update", "--follow"])
def test_verbose_reaches_the_follow_and_status_update_path(tmp_path: Path, flag: str) -> None:
    """-v prints the path and the sources there too, as it does on a plain triage."""
    argv = ["triage", "xid", "--replay", str(HOSTS / "xid13-app-fault"), flag, "--out", str(tmp_path)]
    plain = CliRunner().invoke(main, argv)
    verbose = CliRunner().invoke(main, [*argv, "-v"])
    assert plain.exit_code == verbose.exit_code == 1, verbose.output
    assert "path: collect -> gpu-visible" not in plain.output and "(-v for the path" in plain.output
    assert "path: collect -> gpu-visible" in verbose.output
    assert "source of kernel_log.xids_by_gpu: hosts/xid13-app-fault/kernel-log.out" in verbose.output
