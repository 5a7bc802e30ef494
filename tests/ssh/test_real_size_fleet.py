"""The benchmarks' real-size node (bench/real_evidence.py) answers over SSH as a real node does: XML to
`nvidia-smi -q -x`, text to `nvidia-smi -q`, both after nvidia-smi's delay, and earlier boots listed."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.real_evidence import (
    LIST_BOOTS,
    NVIDIA_SMI_SECONDS,
    RECORDED,
    earlier_boots_sent,
    kernel_log,
    recorded_host,
    serve_real_size,
)
from nightowl.collectors import get_collector
from nightowl.collectors.gpu import kernel_log_boots
from nightowl.transports.hostspec import parse_host_spec
from nightowl.transports.ssh import SSHTransport
from tests.engine.cheap_csv import one_node_q
from tests.ssh.fleet import SSHD, Fleet

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(not SSHD.exists(), reason=f"{SSHD} missing (Debian package openssh-server)"),
]


def test_the_real_size_node_answers_both_nvidia_smi_forms_as_a_node_does(tmp_path: Path) -> None:
    with Fleet(tmp_path / "fleet", {"node-0000": recorded_host(tmp_path / "host")}) as fleet:
        serve_real_size(fleet, ["node-0000"])
        host = parse_host_spec(fleet.spec("node-0000"), fleet.ssh_config)
        with SSHTransport(host, fleet.options()) as transport:
            xml = transport.run(["nvidia-smi", "-q", "-x"], timeout=10, kind="nvidia-smi")
            text = transport.run(["nvidia-smi", "-q"], timeout=10, kind="fabric")
            links = transport.run(["nvidia-smi", "nvlink", "-s"], timeout=10, kind="nvlink")
            boots = transport.run(["journalctl", "--list-boots", "--no-pager"], timeout=10, kind="kernel-log-boots")
    assert xml.rc == text.rc == links.rc == boots.rc == 0
    assert xml.stdout == (RECORDED / "nvidia-smi-q-x.xml").read_text()
    # the recorded -q, naming the XML's GPUs (bench/real_evidence.py: one host names one set of GPUs)
    assert text.stdout == one_node_q((RECORDED / "nvidia-smi.out").read_text(), xml.stdout)
    assert len(text.stdout) == len((RECORDED / "nvidia-smi.out").read_text())
    assert links.stdout == (RECORDED / "nvlink.out").read_text()
    assert boots.stdout == LIST_BOOTS
    assert min(xml.duration, text.duration) >= NVIDIA_SMI_SECONDS
    collector = get_collector("nvidia-smi")
    facts = collector.facts(collector.parse(xml.stdout))
    assert (facts["source_format"], facts["gpu_count"], len(xml.stdout)) == ("xml", 8, 227585)


def test_the_real_size_node_sends_its_earlier_boots_cut(tmp_path: Path) -> None:
    """kernel-log-boots' own command over SSH: the node's awk cuts each 0.8 MB earlier boot, and what
    arrives is what bench/parse.py and bench/scrub.py time (``earlier_boots_sent``)."""
    with Fleet(tmp_path / "fleet", {"node-0000": recorded_host(tmp_path / "host")}) as fleet:
        serve_real_size(fleet, ["node-0000"])
        host = parse_host_spec(fleet.spec("node-0000"), fleet.ssh_config)
        with SSHTransport(host, fleet.options()) as transport:
            sent = transport.run(list(kernel_log_boots.COLLECTOR.commands[1]), timeout=20, kind="kernel-log-boots")
    assert (sent.rc, sent.stdout) == (0, earlier_boots_sent())
    assert len(sent.stdout) < 2 * len(kernel_log()) / 10


def test_the_floor_pool_keeps_every_output_it_read_and_parses_the_xml(tmp_path: Path) -> None:
    """bench/sweep.py --floor: the bare pool's floor does the least the issue asks of each output of every
    host (a file named by its SHA-256, the XML parsed in C), so its CPU is a floor of that work, not less."""
    import hashlib

    from bench.sweep import BARE_FAILURES, bare_pool, floor_work, node_health_commands

    names = ["node-0000", "node-0001"]
    with Fleet(tmp_path / "fleet", dict.fromkeys(names, recorded_host(tmp_path / "host"))) as fleet:
        serve_real_size(fleet, names)
        kept = tmp_path / "floor"
        kept.mkdir()
        BARE_FAILURES.clear()
        wall, cpu = bare_pool(fleet, names, 2, kept)
    assert wall > NVIDIA_SMI_SECONDS and cpu > 0
    xml = (RECORDED / "nvidia-smi-q-x.xml").read_bytes()
    # A host the pool lost because a channel closed with no exit status (a full suite's load once did it) is
    # counted in BARE_FAILURES, as the bench reports it, and its outputs are not the commands': the others are
    # checked. Any other loss fails the test.
    assert all("no exit status" in failure for failure in BARE_FAILURES), BARE_FAILURES
    lost = {failure.split(":")[0] for failure in BARE_FAILURES}
    assert len(lost) < len(names), BARE_FAILURES
    for name in sorted(set(names) - lost):
        files = sorted((kept / name).iterdir())
        assert len(files) == len(node_health_commands())
        for path in files:
            assert path.stem.split("-")[1] == hashlib.sha256(path.read_bytes()).hexdigest()[:8]
        assert xml in [path.read_bytes() for path in files]
    broken = floor_work(tmp_path / "broken")
    with pytest.raises(Exception, match="no element found|unclosed|mismatched"):
        broken(0, xml[: len(xml) // 2])
