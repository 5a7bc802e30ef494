"""One rule set for host names (nightowl/hostnames.py), checked at every door a name comes in by.

The same good and bad names go through each caller: a host spec (``--host``, an inventory entry),
the host an inventory entry is named after, an alert label (the receiver), and the node's own name
($NODE_NAME). A caller may refuse more than the shared rules, on purpose: those differences are
listed once, in DIFFERENCES, so a caller that drifts fails here.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator

import pytest
from hypothesis import given
from hypothesis import strategies as st

from nightowl.fleet.identity import node_name
from nightowl.hostnames import MAX_LABEL, MAX_NAME, host_name_problem
from nightowl.receiver.rules import check_host_name, host_name
from nightowl.transports.hostspec import parse_host_spec, written_host

Door = Callable[[str], object]

LONGEST = ".".join(["x" * MAX_LABEL] * 3 + ["x" * (MAX_NAME - 3 * (MAX_LABEL + 1))])  # 253 characters

# Every door lets these in.
GOOD = [
    "gpu-17",
    "GPU-17.Example.com",
    "node3.lab",
    "a",
    "0",
    "10.1.2.3",
    "x" * MAX_LABEL + ".corp",
    LONGEST,
    "fd00::17",
    "fe80::1",
    "2001:db8::ff00:42:8329",
]

# Every door refuses these (none is empty or padded with spaces: the spec and NODE_NAME are stripped).
BAD = [
    # whitespace and control characters
    "gpu 17",
    "gpu\t17",
    "gpu-17\n.corp",
    "gpu-17\n:22",  # written_host once returned 'gpu-17\n' (a '$' in its pattern matched before the newline)
    "gpu\x0117",
    "gpu\x7f17",
    # an option, shell, URL or path characters, non-ASCII
    "-oProxyCommand=reboot",
    "-gpu",
    "gpu-17;reboot",
    "$(reboot)",
    "`reboot`",
    "gpu'17",
    'gpu"17',
    "gpu\\17",
    "gpu/17",
    "../etc",
    "gpu*",
    "gpu-17?jump=attacker.example&identity=/etc/ssh/ssh_host_ed25519_key",
    "gpu#1",
    "gpü-17",
    # DNS lengths and shape
    "gpu-17..corp",
    ".",
    "..",
    ".gpu",
    "_gpu",
    "x" * (MAX_LABEL + 1) + ".corp",
    "a" * 300,
    LONGEST + "x",
    # ':' and '%' outside an IPv6 address, or a zone that is no interface name
    "gpu%17",
    "a:b:c",
    "gpu-17:ssh",
    "1::2::3",
    "-::1",
    "fe80::1%",
    "fe80::1%eth0:1",
    "fe80::1%eth 0",  # the receiver once let this in: Python's ipaddress takes any zone
    "fe80::1%%eth0",
]

# Where the doors differ on purpose: name -> the doors that let it in.
DIFFERENCES = {
    # the receiver takes RFC 1123 names only: a label is the alert sender's word
    "gpu_17": {"spec", "inventory name", "node"},
    "gpu-17.": {"spec", "inventory name", "node"},
    "gpu-.corp": {"spec", "inventory name", "node"},
    # a node's name is seen from everywhere: no zone, and a letter or digit first
    "::1": {"spec", "inventory name", "label"},
    "fe80::1%eth0": {"spec", "inventory name", "label"},
    # spec forms that are more than a name
    "gpu-17:2200": {"spec", "inventory name"},
    "admin@gpu-17": {"spec", "inventory name"},
    # no NODE_NAME: the node is named by its host name
    "": {"node"},
}


def _node(name: str) -> str:
    before = os.environ.get("NODE_NAME")
    os.environ["NODE_NAME"] = name
    try:
        return node_name()
    finally:
        if before is None:
            del os.environ["NODE_NAME"]
        else:
            os.environ["NODE_NAME"] = before


@pytest.fixture(scope="module")
def doors(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Door]]:
    empty = tmp_path_factory.mktemp("hostnames") / "ssh_config"
    empty.write_text("")
    yield {
        "spec": lambda name: parse_host_spec(name, empty),
        "inventory name": written_host,
        "label": check_host_name,
        "node": _node,
    }


def admitted(doors: dict[str, Door], name: str) -> set[str]:
    let_in = set()
    for door, call in doors.items():
        try:
            call(name)
        except ValueError:
            continue
        let_in.add(door)
    return let_in


@pytest.mark.parametrize("name", GOOD)
def test_every_door_lets_a_good_name_in(doors: dict[str, Door], name: str) -> None:
    assert host_name_problem(name) is None
    assert admitted(doors, name) == set(doors)


@pytest.mark.parametrize("name", BAD)
def test_every_door_refuses_a_bad_name(doors: dict[str, Door], name: str) -> None:
    assert host_name_problem(name) is not None
    assert admitted(doors, name) == set()


@pytest.mark.parametrize(("name", "let_in"), DIFFERENCES.items())
def test_the_doors_differ_only_where_they_mean_to(doors: dict[str, Door], name: str, let_in: set[str]) -> None:
    assert admitted(doors, name) == let_in


def test_a_refusal_says_where_the_name_came_from_and_why(doors: dict[str, Door]) -> None:
    for door, where in (("spec", "host spec 'gpu 17'"), ("label", "host name 'gpu 17'"), ("node", "NODE_NAME=")):
        with pytest.raises(ValueError, match="whitespace or control characters") as caught:
            doors[door]("gpu 17")
        assert where in str(caught.value)
    with pytest.raises(ValueError, match="invalid host name 'gpu%17'.*IPv6"):
        written_host("gpu%17")


# Names that a spec's grammar reads as more than a host (user@, [address], host:port, a URL), or that
# the doors strip or read as no name: the shared rules alone cannot speak for these.
def _a_name_to_every_door(name: str) -> bool:
    return (
        name == name.strip()
        and name.lower() not in ("", "local")
        and not any(c in name for c in "@[]\x00")
        and "://" not in name
        and name.count(":") != 1
    )


@given(st.text(alphabet="ab09-_.:%@/[]?;# \t\n\x01é", max_size=12).filter(_a_name_to_every_door))
def test_what_the_shared_rules_refuse_no_door_lets_in(doors: dict[str, Door], name: str) -> None:
    """Beyond the tables: any name the shared rules refuse, every door refuses; any they accept, a spec accepts."""
    let_in = admitted(doors, name)
    if host_name_problem(name) is not None:
        assert let_in == set()
    else:
        assert "spec" in let_in


@pytest.mark.parametrize(
    ("spec", "name"),
    [
        ("ssh://root@GPU-17:2222?jump=bastion", "GPU-17"),
        ("root@gpu-17:2222", "gpu-17"),
        ("[::1]:22", "::1"),
        ("ssh://root@[fd00::17]:2200", "fd00::17"),
        ("gpu-17", "gpu-17"),
        ("local", "local"),
    ],
)
def test_the_receiver_names_a_host_as_a_sweep_does(spec: str, name: str) -> None:
    assert host_name(spec) == written_host(spec) == name


def test_the_receiver_names_a_replay_by_its_folder_and_a_broken_spec_as_written() -> None:
    assert host_name("replay:/srv/hosts/gpu-17") == "gpu-17"
    assert host_name("ssh://gpu-17/path") == "ssh://gpu-17/path"  # the capture fails on it, and says so
