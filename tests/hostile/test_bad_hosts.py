"""Issue 14 item 15: one bad host name is that host's `unreachable`, in triage and in job runs; the
other hosts' evidence and verdicts are kept."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from nightowl.cli.main import main as cli
from nightowl.paths import data_dir
from nightowl.transports.base import TransportError
from nightowl.transports.hostspec import HostSpec, parse_host_spec
from nightowl.transports.ssh import SSHOptions, SSHTransport

HOSTS = data_dir("fixtures") / "hosts"
BAD = ["gpu-17..corp", ".", "a" * 300, "ssh://root@gpu-17..corp:22", "b." + "c" * 64 + ".corp"]


@pytest.mark.parametrize("spec", BAD, ids=lambda s: s[:20])
def test_bad_host_names_are_refused_when_parsed(spec: str) -> None:
    with pytest.raises(ValueError, match="invalid host name"):
        parse_host_spec(spec)


def test_a_name_the_resolver_cannot_encode_is_unreachable_not_a_crash() -> None:
    transport = SSHTransport(HostSpec(name="bad", hostname="gpu-17..corp"), SSHOptions())
    with pytest.raises(TransportError, match="dns"):
        transport.connect()


def test_triage_keeps_the_good_host_when_others_are_bad(tmp_path: Path) -> None:
    args = ["triage", "xid", "--replay", str(HOSTS / "xid79-fallen-off-bus"), "--format", "json"]
    for spec in BAD:
        args += ["--host", spec]
    result = CliRunner().invoke(cli, [*args, "--out", str(tmp_path)])
    assert result.exception is None or isinstance(result.exception, SystemExit), result.output
    hosts = {h["host"]: h for h in json.loads(result.output)["hosts"]}
    assert hosts["xid79-fallen-off-bus"]["verdict"]["id"] == "gpu-fell-off-bus"
    for spec in BAD:
        assert hosts[spec]["status"] == "unreachable" and "invalid host name" in hosts[spec]["error"]
    assert result.exit_code == 1  # the Xid 79 host needs action


def test_a_job_run_keeps_its_members_when_one_is_bad(tmp_path: Path) -> None:
    args = ["triage", "nccl-hang", "--format", "json", "--out", str(tmp_path)]
    args += ["--replay", str(HOSTS / "nccl-xid-a"), "--replay", str(HOSTS / "nccl-xid-b"), "--host", "gpu-17..corp"]
    result = CliRunner().invoke(cli, args)
    assert result.exception is None or isinstance(result.exception, SystemExit), result.output
    hosts = {h["host"]: h for h in json.loads(result.output)["hosts"]}
    assert hosts["gpu-17..corp"]["status"] == "unreachable"
    assert {"nccl-xid-a", "nccl-xid-b"} <= set(hosts)
