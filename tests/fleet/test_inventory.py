"""Inventories: nightowl YAML, Ansible INI and YAML as they are, errors with file:line, --limit."""

from __future__ import annotations

from pathlib import Path

import pytest

from nightowl.fleet.inventory import InventoryError, expand_host_range, limit, load_inventory
from nightowl.transports.hostspec import HostSpec
from tests.helpers import ROOT

INVENTORIES = ROOT / "fixtures" / "inventory"


@pytest.fixture
def empty_config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("HOME", str(tmp_path))
    path = tmp_path / "ssh_config"
    path.write_text("")
    return path


def load(name: str, ssh_config: Path) -> dict[str, HostSpec]:
    return {h.name: h for h in load_inventory(INVENTORIES / name, ssh_config)}


def summary(host: HostSpec) -> tuple[object, ...]:
    jump = (host.jump.user, host.jump.hostname, host.jump.port) if host.jump else None
    return (host.kind, host.hostname, host.port, host.user, jump, host.profile, host.groups)


def test_nightowl_yaml(empty_config: Path) -> None:
    hosts = load("fleet.yaml", empty_config)
    assert list(hosts) == [
        "gpu-01",
        "gpu-02",  # a spec string is named after its host, not the whole spec
        "gpu-03",
        "gpu-04",
        "gpu-05",
        "local",
    ]
    assert summary(hosts["gpu-01"]) == ("ssh", "gpu-01", 22, "ops", None, None, ())
    # a spec string keeps what it says over `defaults:`
    assert summary(hosts["gpu-02"]) == (
        "ssh",
        "gpu-02",
        2222,
        "root",
        (None, "bastion", 22),
        None,
        (),
    )
    assert summary(hosts["gpu-03"])[:4] == ("ssh", "gpu-03", 2200, "admin")
    assert summary(hosts["gpu-04"]) == ("ssh", "10.0.4.4", 2204, "ops", None, "h100-sxm", ())
    assert hosts["gpu-04"].labels == {"site": "ams1", "rack": "r12", "sku": "h100"}
    assert summary(hosts["gpu-05"]) == (
        "ssh",
        "10.0.4.5",
        22,
        "root",
        ("ops", "bastion", 2222),
        "a100-sxm4",
        (),
    )
    assert hosts["local"].is_local


def test_ansible_ini(empty_config: Path) -> None:
    hosts = load("ansible-hosts.ini", empty_config)
    assert list(hosts) == [
        "login-01",
        "gpu-h100-01",
        "gpu-h100-02",
        "gpu-h100-03",
        "gpu-h100-09",
        "gpu-a100-a",
    ]
    bastion = ("jump", "bastion.example", 2222)
    assert summary(hosts["login-01"]) == ("ssh", "10.0.0.2", 22, None, None, None, ())
    # host vars beat group vars; the child group h100 beats its parent gpu
    assert summary(hosts["gpu-h100-02"]) == (
        "ssh",
        "gpu-h100-02",
        22,
        "root",
        bastion,
        "h100-sxm",
        ("gpu", "h100"),
    )
    assert summary(hosts["gpu-h100-09"]) == (
        "ssh",
        "10.1.0.9",
        2209,
        "ubuntu",
        bastion,
        "h100-sxm",
        ("gpu", "h100"),
    )
    assert summary(hosts["gpu-a100-a"]) == (
        "ssh",
        "10.2.0.1",
        2201,
        "ubuntu",
        bastion,
        "a100-sxm4",
        ("a100", "gpu"),
    )


def test_ansible_yaml_matches_the_ini(empty_config: Path) -> None:
    ini = load("ansible-hosts.ini", empty_config)
    yaml_hosts = load("ansible-hosts.yaml", empty_config)
    for name in ("gpu-h100-01", "gpu-h100-03", "gpu-h100-09", "gpu-a100-a"):
        assert summary(yaml_hosts[name]) == summary(ini[name]), name
    assert yaml_hosts["login-01"].user == "admin"  # `all: vars:` applies to every host
    assert yaml_hosts["gpu-a100-a"].labels == {"rack": "r7"}
    assert yaml_hosts["this-node"].is_local and yaml_hosts["this-node"].groups == ("local_checks",)


