"""Metamorphic tests of the normaliser (issue "never cry wolf", item 3): every recorded output of fixtures/hosts,
wrapped the ways real outputs arrive (indented, quoted, HTML-escaped, CRLF, coloured, under a prompt, tagged by
a launcher or a log collector), gives the same facts as the output itself. A parser change that breaks a
wrapped variant breaks a test.

- ``test_each_family_on_every_kind``: one case per family and per kind (fast suite);
- ``test_wrapped_fixtures_read_alike``: hypothesis draws fixtures and combinations of families (fast suite);
- ``test_every_recorded_output_in_every_family``: all of them (``integration``: tens of seconds).
"""

from __future__ import annotations

import html
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from nightowl.collectors import get_collector
from nightowl.collectors.normalise import KEPT_BY_KIND, normalise
from tests.helpers import ROOT

HOSTS = ROOT / "fixtures" / "hosts"
# Kinds whose recorded outputs are read by a parser (derived kinds read no file).
KINDS = (
    "nvidia-smi",
    "nvidia-smi-query",
    "kernel-log",
    "engine-log",
    "ib-ports",
    "nccl-log",
    "nccl-tests",
    "metrics",
    "dcgmi-diag",
    "gpu-topology",
    "nvlink",
    "fabric-manager",
)
# Facts that describe the reading rather than the output: they differ between a wrapped and a bare text.
READING = ("coverage", "normalised", "warnings", "truncated", "truncated_bytes")


def _lines(prefix: str) -> Callable[[str], str]:
    def wrap(text: str) -> str:
        return "\n".join(prefix + line if line.strip() else line for line in text.split("\n"))

    return wrap


def _prompt(text: str) -> str:
    return "root@gpu-17:~# cat saved-output.txt\n" + text.rstrip("\n") + "\nroot@gpu-17:~# \n"


def _colour(text: str) -> str:
    return "\n".join(f"\x1b[0;36m{line}\x1b[0m" if line.strip() else line for line in text.split("\n"))


# family -> (the normaliser's family name, how a paste or a collector wraps an output)
WRAPPERS: dict[str, tuple[str, Callable[[str], str]]] = {
    "indent": ("indent", _lines("    ")),
    "quote": ("quote", _lines("> ")),
    "diff": ("diff", _lines("+")),
    "html-entities": ("html-entities", lambda text: html.escape(text, quote=True)),
    "crlf": ("crlf", lambda text: text.replace("\n", "\r\n")),
    "escapes": ("escapes", _colour),
    "prompt": ("prompt", _prompt),
    "open-mpi": ("launcher-prefix", _lines("[1,0]<stdout>:")),
    "rank-tag": ("launcher-prefix", _lines("[0] ")),
    "srun-label": ("launcher-prefix", _lines("3: ")),
    "cri": ("launcher-prefix", _lines("2024-01-01T00:00:00.123456789Z stdout F ")),
    "kubectl-prefix": ("launcher-prefix", _lines("[pod/vllm-0/engine] ")),
    "pdsh-host": ("launcher-prefix", _lines("gpu-17: ")),
    # Ray's driver-forwarded worker output, and SkyPilot's Ray-style tag of a multi-node job's worker
    "ray": ("launcher-prefix", _lines("(RayWorkerWrapper pid=4242, ip=10.0.0.2) ")),
    "skypilot": ("launcher-prefix", _lines("(worker1, rank=1, pid=4243, ip=10.0.0.3) ")),
    "syslog": ("syslog-prefix", _lines("Jan  2 03:04:05 gpu-17 nightowl-capture[4242]: ")),
    "collector-stamp": ("launcher-prefix", _lines("2024-06-25 12:27:29.905 ")),
}


def recorded(kind: str) -> list[Path]:
    """Every recorded output of ``kind`` with text in it, in fixtures/hosts."""
    found = sorted(HOSTS.glob(f"*/{kind}.out")) + sorted(HOSTS.glob(f"*/{kind}.[0-9].out"))
    return [path for path in found if path.read_text(errors="replace").strip()]


# Wrappers the normaliser reads as one of its launcher prefixes under another name (what KEPT_BY_KIND names).
SUBFAMILY = {"skypilot": "ray"}
# Per-line tags one line of text cannot show to be a wrapper (a bare "[0] " or "host: " may be the output's own).
NEEDS_LINES = frozenset({"rank-tag", "srun-label", "pdsh-host", "syslog", "collector-stamp"})


def applies(kind: str, family: str, text: str = "") -> bool:
    """Whether the normaliser unwraps ``family`` for ``kind`` (a kind whose parser reads it keeps it) and
    ``text`` (one line cannot show a bare tag to be a wrapper)."""
    kept = KEPT_BY_KIND.get(kind, frozenset())
    if WRAPPERS[family][0] in kept or SUBFAMILY.get(family, family) in kept:
        return False
    return family not in NEEDS_LINES or sum(1 for line in text.splitlines() if line.strip()) >= 2


def facts_of(kind: str, text: str) -> dict[str, Any]:
    collector = get_collector(kind)
    facts = collector.facts(collector.parse(text))
    return {name: value for name, value in facts.items() if name not in READING}


