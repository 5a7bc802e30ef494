"""host collectors: /dev/shm size from df in its usual shapes, and the CPU frequency governor."""

from __future__ import annotations

from nightowl.collectors.host.cpu_governor import COLLECTOR as GOVERNOR_COLLECTOR
from nightowl.collectors.host.cpu_governor import governor_facts, parse_governor
from nightowl.collectors.host.dev_shm import COLLECTOR as SHM_COLLECTOR
from nightowl.collectors.host.dev_shm import parse_shm, shm_facts
from tests.helpers import ROOT

RECORDED = ROOT / "fixtures" / "hosts" / "preflight-h100-ready"


def test_df_output_recorded_on_a_real_host() -> None:
    # `df -B1 --output=size,avail -- /dev/shm` on the Debian 12 container that built the fixtures
    result = parse_shm((RECORDED / "dev-shm.out").read_text())
    assert result.size_bytes == 25276510208 and result.avail_bytes == 25276510208
    assert shm_facts(result)["size_gib"] == 23.541
    assert result.warnings == ()


def test_df_k_of_a_docker_default_shm() -> None:
    # GNU df -k layout; 65536 KiB is Docker's default --shm-size of 64 MiB
    text = (
        "Filesystem     1K-blocks  Used Available Use% Mounted on\n"
        "shm                65536     0     65536   0% /dev/shm\n"
    )
    result = parse_shm(text)
    assert result.size_bytes == 64 * 2**20 and result.mounted_on == "/dev/shm"
    assert shm_facts(result)["size_gib"] == 0.062


def test_df_h_pasted_with_prompt() -> None:
    text = (
        "$ df -h /dev/shm\n"
        "Filesystem      Size  Used Avail Use% Mounted on\n"
        "tmpfs           126G  1.5G  125G   2% /dev/shm\n"
    )
    result = parse_shm(text)
    assert result.size_bytes == 126 * 2**30
    assert result.avail_bytes == 125 * 2**30


def test_unreadable_df() -> None:
    assert parse_shm("df: /dev/shm: No such file or directory\n").size_bytes is None
    assert parse_shm("df: /dev/shm: No such file or directory\n").warnings
    assert parse_shm("").warnings == ()
    assert shm_facts(parse_shm(""))["size_gib"] is None


def test_governors() -> None:
    assert governor_facts(parse_governor("performance\n"))["is_performance"] is True
    powersave = governor_facts(parse_governor("powersave\n"))
    assert powersave["governor"] == "powersave" and powersave["is_performance"] is False
    assert parse_governor("turbo\n").warnings  # not a kernel governor name
    assert governor_facts(parse_governor(""))["is_performance"] is None


def test_collectors_read_only_with_path_after_double_dash() -> None:
    assert SHM_COLLECTOR.kind == "dev-shm" and GOVERNOR_COLLECTOR.kind == "cpu-governor"
    for collector in (SHM_COLLECTOR, GOVERNOR_COLLECTOR):
        assert not collector.invasive
        for argv in collector.commands:
            assert argv[-2] == "--"
    assert SHM_COLLECTOR.commands[0] == ("df", "-B1", "--output=size,avail", "--", "/dev/shm")
