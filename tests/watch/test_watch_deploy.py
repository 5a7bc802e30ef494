"""The deployments of `nightowl watch`: the DaemonSet's watch container and the systemd units, checked
offline (the manifests' schema validation is tests/deploy/test_deploy.py's; `systemd-analyze verify` when present)."""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from nightowl.cli.watch_cmd import watch

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"
SYSTEMD = DEPLOY / "systemd"


def pod() -> dict[str, Any]:
    docs = [d for d in yaml.safe_load_all((DEPLOY / "kubernetes" / "nightowl-node-health.yaml").read_text()) if d]
    return next(d for d in docs if d["kind"] == "DaemonSet")["spec"]["template"]["spec"]


def container(name: str) -> dict[str, Any]:
    return next(c for c in pod()["containers"] if c["name"] == name)


def option_value(argv: list[str], option: str) -> str:
    return argv[argv.index(option) + 1]


def assert_known_watch_options(argv: list[str]) -> None:
    known = {opt for param in watch.params for opt in getattr(param, "opts", ())}
    unknown = [arg for arg in argv if arg.startswith("--") and arg.split("=")[0] not in known]
    assert not unknown, unknown


def test_the_daemonset_runs_watch_beside_the_hourly_check() -> None:
    check, follower = container("nightowl"), container("watch")
    assert "nightowl check" in check["args"][0]  # the hourly full check stays
    argv = follower["command"]
    assert argv[:2] == ["nightowl", "watch"]
    assert_known_watch_options(argv)
    assert float(option_value(argv, "--grace")) < pod()["terminationGracePeriodSeconds"]
    # its own textfile: two writers of one file would overwrite each other's series
    assert option_value(argv, "--textfile") != "/host/textfile/nightowl.prom"
    mounts = {m["name"]: m for m in follower["volumeMounts"]}
    assert mounts["kmsg"]["readOnly"] is True
    state = option_value(argv, "--state-dir")
    volumes = {v["name"]: v for v in pod()["volumes"]}
    (state_mount,) = [m for m in follower["volumeMounts"] if m["mountPath"] == state]
    assert "hostPath" in volumes[state_mount["name"]], "the position must outlive the pod"
    assert follower["securityContext"]["capabilities"] == {"drop": ["ALL"], "add": ["SYSLOG"]}
    assert follower["securityContext"]["readOnlyRootFilesystem"] is True


def test_the_liveness_probe_reads_the_followers_health_file(tmp_path: Path) -> None:
    follower = container("watch")
    health = option_value(follower["command"], "--health-file")
    probe = follower["livenessProbe"]["exec"]["command"]
    assert health in probe[-1]
    script = probe[-1].replace(health, str(tmp_path / "health.json"))
    fresh = tmp_path / "health.json"

    def passes() -> bool:
        return subprocess.run([*probe[:-1], script], timeout=30).returncode == 0

    assert not passes()  # no health file: not alive
    fresh.write_text("{}")
    assert passes()
    stale = time.time() - 120  # the follower stopped rewriting it two minutes ago
    os.utime(fresh, (stale, stale))
    assert not passes()


def unit(name: str) -> dict[str, list[str]]:
    """The settings of a unit file, continuation lines joined (systemd.syntax(7))."""
    settings: dict[str, list[str]] = {}
    text = (SYSTEMD / name).read_text().replace("\\\n", " ")
    for line in text.splitlines():
        if "=" in line and not line.startswith(("#", ";", "[")):
            key, _, value = line.partition("=")
            settings.setdefault(key.strip(), []).append(value.strip())
    return settings


def test_the_systemd_watch_unit_runs_watch_hardened_for_a_read_only_service() -> None:
    service = unit("nightowl-watch.service")
    argv = shlex.split(service["ExecStart"][0])
    assert argv[1] == "watch"
    assert_known_watch_options(argv)
    assert float(option_value(argv, "--grace")) < float(service["TimeoutStopSec"][0])
    assert "143" in service["SuccessExitStatus"][0]
    for setting, value in {
        "NoNewPrivileges": "yes",
        "ProtectSystem": "strict",
        "ProtectHome": "yes",
        "PrivateTmp": "yes",
        "CapabilityBoundingSet": "CAP_SYSLOG",
        "ProtectKernelModules": "yes",
        "RestrictSUIDSGID": "yes",
        "MemoryDenyWriteExecute": "yes",
    }.items():
        assert service[setting] == [value], setting
    assert option_value(argv, "--state-dir").startswith("/var/lib/nightowl")  # StateDirectory=, writable
    assert "nightowl" in service["StateDirectory"][0]


def test_the_check_timer_runs_the_check_hourly() -> None:
    timer = unit("nightowl-check.timer")
    assert timer["OnUnitActiveSec"] == ["1h"]
    check = unit("nightowl-check.service")
    assert shlex.split(check["ExecStart"][0])[1] == "check"
    assert check["Type"] == ["oneshot"] and "1" in check["SuccessExitStatus"][0].split()


@pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="systemd-analyze is not installed")
def test_systemd_analyze_verifies_the_units(tmp_path: Path) -> None:
    nightowl = Path(sys.executable).parent / "nightowl"
    for path in SYSTEMD.iterdir():  # verify wants the executable to exist: point it at this checkout's
        (tmp_path / path.name).write_text(path.read_text().replace("/usr/local/bin/nightowl", str(nightowl)))
    units = sorted(str(p) for p in tmp_path.iterdir())
    result = subprocess.run(["systemd-analyze", "verify", *units], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert "nightowl" not in result.stderr, result.stderr  # no warning about our units


def test_the_hourly_checks_keep_their_runbook_cache_where_they_can_write() -> None:
    """A read-only root filesystem (the DaemonSet) or ProtectHome= (the systemd unit) hides ~/.cache, and
    then every check validates its runbook again (docs/reference.md#the-runbook-cache): the cold run."""
    check = container("nightowl")
    assert check["securityContext"]["readOnlyRootFilesystem"] is True
    cache = {e["name"]: e.get("value") for e in check["env"]}["NIGHTOWL_CACHE_DIR"]
    volumes = {v["name"]: v for v in pod()["volumes"]}
    (mount,) = [m for m in check["volumeMounts"] if cache.startswith(m["mountPath"].rstrip("/") + "/")]
    assert not mount.get("readOnly") and "emptyDir" in volumes[mount["name"]]
    assert "medium" not in volumes[mount["name"]]["emptyDir"], "an entry is ~0.5 MB: not the 1 MiB tmpfs"
    service = unit("nightowl-check.service")
    assert service["ProtectHome"] == ["yes"]
    (folder,) = service["CacheDirectory"]
    assert service["Environment"] == [f"NIGHTOWL_CACHE_DIR=/var/cache/{folder}"]
