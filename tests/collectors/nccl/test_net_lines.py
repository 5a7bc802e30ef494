"""The net NCCL used, from the net transport's own lines when no "Using network" line survived (a pasted error
without the init lines). The lines are NCCL 2.x's own wording (transport/net_ib.cc, net_socket.cc), as posted in
NVIDIA/nccl#928."""

from __future__ import annotations

from tests.helpers import facts_of

IB_WARN = (
    "H100-2:19989:20082 [1] transport/net_ib.cc:1295 NCCL WARN NET/IB : Got completion from peer "
    "fe80::966d:ae03:8b:df78%ib0<53249> with error 4, opcode 32564, len 32564, vendor err 81 (Send)\n"
    "H100-2:19989:20082 [1] NCCL INFO transport/net.cc:1008 -> 6\n"
)


def facts(text: str) -> dict:
    return facts_of("nccl-log", text)


def test_a_net_ib_warning_alone_names_ib() -> None:
    found = facts(IB_WARN)
    assert (found["network"], found["network_source"]) == ("IB", "net-lines")


def test_two_nets_warning_name_neither() -> None:
    socket = "h1:1:2 [0] NCCL INFO NET/Socket : Using [0]eth0:10.0.0.1<0>\n"
    found = facts(IB_WARN + socket)
    assert found["network"] in (None, "Socket")  # the socket init line names it by another way, or nothing
    assert found["network_source"] != "net-lines"


def test_a_using_network_line_still_decides() -> None:
    found = facts("h1:1:2 [0] NCCL INFO Using network Socket\n" + IB_WARN)
    assert (found["network"], found["network_source"]) == ("Socket", "using-network")


def test_an_error_chain_through_the_socket_transport_names_socket() -> None:
    # NVIDIA/nccl 2.14's own wording of a lost peer, as in NVIDIA/nccl#795
    chain = (
        "a100-22:183006:183220 [1] misc/socket.cc:518 NCCL WARN Net : Call to recv from 10.200.84.247<58355> failed"
        " : Broken pipe\n"
        "a100-22:183006:183220 [1] NCCL INFO misc/socket.cc:535 -> 6\n"
        "a100-22:183006:183220 [1] NCCL INFO transport/net_socket.cc:368 -> 6\n"
        "a100-22:183006:183220 [1] NCCL INFO transport/net.cc:517 -> 6\n"
    )
    found = facts(chain)
    assert (found["network"], found["network_source"]) == ("Socket", "net-lines")
    assert facts(chain.replace("transport/net_socket.cc:368", "misc/socket.cc:600"))["network"] is None