def test_ini_without_sections_and_bare_names(tmp_path: Path, empty_config: Path) -> None:
    path = tmp_path / "hosts"
    path.write_text("gpu-01 ansible_host=10.0.0.1 ansible_port=2201\ngpu-02\n")
    hosts = load_inventory(path, empty_config)
    assert [(h.name, h.hostname, h.port) for h in hosts] == [
        ("gpu-01", "10.0.0.1", 2201),
        ("gpu-02", "gpu-02", 22),
    ]
    path.write_text("gpu-01\ngpu-02\n")
    assert [h.name for h in load_inventory(path, empty_config)] == ["gpu-01", "gpu-02"]


def test_names_resolve_through_ssh_config(tmp_path: Path) -> None:
    config = tmp_path / "ssh_config"
    config.write_text("Host gpu-01\n  HostName 10.7.0.1\n  User fleet\n  ProxyJump bastion\n")
    inventory = tmp_path / "inv.yaml"
    inventory.write_text("hosts:\n  - gpu-01\n  - {name: gpu-01-root, address: gpu-01, user: root, port: 2222}\n")
    first, second = load_inventory(inventory, config)
    assert (first.hostname, first.user, first.jump and first.jump.hostname) == (
        "10.7.0.1",
        "fleet",
        "bastion",
    )
    assert (second.name, second.hostname, second.user, second.port) == ("gpu-01-root", "10.7.0.1", "root", 2222)


def test_ansible_inventory_list_json_matches_the_inventories_it_came_from(empty_config: Path) -> None:
    """Real `ansible-inventory --list` outputs (fixtures/inventory/SOURCE.md): merged hostvars, and
    `--export` with group vars left in the groups; both give the hosts their source gives."""
    for source, listed in (
        ("ansible-hosts.ini", "ansible-inventory-list.json"),
        ("ansible-hosts.yaml", "ansible-inventory-list-export.json"),
    ):
        expected, got = load(source, empty_config), load(listed, empty_config)
        assert list(got) == list(expected), listed  # `all`'s children first, depth first: the source's order
        for name, host in expected.items():
            assert summary(got[name]) == summary(host), (listed, name)
            assert (got[name].labels, got[name].kind) == (host.labels, host.kind), (listed, name)


def test_dynamic_inventory_script_json(tmp_path: Path, empty_config: Path) -> None:
    """The script conventions' forms: a group as a bare host list, `_meta.hostvars`, children."""
    path = tmp_path / "inventory.json"
    path.write_text(
        """{
  "gpu": ["gpu-01", "gpu-02"],
  "bastioned": {"hosts": ["gpu-02"], "vars": {"ansible_ssh_common_args": "-J ops@bastion:2222"}},
  "racks": {"children": ["gpu"], "vars": {"ansible_user": "fleet", "nightowl_labels": {"site": "ams1"}}},
  "_meta": {"hostvars": {"gpu-01": {"ansible_host": "10.0.0.1", "ansible_port": 2201}}}
}
"""
    )
    hosts = {h.name: h for h in load_inventory(path, empty_config)}
    assert list(hosts) == ["gpu-01", "gpu-02"]
    assert summary(hosts["gpu-01"]) == ("ssh", "10.0.0.1", 2201, "fleet", None, None, ("gpu", "racks"))
    assert summary(hosts["gpu-02"]) == (
        "ssh",
        "gpu-02",
        22,
        "fleet",
        ("ops", "bastion", 2222),
        None,
        ("bastioned", "gpu", "racks"),
    )
    assert hosts["gpu-02"].labels == {"site": "ams1"}
    assert [h.name for h in limit(list(hosts.values()), "group=bastioned")] == ["gpu-02"]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('{"gpu": {"hosts": ["a"],}}\n', ":1: invalid JSON"),
        ('{\n "gpu": {\n  "hosts": "a"\n }\n}\n', ":3: group 'gpu': hosts must be a list"),
        ('{\n "gpu": {\n  "host": ["a"]\n }\n}\n', ":2: group 'gpu': unknown key 'host'"),
        ('{\n "gpu": 7\n}\n', ":2: group 'gpu' must be an object or a list of hosts"),
        ('{"gpu": ["a"], "_meta": {"hostvars": []}}', ":1: _meta.hostvars must be an object"),
        ('{\n "gpu": ["a"],\n "_meta": {"hostvars": {"a": {"ansible_port": "ssh"}}}\n}', "port 'ssh'"),
        (
            '{\n "all": {"children": ["gpu"]},\n "gpu": {"hosts": ["a", "b"]},\n'
            ' "_meta": {"hostvars": {"a": {"ansible_host": "10.0.0.1"}, "b": {"ansible_host": "10.0.0.1"}}}\n}',
            "'b' is the same machine as 'a'",
        ),
    ],
)
def test_json_inventory_errors_name_file_and_line(tmp_path: Path, empty_config: Path, text: str, message: str) -> None:
    path = tmp_path / "inv.json"
    path.write_text(text)
    with pytest.raises(InventoryError) as caught:
        load_inventory(path, empty_config)
    assert str(caught.value).startswith(str(path)) and message in str(caught.value)


