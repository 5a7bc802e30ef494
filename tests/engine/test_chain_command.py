"""A next step whose hosts name no node (a replica reached by URL only) prints a command a person completes with
the node, never a shell-quoted placeholder that runs as a host name (issue 45 item 2)."""

from __future__ import annotations

from nightowl.engine.chain import resolve
from nightowl.engine.runbook_data import NextSpecData


def test_no_host_prints_the_word_to_replace_and_says_a_node_is_needed() -> None:
    out = resolve(NextSpecData(runbook="xid", hosts="[]"), {})
    assert out["command"] == "nightowl triage xid --host NODE"
    assert out["needs_host"] is True


def test_named_hosts_are_the_command_and_need_nothing() -> None:
    out = resolve(NextSpecData(runbook="xid", hosts="['gpu-17']"), {})
    assert out["command"] == "nightowl triage xid --host gpu-17"
    assert "needs_host" not in out