def wrapped_alike(kind: str, text: str, families: list[str]) -> tuple[bool, str]:
    """Whether ``text`` under each of ``families`` in turn reads as the bare text does, and the families the
    normaliser named (it must name each wrapper's family)."""
    wrapped = text
    for family in families:
        wrapped = WRAPPERS[family][1](wrapped)
    named = normalise(wrapped, kind).families
    same = facts_of(kind, wrapped) == facts_of(kind, text)
    return same, ", ".join(named)


CASES = [
    (kind, family, paths[-1])
    for kind in KINDS
    if (paths := recorded(kind))
    for family in WRAPPERS
    if applies(kind, family, paths[-1].read_text(errors="replace"))
]


def test_the_cases_cover_every_kind_and_family() -> None:
    assert {kind for kind, _, _ in CASES} == {kind for kind in KINDS if recorded(kind)}
    assert {family for _, family, _ in CASES} == set(WRAPPERS)
    assert len(CASES) >= 90


@pytest.mark.parametrize(("kind", "family", "path"), CASES, ids=[f"{k}-{f}-{p.parent.name}" for k, f, p in CASES])
def test_each_family_on_every_kind(kind: str, family: str, path: Path) -> None:
    text = path.read_text(errors="replace")
    same, named = wrapped_alike(kind, text, [family])
    assert same, f"{path} wrapped as {family} reads otherwise (normalised: {named})"
    if WRAPPERS[family][1](text) != text:  # html.escape leaves a text without <>&"' as it is
        assert WRAPPERS[family][0] in named.split(", "), f"{family} not named: {named}"


ALL = [(kind, path) for kind in KINDS for path in recorded(kind)]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    case=st.sampled_from(ALL),
    families=st.lists(st.sampled_from(sorted(WRAPPERS)), min_size=1, max_size=3, unique=True),
)
def test_wrapped_fixtures_read_alike(case: tuple[str, Path], families: list[str]) -> None:
    kind, path = case
    # Outside in, as a paste of a collector's output is wrapped: a launcher's tag, then a page or a terminal.
    order = ["cri", "kubectl-prefix", "ray", "skypilot", "open-mpi", "rank-tag", "srun-label", "pdsh-host", "syslog"]
    order += ["escapes"]
    order += ["prompt", "indent", "quote", "crlf", "html-entities"]
    text = path.read_text(errors="replace")
    chosen = [family for family in order if family in families and applies(kind, family, text)]
    launchers = [f for f in chosen if WRAPPERS[f][0] in ("launcher-prefix", "syslog-prefix")]
    chosen = [f for f in chosen if f not in launchers[1:]]  # one per-line tag: two are another format
    if not chosen:
        return
    same, named = wrapped_alike(kind, text, chosen)
    assert same, f"{path} wrapped as {chosen} reads otherwise (normalised: {named})"


@pytest.mark.integration
@pytest.mark.parametrize("family", sorted(WRAPPERS))
def test_every_recorded_output_in_every_family(family: str) -> None:
    missed = []
    checked = 0
    for kind, path in ALL:
        text = path.read_text(errors="replace")
        if not applies(kind, family, text):
            continue
        checked += 1
        same, named = wrapped_alike(kind, text, [family])
        if not same:
            missed.append(f"{path.relative_to(ROOT)} (normalised: {named})")
    assert checked > 100 and not missed, "\n".join(missed)


def test_an_output_as_the_command_printed_it_comes_back_unchanged() -> None:
    for kind, path in ALL[::7]:
        text = path.read_text(errors="replace")
        reading = normalise(text, kind)
        if not reading.families:
            assert reading.text is text
    plain = "NVRM: Xid (PCI:0000:3b:00): 79, pid=1, GPU has fallen off the bus.\n"
    assert normalise(plain, "kernel-log").text is plain and normalise(plain, "kernel-log").families == ()


def test_a_prefix_on_a_few_lines_is_no_wrapper() -> None:
    """A rank tag on one line of many is part of the output, not a launcher's wrapper."""
    text = "line one\nline two\n[0] tagged\nline four\nline five\n"
    assert "launcher-prefix" not in normalise(text, "engine-log").families
    interleaved = "gpu-1: a\ngpu-2: b\ngpu-1: c\ngpu-2: d\n"  # two hosts: no one output's wrapper
    assert "launcher-prefix" not in normalise(interleaved, "nvidia-smi").families
    levels = "INFO: Started server process [1]\nINFO: Waiting for application startup.\nINFO: Application started.\n"
    assert "launcher-prefix" not in normalise(levels, "engine-log").families  # a log level is no host


def test_real_markup_keeps_its_entities() -> None:
    xml = '<?xml version="1.0" ?>\n<nvidia_smi_log><driver_version>&lt;none&gt;</driver_version></nvidia_smi_log>\n'
    assert "html-entities" not in normalise(xml, "nvidia-smi").families
    escaped = html.escape(xml)
    reading = normalise(escaped, "nvidia-smi")
    assert "html-entities" in reading.families and reading.text.startswith("<?xml")
