"""Issue 14 item 3: the nvidia-smi XML fallback and the dcgmi JSON-block finder are linear (deeply nested
or unclosed tags; millions of short lines)."""

from __future__ import annotations

import pytest

from nightowl.collectors import get_collector
from nightowl.collectors.gpu.dcgmi_diag import parse as parse_dcgmi
from nightowl.collectors.gpu.nvidia_smi.tree import build_xml_tree_leniently
from tests.hostile.watchdog import watchdog

XML_INPUTS = [
    "<nvidia_smi_log>" + "<a>" * 200_000 + "</b>" * 200_000,  # deep, every closing tag a stray
    "<nvidia_smi_log>" + "<!--" * 200_000,  # unclosed comments
    "<nvidia_smi_log>" + "<!x" * 300_000,  # unclosed declarations
    "<nvidia_smi_log>" + "<a " * 300_000,  # unclosed tags
    '<?xml version="1.0"?><nvidia_smi_log>' + "<gpu id='1'><x>1</x>" * 50_000,  # never closed
]


@pytest.mark.parametrize("text", XML_INPUTS, ids=lambda t: t[16:24])
def test_lenient_xml_reading_is_linear(text: str) -> None:
    with watchdog():
        build_xml_tree_leniently(text)
        result = get_collector("nvidia-smi").parse(text)
    assert result.warnings, "broken XML must be reported, not read as a clean result"


def test_lenient_xml_still_closes_what_it_can() -> None:
    root = build_xml_tree_leniently("<nvidia_smi_log><gpu id='00000000:01:00.0'><a><b>7</b></x></a><c>8</c>")
    gpu = root.children[0]
    assert [child.label for child in gpu.children] == ["a", "c"]


DCGMI_INPUTS = [
    "x\n" * 2_000_000,  # millions of short lines
    '{"a":\n' * 200_000,  # every line opens an object that never closes
    "{\n" * 500_000,
    "[" * 100_000 + "\n" + "{" * 100_000,  # nested deeper than the stack
]


@pytest.mark.parametrize("text", DCGMI_INPUTS, ids=lambda t: repr(t[:8]))
def test_dcgmi_json_block_finder_is_linear(text: str) -> None:
    with watchdog():
        result = parse_dcgmi(text)
    assert result.overall == "not_run" and not result.complete and result.warnings  # garbage is no diagnostic


def test_dcgmi_json_blocks_are_still_found_after_garbage() -> None:
    from nightowl.collectors.gpu.dcgmi_diag import _json_blocks

    text = '{ not json\n{"version": "3.3"}\nnoise\n  {"a": [1,\n2]}\n'
    blocks, covered = _json_blocks(text)
    assert blocks == [{"version": "3.3"}, {"a": [1, 2]}]
    assert covered == {1, 3, 4}
