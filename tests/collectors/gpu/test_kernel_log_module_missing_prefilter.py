"""The kernel-log parser tests its two literal hints before the "nvidia module missing" search
(kernel_log/parser.py ``driver_module_missing``): the same answer as the search over the whole text, on
every recorded output and on mixtures of the message's pieces."""

from __future__ import annotations

from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from nightowl.collectors.gpu.kernel_log import parser

FIXTURES = Path(__file__).resolve().parents[3] / "fixtures"
RECORDED = sorted(p for p in FIXTURES.rglob("*") if p.is_file() and p.suffix in (".out", ".txt", ".log"))


def whole_text_search(text: str) -> bool:
    return "nvidia" in text and parser._MODULE_MISSING.search(text) is not None


def test_same_answer_on_every_recorded_output() -> None:
    assert len(RECORDED) > 100
    answers = {}
    for path in RECORDED:
        text = path.read_text(encoding="utf-8", errors="surrogateescape")
        answers[path] = parser.driver_module_missing(text)
        assert answers[path] == whole_text_search(text), path
    assert any(answers.values())  # the recordings of a missing module are among them


PIECES = [
    "modprobe: FATAL: Module nvidia",
    "modprobe: FATAL: Module nvidia-uvm not found in directory /lib/modules/5.4",
    "modprobe: FATAL: Module nvidia_drm",
    " not found",
    "Failed to find module 'nvidia",
    "Failed to find module 'nvidia-uvm'",
    "Failed to find module 'nv",
    "modprobe: FATAL: Module ",
    "nvidia",
    "\n",
    " ",
    "\t",
    "x",
]


@settings(max_examples=400, deadline=None)
@given(st.lists(st.one_of(st.sampled_from(PIECES), st.text(max_size=6)), max_size=12).map("".join))
def test_same_answer_on_mixtures(text: str) -> None:
    assert parser.driver_module_missing(text) == whole_text_search(text)


def test_parse_reports_a_missing_module() -> None:
    text = "Jan 1 00:00:00 h kernel: x\nmodprobe: FATAL: Module nvidia not found in directory /lib/modules/6.1\n"
    assert parser.parse(text).driver_module_missing is True
    assert parser.parse(text.replace("FATAL", "fatal")).driver_module_missing is False
