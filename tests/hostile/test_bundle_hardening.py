"""Issue 14 items 5, 8, 17 and 18: replay reads regular files inside the folder only, capped; bundles are
private; hosts that collide stay apart; --verify covers the manifest; a corrupt manifest is no traceback."""

from __future__ import annotations

import json
import os
import shutil
import stat
from pathlib import Path

import pytest
from click.testing import CliRunner

from nightowl.cli.bundles_cmd import bundle_rows
from nightowl.cli.main import main as cli
from nightowl.engine.bundle_verify import verify_bundle
from nightowl.engine.layout import host_dirname, host_from_dirname
from nightowl.paths import data_dir
from nightowl.transports.replay import ReplayTransport
from tests.hostile.watchdog import watchdog
from tests.postmortem.bundles import make_bundle

HOSTS = data_dir("fixtures") / "hosts"


def _recorded(tmp_path: Path, name: str = "gpu-01") -> Path:
    folder = tmp_path / name
    shutil.copytree(HOSTS / "healthy-l40s", folder)
    return folder


def test_replay_refuses_a_link_that_leaves_the_folder(tmp_path: Path) -> None:
    secret = tmp_path / "shadow"
    secret.write_text("root:$6$hash:19000::::::\n")
    folder = _recorded(tmp_path)
    (folder / "kernel-log.out").unlink(missing_ok=True)
    (folder / "kernel-log.out").symlink_to(secret)
    result = ReplayTransport(folder).run(["dmesg"], 5, kind="kernel-log")
    assert result.rc is None and "leaves the recorded folder" in (result.error or "")
    assert "root:" not in result.stdout


def test_replay_follows_a_link_inside_the_folder(tmp_path: Path) -> None:
    folder = _recorded(tmp_path)
    (folder / "saved.txt").write_text("Xid 79\n")
    (folder / "kernel-log.out").unlink(missing_ok=True)
    (folder / "kernel-log.out").symlink_to("saved.txt")
    assert ReplayTransport(folder).run(["dmesg"], 5, kind="kernel-log").stdout == "Xid 79\n"


def test_replay_refuses_a_fifo_and_a_device_without_hanging(tmp_path: Path) -> None:
    folder = _recorded(tmp_path)
    (folder / "kernel-log.out").unlink(missing_ok=True)
    os.mkfifo(folder / "kernel-log.out")
    (folder / "metrics.out").unlink(missing_ok=True)
    (folder / "metrics.out").symlink_to("/dev/zero")
    replay = ReplayTransport(folder)
    with watchdog(20):
        fifo = replay.run(["dmesg"], 5, kind="kernel-log")
        zero = replay.run(["curl"], 5, kind="metrics")
    assert "not a regular file" in (fifo.error or "")
    assert zero.rc is None and zero.error


def test_replay_caps_a_large_file_like_a_live_command(tmp_path: Path) -> None:
    folder = _recorded(tmp_path)
    (folder / "kernel-log.out").write_bytes(b"x" * 5000)
    result = ReplayTransport(folder, output_cap_bytes=1000).run(["dmesg"], 5, kind="kernel-log")
    assert len(result.stdout) == 1000 and result.stdout_truncated_bytes == 4000


def test_every_bundle_file_is_0600_and_every_folder_0700(tmp_path: Path) -> None:
    previous = os.umask(0o022)
    try:
        bundle = make_bundle(tmp_path, ["xid79-fallen-off-bus", "healthy-l40s"])
    finally:
        os.umask(previous)
    paths = [bundle, *bundle.rglob("*")]
    assert any(p.is_file() for p in paths)
    for path in paths:
        mode = stat.S_IMODE(path.stat().st_mode)
        assert mode == (0o700 if path.is_dir() else 0o600), f"{path}: {oct(mode)}"


@pytest.mark.parametrize("host", ["gpu 1", "gpu_1", "gpu%1", ".", "..", ".hidden", "ssh://root@gpu-01:22", "ü-1"])
def test_host_folder_names_are_reversible(host: str) -> None:
    name = host_dirname(host)
    assert "/" not in name and name not in (".", "..") and not name.startswith(".")
    assert host_from_dirname(name) == host


def test_host_folder_names_are_unique_and_short() -> None:
    assert host_dirname("gpu 1") != host_dirname("gpu_1")
    long_a, long_b = "a" * 300, "a" * 299 + "b"
    assert len(host_dirname(long_a)) <= 200 and host_dirname(long_a) != host_dirname(long_b)


def test_two_replay_folders_with_the_same_name_are_two_hosts(tmp_path: Path) -> None:
    sick = tmp_path / "a" / "gpu-01"
    healthy = tmp_path / "b" / "gpu-01"
    shutil.copytree(HOSTS / "xid79-fallen-off-bus", sick)
    shutil.copytree(HOSTS / "healthy-l40s", healthy)
    out = tmp_path / "out"
    args = ["triage", "xid", "--replay", str(healthy), "--replay", str(sick), "--format", "json", "--out", str(out)]
    result = CliRunner().invoke(cli, args)
    hosts = json.loads(result.output)["hosts"]
    assert len(hosts) == 2
    verdicts = {h["verdict"]["id"] for h in hosts if h.get("verdict")}
    assert len(verdicts) == 2, verdicts  # the Xid 79 host did not vanish behind the healthy one
    assert result.exit_code != 0


def test_verify_covers_the_manifest_itself(tmp_path: Path) -> None:
    bundle = make_bundle(tmp_path, ["xid79-fallen-off-bus"])
    assert verify_bundle(bundle) == []
    manifest = json.loads((bundle / "manifest.json").read_text())
    manifest["partial"] = True
    (bundle / "manifest.json").write_text(json.dumps(manifest))
    assert any("changed: manifest.json" in p for p in verify_bundle(bundle))


def test_verify_sees_a_file_deleted_and_removed_from_the_file_list(tmp_path: Path) -> None:
    bundle = make_bundle(tmp_path, ["xid79-fallen-off-bus"])
    manifest = json.loads((bundle / "manifest.json").read_text())
    victim = next(c["file"] for c in manifest["commands"] if c.get("file"))
    (bundle / victim).unlink()
    manifest["files"] = [f for f in manifest["files"] if f["path"] != victim]
    (bundle / "manifest.json").write_text(json.dumps(manifest))
    problems = verify_bundle(bundle)
    assert any(victim in p and p.startswith("missing") for p in problems), problems


@pytest.mark.parametrize("content", ["{not json", "[1, 2]", '{"files": [{"nopath": 1}]}', '{"files": 7}'])
def test_a_corrupt_manifest_is_a_clear_error(tmp_path: Path, content: str) -> None:
    bundle = make_bundle(tmp_path, ["xid79-fallen-off-bus"])
    (bundle / "manifest.json").write_text(content)
    result = CliRunner().invoke(cli, ["postmortem", "--verify", str(bundle)])
    assert result.exit_code == 1 and result.exception is None or isinstance(result.exception, SystemExit)
    assert "manifest.json" in result.output
    listed = CliRunner().invoke(cli, ["bundles", "--out", str(tmp_path)])
    assert listed.exit_code == 0, listed.output
    assert bundle.name in listed.output
    assert [r["run_id"] for r in bundle_rows(tmp_path)] == [bundle.name]