@pytest.mark.parametrize(
    ("name", "line", "message"),
    [
        ("broken-unknown-key.yaml", 4, "unknown host key 'adress'"),
        ("broken-port.yaml", 3, "port 'ssh' is not 1-65535"),
        ("broken-duplicate.yaml", 4, "'gpu-01' listed twice (first on line 2)"),
        ("broken-spec.yaml", 3, "whitespace"),
        ("broken-syntax.yaml", 4, "invalid YAML"),
        ("broken-line.ini", 3, "expected key=value"),
        ("broken-section.ini", 3, "invalid section header"),
    ],
)
def test_errors_name_file_and_line(empty_config: Path, name: str, line: int, message: str) -> None:
    with pytest.raises(InventoryError) as caught:
        load_inventory(INVENTORIES / name, empty_config)
    assert str(caught.value).startswith(f"{INVENTORIES / name}:{line}: ")
    assert message in str(caught.value)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("hosts: []\nextra: 1\n", ":2: unknown key 'extra'"),
        ("hosts:\n  - 42\n", ":2: a host is a spec string or a mapping"),
        ("hosts:\n  - {user: root}\n", ":2: a host mapping needs `name` or `address`"),
        ("hosts:\n  - {name: a, labels: [x]}\n", ":2: host 'a': labels must be a mapping"),
        ("all:\n  hosts: [a, b]\n", ":2: group 'all': hosts must be a mapping"),
        ("all:\n  host:\n    a:\n", ":2: group 'all': unknown key 'host'"),
        ("all:\n  hosts:\n    gpu-[5:1]:\n", ":3: host range '[5:1]' is empty"),
        ("[]\n", "expected `hosts:`"),
    ],
)
def test_structural_errors(tmp_path: Path, empty_config: Path, text: str, message: str) -> None:
    path = tmp_path / "inv.yaml"
    path.write_text(text)
    with pytest.raises(InventoryError, match=message.replace("[", r"\[").replace("]", r"\]")):
        load_inventory(path, empty_config)


@pytest.mark.parametrize(
    ("text", "line", "first"),
    [
        # issue: `ssh://root@gpu-01`, `root@gpu-01:22` and `gpu-01` are one machine
        ("hosts:\n  - ssh://root@gpu-01\n  - root@gpu-01:22\n  - gpu-01\n", 3, "'gpu-01' (line 2)"),
        ("hosts:\n  - gpu-01\n  - {name: other, address: GPU-01.}\n", 3, "'gpu-01' (line 2)"),
        ("hosts:\n  - local\n  - {name: me, address: local}\n", 3, "'local' (line 2)"),
        (
            "[a]\ngpu-01 ansible_host=10.0.0.1\n[b]\ngpu-1 ansible_host=10.0.0.1 ansible_port=22\n",
            4,
            "'gpu-01' (line 2)",
        ),
    ],
)
def test_one_machine_listed_twice_is_reported(
    tmp_path: Path, empty_config: Path, text: str, line: int, first: str
) -> None:
    path = tmp_path / "inv"
    path.write_text(text)
    with pytest.raises(InventoryError) as caught:
        load_inventory(path, empty_config)
    assert str(caught.value).startswith(f"{path}:{line}: ")
    assert f"is the same machine as {first}" in str(caught.value)


