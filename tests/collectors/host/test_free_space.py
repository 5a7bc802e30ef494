"""free-space: free bytes and inodes of a path's filesystem, from df (any form) or stat -f."""

from __future__ import annotations

from nightowl.collectors import get_collector
from nightowl.collectors.host import free_space
from nightowl.collectors.readonly import violations
from tests.helpers import ROOT


def test_what_the_collector_runs_reads_bytes_and_inodes_together() -> None:
    # GNU df --output, as the collector runs it (header words from coreutils' df.c field names)
    text = (
        "      1B-blocks          Used         Avail    Inodes   IUsed    IFree Mounted on\n"
        "1967317549056 1867317549056 100000000000 122101760 1200000 120901760 /var/lib/docker\n"
    )
    facts = free_space.facts(free_space.parse(text))
    (fs,) = facts["filesystems"]
    assert fs["mounted_on"] == "/var/lib/docker" and fs["size_bytes"] == 1967317549056
    assert fs["bytes_free_pct"] == 5.08 and fs["inodes_free_pct"] == 99.02 and fs["full"] is True
    assert facts["full_paths"] == ["/var/lib/docker"]


def test_stat_f_gives_both_limits_where_df_has_no_output_option() -> None:
    facts = free_space.facts(free_space.parse("4096 61202533 30601266 30000000 30736384 251743 /\n"))
    (fs,) = facts["filesystems"]
    assert fs["avail_bytes"] == 4096 * 30000000 and fs["inodes_free"] == 251743
    assert facts["full_paths"] == ["/"] and fs["bytes_free_pct"] > 10  # full by its inodes alone


def test_df_h_then_df_i_pasted_are_joined_by_mount_point() -> None:
    text = (ROOT / "fixtures/corpus/host/df-h-root-95-overlay-moby30123.txt").read_text()
    text += "Filesystem      Inodes  IUsed   IFree IUse% Mounted on\n/dev/vda1      3932160 300000 3632160    8% /\n"
    root = free_space.facts(free_space.parse(text))["filesystems"][0]
    assert root["mounted_on"] == "/" and root["size_bytes"] is not None and root["inodes"] == 3932160


def test_nothing_read_is_never_room_to_spare() -> None:
    for text in ("", "df: /models: No such file or directory\n", "Filesystem Size Used Avail Use% Mounted on\n"):
        facts = free_space.facts(free_space.parse(text))
        assert facts["filesystems"] == [] and facts["bytes_free_pct_min"] is None
    df_i = "Filesystem Inodes IUsed IFree IUse% Mounted on\nx 100 1 99 1% /\n"
    only_inodes = free_space.facts(free_space.parse(df_i))
    assert only_inodes["unjudged_paths"] == ["/"] and only_inodes["full_paths"] == []


def test_the_collector_is_read_only_and_registered() -> None:
    collector = get_collector("free-space")
    assert collector.kind == "free-space" and not collector.invasive
    assert violations(collector.commands) == []
