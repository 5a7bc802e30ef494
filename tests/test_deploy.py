"""The deployment files: Kubernetes manifests against the offline schemas, the Slurm wrapper's logic."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
import yaml

DEPLOY = Path(__file__).resolve().parent.parent / "deploy"


def test_kubernetes_manifests_validate_offline() -> None:
    kubernetes_validate = pytest.importorskip("kubernetes_validate")
    documents = []
    for path in sorted((DEPLOY / "kubernetes").glob("*.yaml")):
        documents += [d for d in yaml.safe_load_all(path.read_text()) if d]
    assert {d["kind"] for d in documents} >= {"DaemonSet", "ServiceAccount"}
    for document in documents:
        kubernetes_validate.validate(document, "1.30.0", strict=True)


def test_daemonset_is_read_only_and_has_no_api_token() -> None:
    docs = list(yaml.safe_load_all((DEPLOY / "kubernetes" / "nightowl-node-health.yaml").read_text()))
    daemonset = next(d for d in docs if d["kind"] == "DaemonSet")
    pod = daemonset["spec"]["template"]["spec"]
    assert pod["automountServiceAccountToken"] is False
    container = pod["containers"][0]
    assert "check" in " ".join(container["args"])
    mounts = {m["name"]: m for m in container["volumeMounts"]}
    assert mounts["journal"]["readOnly"] is True
    assert container["securityContext"]["allowPrivilegeEscalation"] is False


def _fake_bin(tmp_path: Path, verdict: str, action: str, rc: int) -> Path:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    payload = {
        "runbook": "node-health",
        "hosts": [{"host": "local", "status": "ok", "verdict": {"id": verdict, "action": action}, "path": []}],
    }
    (bin_dir / "nightowl").write_text(f"#!/bin/sh\ncat <<'EOF'\n{json.dumps(payload)}\nEOF\nexit {rc}\n")
    (bin_dir / "scontrol").write_text(f'#!/bin/sh\necho "$@" > {tmp_path / "scontrol.args"}\n')
    for tool in bin_dir.iterdir():
        tool.chmod(0o755)
    return bin_dir


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
    bin_dir = _fake_bin(tmp_path, verdict, action, rc)
    env = {
        **os.environ,
        "PATH": f"{bin_dir}:{os.environ['PATH']}",
        "SLURMD_NODENAME": "gpu-17",
        "NIGHTOWL_OUT": str(tmp_path / "b"),
        "NIGHTOWL_TEXTFILE": str(tmp_path / "t.prom"),
    }
    result = subprocess.run(["bash", str(DEPLOY / "slurm" / "nightowl-healthcheck.sh")], env=env, timeout=30)
    assert result.returncode == 0
    args = tmp_path / "scontrol.args"
    assert args.exists() is drains
    if drains:
        assert args.read_text().strip() == f"update NodeName=gpu-17 State=DRAIN Reason=nightowl: {verdict} ({action})"
