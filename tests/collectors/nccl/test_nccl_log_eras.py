"""nccl-log: NCCL WARN in every prefix form, the network inferred from what survived, init failures;
the new patterns stay linear on hostile input."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nightowl.collectors.nccl import nccl_log
from tests.hostile.watchdog import LINEAR_SECONDS, finishes_within

WARN = "transport/net_ib.cc:93 NCCL WARN NET/IB : Got async event : port error"


def facts_of(text: str) -> dict[str, Any]:
    return nccl_log.facts(nccl_log.parse(text))


@pytest.mark.parametrize(
    ("line", "host"),
    [
        (f"node1:34050:34121 [0] {WARN}", "node1"),
        (f":34050:34121 [0] {WARN}", None),  # empty host name
        (f"...-48:34050:34121 [0] {WARN}", "...-48"),  # redacted
        (f"192-222-53-201:34050:34121 [0] {WARN}", "192-222-53-201"),
        (f"[0] {WARN}", None),  # no host:pid:tid
        (f"NCCL WARN {WARN.split('NCCL WARN ')[1]}", None),  # no prefix at all
        (f"MLVM2: MLVM2:34050:34121 [0] {WARN}", "MLVM2"),  # pdsh
        (f"[trainer3]:node1:34050:34121 [0] {WARN}", "node1"),  # torchx role
        (f"2019-06-02T16:13:44.884Z: [1,12]<stdout>:node1:34050:34121 [0] {WARN}", "node1"),
        (f"  | 2025-05-16T16:39:51.208-07:00 | node1:34050:34121 [0] {WARN}", "node1"),
    ],
)
def test_warn_in_every_prefix_form(line: str, host: str | None) -> None:
    facts = facts_of(line)
    assert facts["warnings_nccl"] == ["NET/IB : Got async event : port error"]
    assert facts["ib_async_events"] == ["port error"]
    assert [(e["kind"], e["host"]) for e in facts["errors"]] == [("ib_async_event", host)]
    assert facts["has_ib_errors"] is True


def test_legacy_warn_without_the_nccl_tag_needs_a_source_file() -> None:
    assert facts_of("include/socket.h:344 WARN Net : Connection refused")["warnings_nccl"] == [
        "Net : Connection refused"
    ]
    assert facts_of("WARN something unrelated")["warnings_nccl"] == []  # no tag, no source: not NCCL


@pytest.mark.parametrize(
    ("lines", "network", "source"),
    [
        (["h:1:2 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[0] [send] via NET/IB/4"], "IB", "transports"),
        (["h:1:2 [0] NCCL INFO Channel 00 : 0[0] -> 1[0] [send] via NET/Socket/0"], "Socket", "transports"),
        (["h:1:2 [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/IB ; OOB eth0:10.0.0.1<0>"], "IB", "ib-devices"),
        (
            [
                "h:1:2 [0] NCCL INFO NET/IB : No device found.",
                "h:1:2 [0] NCCL INFO NET/Socket : Using [0]eth0:10.0.0.1<0>",
            ],
            "Socket",
            "socket",
        ),
        (["h:1:2 [0] NCCL INFO P2P plugin IBext_v8"], "IBext_v8", "plugin"),
        (["h:1:2 [0] NCCL INFO NET/OFI Selected Provider is efa"], "AWS Libfabric", "plugin"),
        (
            ["h:1:2 [0] NCCL INFO Using network IB", "h:1:2 [0] NCCL INFO Channel 00 : via NET/Socket/0"],
            "IB",
            "using-network",
        ),
        (["h:1:2 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[0] via P2P/IPC"], None, None),
    ],
)
def test_network_inferred_when_no_using_network_line(lines: list[str], network: str | None, source: str | None) -> None:
    facts = facts_of("\n".join(lines))
    assert (facts["network"], facts["network_source"]) == (network, source)


def test_bootstrap_chain_is_an_init_failure_and_a_proxy_chain_is_not() -> None:
    boot = "[0] NCCL INFO misc/socket.cc:80 -> 6\n[0] NCCL INFO bootstrap.cc:701 -> 6\n[0] NCCL INFO init.cc:1402 -> 6"
    assert facts_of(boot)["init_failed"] is True and facts_of(boot)["bootstrap_failed"] is True
    proxy = "h:1:2 [4] NCCL INFO transport/net.cc:1302 -> 6\nh:1:2 [4] NCCL INFO proxy.cc:878 -> 6 [Progress Thread]"
    assert facts_of(proxy)["init_failed"] is False


def test_gdr_flag_of_connected_rings() -> None:
    assert facts_of("h:1:2 [0] NCCL INFO Connected all rings, use ring PXN 0 GDR 0")["gdr"] is False
    assert facts_of("h:1:2 [0] NCCL INFO Connected all rings, use ring PXN 1 GDR 1")["gdr"] is True


@settings(max_examples=40, deadline=None)
@given(
    st.sampled_from(["h:", "[0] ", "include/a.h:1 ", "NCCL ", "Got async event : ", "| 2025-01-01T00:00:00 | "]),
    st.sampled_from([":1", " ", "a:", "[0] ", "1 -> ", " | "]),
)
def test_hostile_lines_are_read_at_once(head: str, piece: str) -> None:
    # 20 000 repeats: a quadratic pattern would take minutes here.
    finishes_within(LINEAR_SECONDS, nccl_log.parse, head + piece * 20_000 + " NCCL WARN x")
