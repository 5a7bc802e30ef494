"""ssh_config(5) as ssh reads it: first value wins, lists accumulate, Include, the system file, an index."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from nightowl.transports import ssh_config
from nightowl.transports.hostspec import parse_host_spec


def _config(tmp_path: Path, text: str, name: str = "config") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def _lookup(path: Path, alias: str) -> dict:
    return ssh_config.load([path]).lookup(alias)


def test_first_value_wins_across_literal_and_pattern_blocks_in_file_order(tmp_path: Path) -> None:
    path = _config(
        tmp_path,
        "Host gpu-*\n  User fleet\n  Port 2200\n"
        "Host gpu-01\n  User root\n  HostName 10.0.0.1\n"
        "Host *\n  Port 22\n  User nobody\n",
    )
    assert (_lookup(path, "gpu-01")["user"], _lookup(path, "gpu-01")["port"]) == ("fleet", "2200")
    assert _lookup(path, "gpu-01")["hostname"] == "10.0.0.1"
    assert (_lookup(path, "cpu-9")["user"], _lookup(path, "cpu-9")["port"]) == ("nobody", "22")
    assert _lookup(path, "cpu-9")["hostname"] == "cpu-9"


def test_literal_block_before_a_pattern_wins(tmp_path: Path) -> None:
    path = _config(tmp_path, "Host gpu-01 gpu-02\n  User root\nHost gpu-*\n  User fleet\n")
    assert _lookup(path, "GPU-02")["user"] == "root"  # host names match case-insensitively
    assert _lookup(path, "gpu-03")["user"] == "fleet"


def test_negated_patterns_and_question_marks(tmp_path: Path) -> None:
    path = _config(tmp_path, "Host gpu-? !gpu-7\n  User fleet\n")
    assert _lookup(path, "gpu-1")["user"] == "fleet"
    assert "user" not in _lookup(path, "gpu-7")
    assert "user" not in _lookup(path, "gpu-10")


def test_identity_files_accumulate_and_tokens_expand(tmp_path: Path) -> None:
    path = _config(
        tmp_path,
        "Host gpu-01\n  HostName %h.dc1.example\n  IdentityFile ~/.ssh/%h\nHost *\n  IdentityFile ~/.ssh/fleet\n",
    )
    found = _lookup(path, "gpu-01")
    assert found["hostname"] == "gpu-01.dc1.example"
    assert found["identityfile"] == ["~/.ssh/gpu-01.dc1.example", "~/.ssh/fleet"]


def test_include_in_order_and_conditionally_inside_a_host_block(tmp_path: Path) -> None:
    (tmp_path / "conf.d").mkdir()
    _config(tmp_path, "Host gpu-01\n  User from-include\n", "conf.d/10-gpu.conf")
    _config(tmp_path, "User only-for-bastion\n", "bastion.conf")
    path = _config(
        tmp_path,
        f"Include {tmp_path}/conf.d/*.conf\nHost gpu-01\n  User later\n"
        f"Host bastion\n  Include {tmp_path}/bastion.conf\n  Port 2222\n",
    )
    assert _lookup(path, "gpu-01")["user"] == "from-include"
    assert _lookup(path, "bastion")["user"] == "only-for-bastion"
    assert _lookup(path, "bastion")["port"] == "2222"
    assert "user" not in _lookup(path, "other")


def test_match_host_applies_and_other_match_criteria_do_not(tmp_path: Path) -> None:
    path = _config(
        tmp_path, "Match exec true\n  User from-exec\nMatch host gpu-*,cpu-1\n  User matched\nMatch all\n  Port 2\n"
    )
    assert _lookup(path, "cpu-1")["user"] == "matched"
    assert _lookup(path, "cpu-1")["port"] == "2"
    assert "user" not in _lookup(path, "db-1")


def test_system_config_is_read_after_the_users_unless_a_file_is_given(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True)
    _config(home / ".ssh", "Host gpu-01\n  User mine\n")
    system = _config(tmp_path, "Host *\n  User system\n  Port 2022\n", "ssh_config")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setattr(ssh_config, "SYSTEM_CONFIG", system)
    spec = parse_host_spec("gpu-01")
    assert (spec.user, spec.port) == ("mine", 2022)
    given = _config(tmp_path, "Host gpu-01\n  HostName 10.1.1.1\n", "given")
    spec = parse_host_spec("gpu-01", given)
    assert (spec.hostname, spec.user, spec.port) == ("10.1.1.1", None, 22)


def test_a_bad_line_names_its_file_and_line(tmp_path: Path) -> None:
    path = _config(tmp_path, "Host a\n  User root\n  ===\n")
    with pytest.raises(ssh_config.SSHConfigError, match=rf"{path}:3"):
        ssh_config.load([path])
    with pytest.raises(ValueError, match=rf"{path}:3"):
        parse_host_spec("a", path)


def test_include_loop_is_an_error_not_a_hang(tmp_path: Path) -> None:
    path = _config(tmp_path, f"Include {tmp_path}/config\n")
    with pytest.raises(ssh_config.SSHConfigError, match="Include nested"):
        ssh_config.load([path])


def test_agrees_with_paramiko_on_a_mixed_config(tmp_path: Path) -> None:
    paramiko = pytest.importorskip("paramiko")
    lines = ["Host *.internal !bad.internal", "  User internal", "Host bastion", "  HostName 10.0.0.254"]
    for n in range(40):
        lines += [f"Host gpu-{n:02d} gpu-{n:02d}.internal", f"  HostName 10.0.{n // 10}.{n}", f"  Port {2200 + n % 3}"]
        if n % 7 == 0:
            lines += ["Host gpu-1?", "  User teen", "  ProxyJump bastion"]
    lines += ["Host *", "  User default", "  Port 22"]
    path = _config(tmp_path, "\n".join(lines) + "\n")
    theirs = paramiko.SSHConfig.from_path(str(path))
    ours = ssh_config.load([path])
    for alias in ["gpu-00", "gpu-13", "gpu-13.internal", "bad.internal", "x.internal", "bastion", "nope", "gpu-39"]:
        expected = theirs.lookup(alias)
        got = ours.lookup(alias)
        for key in ("hostname", "user", "port", "proxyjump"):
            assert got.get(key) == expected.get(key), (alias, key)


def test_home_and_user_tokens_follow_the_environment_as_it_changes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """%d and %u are remembered per environment, not per process: a changed $HOME or $LOGNAME shows."""
    path = _config(tmp_path, "Host *\n  HostName %n.%x\n  IdentityFile %d/.ssh/%u-%h%%\n  IdentityFile ~/plain\n")
    for home, user in (("/home/alice", "alice"), ("/srv/bob", "bob"), ("/home/alice", "alice")):
        monkeypatch.setenv("HOME", home)
        monkeypatch.setenv("LOGNAME", user)
        found = _lookup(path, "gpu-01")
        assert found["hostname"] == "gpu-01.%x"  # an unknown token stays as written
        assert found["identityfile"] == [f"{home}/.ssh/{user}-gpu-01.%x%", "~/plain"]


def test_the_cache_sees_an_edit_to_an_included_file_and_a_file_an_include_now_matches(tmp_path: Path) -> None:
    """A long-running `nightowl serve` resolves hosts from the cache: an Include'd file changing under it counts."""
    (tmp_path / "conf.d").mkdir()
    included = _config(tmp_path, "Host gpu-01\n  HostName 10.0.0.1\n", "conf.d/10-gpu.conf")
    path = _config(tmp_path, f"Include {tmp_path}/conf.d/*.conf\n")
    first = ssh_config.cached([path])
    assert first.lookup("gpu-01")["hostname"] == "10.0.0.1"
    assert ssh_config.cached([path]) is first  # unchanged: not read again
    included.write_text("Host gpu-01\n  HostName 10.0.0.99\n")
    os.utime(included, ns=(1, 1))  # a new version even where the clock is coarse
    assert ssh_config.cached([path]).lookup("gpu-01")["hostname"] == "10.0.0.99"
    _config(tmp_path, "Host gpu-02\n  HostName 10.0.0.2\n", "conf.d/20-more.conf")
    assert ssh_config.cached([path]).lookup("gpu-02")["hostname"] == "10.0.0.2"
    (tmp_path / "conf.d" / "20-more.conf").unlink()
    assert ssh_config.cached([path]).lookup("gpu-02")["hostname"] == "gpu-02"  # back to its own name