def test_the_same_host_on_other_ports_or_behind_other_jumps_is_another_machine(
    tmp_path: Path, empty_config: Path
) -> None:
    path = tmp_path / "inv.yaml"
    path.write_text(
        "hosts:\n  - ssh://root@10.0.0.5:2201\n  - root@10.0.0.5:2202\n  - 10.0.0.5?\n"
        "  - ssh://10.0.0.5?jump=bastion-a\n  - ssh://10.0.0.5?jump=bastion-b\n  - ssh://gpu-09:2222?jump=b\n"
    )
    with pytest.raises(InventoryError):  # `10.0.0.5?` is no host name
        load_inventory(path, empty_config)
    path.write_text(path.read_text().replace("  - 10.0.0.5?\n", ""))
    hosts = load_inventory(path, empty_config)
    assert [h.name for h in hosts] == [
        "10.0.0.5:2201",
        "10.0.0.5:2202",
        "ssh://10.0.0.5?jump=bastion-a",  # same host and port: only the spec as written tells them apart
        "ssh://10.0.0.5?jump=bastion-b",
        "gpu-09",
    ]
    assert [h.port for h in hosts] == [2201, 2202, 22, 22, 2222]


# 600 well-formed hosts on lines 2-601, one to a line, as a large fleet writes them; the malformed
# entry comes after them, on line 602.
GOOD_HOSTS = "".join(
    f"  - {{name: node-{n:04d}, address: 10.0.{n // 256}.{n % 256}, port: 22, user: root}}\n" for n in range(600)
)


@pytest.mark.parametrize(
    ("bad", "message"),
    [
        # YAML the parser refuses: the line is the parser's
        (
            "  - {name: bad, address: 10.9.9.9\n  - {name: late}\n",
            "603: invalid YAML: did not find expected ',' or '}'",
        ),
        (" - {name: bad}\n", "602: invalid YAML: did not find expected key"),
        ("\t- {name: bad}\n", "602: invalid YAML: found character that cannot start any token"),
        ("  - 'bad\n", "603: invalid YAML: found unexpected end of stream"),
        ("---\nhosts: []\n", "602: invalid YAML: but found another document"),
        # well-formed YAML, a wrong inventory: the line is the entry's
        ("  - {name: bad, address: 10.9.9.9, port: ssh}\n", "602: host 'bad': port 'ssh' is not 1-65535"),
        ("  - name: bad\n    address: 10.9.9.9\n    port: 70000\n", "602: host 'bad': port 70000 is not 1-65535"),
        ("  - {name: bad, adress: 10.9.9.9}\n", "602: unknown host key 'adress'"),
        ("  - {name: node-0007, address: 10.9.9.9}\n", "602: host 'node-0007' listed twice (first on line 9)"),
        (
            "  - {name: other, address: 10.0.0.7}\n",
            "602: host 'other' is the same machine as 'node-0007' (line 9): both reach 10.0.0.7; list it once",
        ),
        ("  - 'gpu 01'\n", "602: host 'gpu 01': host spec 'gpu 01' contains whitespace or control characters"),
    ],
)
def test_a_malformed_entry_in_a_large_inventory_is_reported_at_its_file_and_line(
    tmp_path: Path, empty_config: Path, bad: str, message: str
) -> None:
    """Whichever way the YAML is read (a fast path for plain documents), the message is exactly
    ``file:line: what``, the line counted in the file as written."""
    path = tmp_path / "hosts.yaml"
    path.write_text("hosts:\n" + GOOD_HOSTS + bad)
    with pytest.raises(InventoryError) as caught:
        load_inventory(path, empty_config)
    assert str(caught.value) == f"{path}:{message}"


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(InventoryError, match="cannot read inventory"):
        load_inventory(tmp_path / "nope.yaml")


def test_host_ranges() -> None:
    assert expand_host_range("gpu-[01:03]") == ["gpu-01", "gpu-02", "gpu-03"]
    assert expand_host_range("n[0:20:10]") == ["n0", "n10", "n20"]
    assert expand_host_range("rack[a:b]-[1:2]") == ["racka-1", "racka-2", "rackb-1", "rackb-2"]
    assert expand_host_range("plain") == ["plain"]


