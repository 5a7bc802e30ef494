"""The normaliser's ``autolinks`` family (issue "never cry wolf", sixth field set, NVIDIA/nccl#1710): a web editor
turns file names, hosts and addresses in a pasted log into Markdown links whose text is the URL without its
scheme (``transport/[net_ib.cc:101](http://net_ib.cc:101/)``); the normaliser puts the text back, so every
parser reads the line it would read from the command. A metamorphic test autolinks every recorded NCCL log and
some kernel logs the way such an editor does and expects the same facts."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from nightowl.collectors import get_collector
from nightowl.collectors.normalise import normalise
from tests.helpers import ROOT

HOSTS = ROOT / "fixtures" / "hosts"
FIELD = ROOT / "fixtures" / "field"
READING = ("coverage", "normalised", "warnings", "truncated", "truncated_bytes")

# What GitHub's editor links in a paste: dotted IPv4 addresses and names with a known top-level domain or file
# suffix that it takes for one (".cc", ".py", ".io" ...), with a port-like ":123".
_LINKABLE = re.compile(
    r"(?<![\w.\[@-])((?:\d{1,3}\.){3}\d{1,3}|[A-Za-z_][\w-]*\.(?:cc|py|cu|io|sh|so|md)(?::\d+)?)(?![\w\]/.(-])"
)


def autolinked(text: str) -> str:
    return _LINKABLE.sub(lambda m: f"[{m.group(1)}](http://{m.group(1)}/)", text)


def _facts(kind: str, text: str) -> dict[str, Any]:
    collector = get_collector(kind)
    facts = collector.facts(collector.parse(text))
    return {name: value for name, value in facts.items() if name not in READING}


LINE = (
    "node023:10214:10303 [0] transport/[net_ib.cc:1909](http://net_ib.cc:1909/) NCCL WARN NET/IB : Got completion"
    " from peer [10.1.3.201](http://10.1.3.201/)<33057> with status=9 opcode=0 len=0 vendor err 138 (Send)"
)


def test_an_autolinked_name_reads_as_its_text() -> None:
    reading = normalise(LINE + "\n", "nccl-log")
    assert "autolinks" in reading.families
    assert reading.text == (
        "node023:10214:10303 [0] transport/net_ib.cc:1909 NCCL WARN NET/IB : Got completion"
        " from peer 10.1.3.201<33057> with status=9 opcode=0 len=0 vendor err 138 (Send)\n"
    )


@pytest.mark.parametrize(
    "text",
    [
        "see [the docs](https://docs.nvidia.com/deploy/xid-errors/) for Xid 79",
        "[net_ib.cc:101](http://example.com/net_ib.cc:101/)",
        "[x](http://y/)",
    ],
)
def test_a_link_to_anything_else_stays(text: str) -> None:
    reading = normalise(text, "nccl-log")
    assert reading.text == text and "autolinks" not in reading.families


def test_the_quoted_autolinked_nccl_warnings_of_the_field_set_read_as_ib() -> None:
    path = (
        FIELD
        / "network-6"
        / "nccl-warn-markdown-quoted-autolinked-file-lines-async-local-access-violation-status9-nccl1710.txt"
    )
    text = path.read_text()
    facts = _facts("nccl-log", text)
    assert facts["network"] == "IB"
    assert normalise(text, "nccl-log").families[:2] in (("autolinks", "quote"), ("quote", "autolinks"))
    unlinked = "".join(line[2:] if line.startswith("> ") else line.lstrip(">") for line in text.splitlines(True))
    unlinked = re.sub(r"\[([^\]]+)\]\(http://\1/\)", r"\1", unlinked)
    assert facts == _facts("nccl-log", unlinked)


def _linkable(kind: str) -> list[Path]:
    """Recorded outputs of ``kind`` in which an editor would link something (at most 12)."""
    return [p for p in sorted(HOSTS.glob(f"*/{kind}.out")) if _LINKABLE.search(p.read_text(errors="replace"))][:12]


NCCL_LOGS = sorted(HOSTS.glob("*/nccl-log.out"))
OTHERS = _linkable("engine-log") + _linkable("kernel-log")


@pytest.mark.parametrize("path", NCCL_LOGS + OTHERS, ids=lambda p: f"{p.parent.name}-{p.stem}")
def test_a_recorded_output_autolinked_reads_alike(path: Path) -> None:
    text = path.read_text(errors="replace")
    linked = autolinked(text)
    kind = path.stem
    assert _facts(kind, linked) == _facts(kind, text)
    if linked != text:
        assert "autolinks" in normalise(linked, kind).families


def test_the_cases_autolink_something() -> None:
    assert sum(autolinked(p.read_text(errors="replace")) != p.read_text(errors="replace") for p in NCCL_LOGS) >= 10
    assert len(OTHERS) >= 3