# --- issue 30, item 24: an Include that fans out is bounded ------------------------------------------
def test_an_include_fan_out_is_bounded(tmp_path: Path) -> None:
    import threading

    from nightowl.transports.ssh_config import MAX_CONFIG_READS, SSHConfigError, load

    # Twelve layers of four files, each including the whole next layer: no loop, within the depth
    # limit, and 4^12 (16 million) reads.
    for layer in range(12):
        folder = tmp_path / f"layer{layer}"
        folder.mkdir()
        for i in range(4):
            include = f"Include {tmp_path}/layer{layer + 1}/*.conf\n" if layer < 11 else ""
            (folder / f"{i}.conf").write_text(f"{include}Host h{layer}-{i}\n  User u{i}\n")
    top = tmp_path / "config"
    top.write_text(f"Include {tmp_path}/layer0/*.conf\n")
    outcome: list[BaseException | None] = []

    def read() -> None:
        try:
            load([top])
            outcome.append(None)
        except BaseException as exc:  # noqa: BLE001 - the test reads what happened
            outcome.append(exc)

    worker = threading.Thread(target=read, daemon=True)
    worker.start()
    worker.join(60)  # a watchdog: the unbounded reader would still be reading
    assert not worker.is_alive(), "Include fan-out is unbounded"
    assert isinstance(outcome[0], SSHConfigError) and f"more than {MAX_CONFIG_READS} files" in str(outcome[0])