def test_limit_by_name_label_group_and_exclusion(empty_config: Path) -> None:
    fleet = load_inventory(INVENTORIES / "fleet.yaml", empty_config)
    ansible = load_inventory(INVENTORIES / "ansible-hosts.ini", empty_config)

    def names(hosts: list[HostSpec]) -> list[str]:
        return [h.name for h in hosts]

    assert names(limit(fleet, "gpu-0[45]")) == ["gpu-04", "gpu-05"]
    assert names(limit(fleet, "sku=h100")) == ["gpu-04"]
    assert names(limit(fleet, "rack=r1*")) == ["gpu-04", "gpu-05"]
    assert names(limit(fleet, "profile=a100*")) == ["gpu-05"]
    assert names(limit(fleet, "site=ams1,!gpu-0[1-3]")) == ["gpu-04", "gpu-05"]
    assert names(limit(fleet, "site=ams1,!gpu-0[1-4]")) == ["gpu-05"]
    assert names(limit(ansible, "group=a100")) == ["gpu-a100-a"]
    assert names(limit(ansible, "h100,!gpu-h100-0[12]")) == ["gpu-h100-03", "gpu-h100-09"]
    assert names(limit(ansible, "!gpu")) == ["login-01"]
    assert limit(fleet, "nothing-matches") == []
    with pytest.raises(ValueError, match="empty"):
        limit(fleet, " , ")


# --- issue 30, item 22: one malformed host is that host's problem, never the whole sweep's ----------
def test_a_malformed_host_is_unreachable_with_the_reason_and_the_others_are_swept(tmp_path: Path) -> None:
    import json

    from click.testing import CliRunner

    from nightowl.cli.main import main
    from nightowl.fleet.inventory import InventoryError, load_inventory

    inventory = tmp_path / "hosts.yaml"
    inventory.write_text('hosts:\n  - local\n  - "gpu 17!!"\n  - "ssh://root@[::1"\n')
    with pytest.raises(InventoryError, match="hosts.yaml:3"):
        load_inventory(inventory)  # strict for every other reader
    result = CliRunner().invoke(
        main, ["sweep", "--inventory", str(inventory), "--format", "json", "--out", str(tmp_path / "out")]
    )
    report = json.loads(result.output)
    assert [h["host"] for h in report["hosts"]] == ["local", "gpu 17!!", "ssh://root@[::1"]
    local, bad, bad6 = report["hosts"]
    assert local["status"] != "unreachable"  # swept
    assert bad["status"] == "unreachable" and "hosts.yaml:3" in bad["error"] and "whitespace" in bad["error"]
    assert bad6["status"] == "unreachable" and "hosts.yaml:4" in bad6["error"]
    only_bad = tmp_path / "bad.yaml"
    only_bad.write_text('hosts:\n  - "gpu 17!!"\n')
    result = CliRunner().invoke(main, ["sweep", "--inventory", str(only_bad), "--out", str(tmp_path / "out")])
    assert result.exit_code == 3, result.output  # a host had no verdict; not a usage error


# --- issue 30, item 24: deep nesting is an input error naming the file ------------------------------
@pytest.mark.parametrize("depth", [100_000])
def test_deeply_nested_ansible_json_is_an_input_error_naming_the_file(tmp_path: Path, depth: int) -> None:
    path = tmp_path / "inventory.json"
    path.write_text('{"all": {"vars": ' + '{"a": ' * depth + "1" + "}" * depth + "}}")
    with pytest.raises(InventoryError, match=r"inventory.json.*nested too deeply"):
        load_inventory(path)
    groups = {f"g{i}": {"children": [f"g{i + 1}"]} for i in range(5000)}
    groups["g5000"] = {"hosts": ["gpu-01"]}
    deep = tmp_path / "groups.json"
    import json

    deep.write_text(json.dumps({"all": {"children": ["g0"]}, **groups}))
    try:
        load_inventory(deep)
    except InventoryError as exc:
        assert "groups.json" in str(exc)
