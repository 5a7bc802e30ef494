"""nccl-tests tables pasted without their header line, and rows cut by a launcher's tag (issue "never cry wolf":
read the format family, not the file). The rows below are real nccl-tests rows (all_reduce_perf on 2x p5, 16
ranks; the interleaved tags as Open MPI's --tag-output printed them in NVIDIA/nccl#1453)."""

from __future__ import annotations

import pytest

from nightowl.collectors.normalise import normalise
from tests.helpers import facts_of

ALL_REDUCE_16 = """\
#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong
 1073741824     268435456     float     sum      -1   4420.6  242.89  455.42      0   4419.2  242.97  455.56      0
 2147483648     536870912     float     sum      -1   8555.1  251.02  470.67      0   8554.3  251.04  470.70      0
"""


def parsed(text: str) -> dict:
    return facts_of("nccl-tests", text)


def test_a_reduction_with_no_root_and_busbw_above_algbw_is_all_reduce() -> None:
    facts = parsed(ALL_REDUCE_16)
    assert (facts["collective"], facts["collective_source"]) == ("all_reduce", "table")
    assert facts["collectives"] == ["all_reduce"]


def test_busbw_below_algbw_is_reduce_scatter() -> None:
    # reduce_scatter over 16 ranks: busbw = algbw * 15/16
    text = ALL_REDUCE_16.replace("455.42", "227.71").replace("455.56", "227.78")
    text = text.replace("470.67", "235.33").replace("470.70", "235.35")
    assert parsed(text)["collective"] == "reduce_scatter"


@pytest.mark.parametrize(
    "change",
    [
        ("     sum      -1", "    none      -1"),  # all_gather and alltoall share every column
        ("     sum      -1", "     sum       0"),  # a root: reduce or broadcast
    ],
)
def test_a_table_its_columns_do_not_settle_names_no_test(change: tuple[str, str]) -> None:
    facts = parsed(ALL_REDUCE_16.replace(*change))
    assert facts["collective"] is None and facts["collective_source"] is None


def test_rows_too_small_to_compare_name_no_test() -> None:
    facts = parsed(
        "  32   8  float  sum  -1  10.14  0.00  0.00  0  10.21  0.00  0.00  0\n"
        "  64  16  float  sum  -1  10.14  0.01  0.01  0  10.31  0.01  0.01  0\n"
    )
    assert facts["collective"] is None and facts["collective_source"] is None


def test_a_header_still_names_the_test() -> None:
    facts = parsed("# Collective test starting: all_gather_perf\n" + ALL_REDUCE_16)
    assert (facts["collective"], facts["collective_source"]) == ("all_gather", None)


def test_a_tag_written_before_each_printf_piece_is_taken_out_of_the_row() -> None:
    tagged = "\n".join(
        "[0]" + line.replace("     -1 ", "     -1[0] ", 1).replace("      0   ", "      0[0]   ", 1)
        for line in ALL_REDUCE_16.splitlines()
    )
    out = normalise(tagged, "nccl-tests")
    assert "[0]" not in out.text and "launcher-prefix" in out.families
    facts = parsed(tagged)
    assert len(facts["rows"]) == 2 and facts["rows"][0]["in_place"]["busbw"] == 455.56


def test_an_index_in_the_text_is_not_a_glued_tag() -> None:
    text = "[0] outputs[0] is None\n[0] ranks[0] done\n[0] loss[0] 2.5\n"
    assert normalise(text, "engine-log").text == "outputs[0] is None\nranks[0] done\nloss[0] 2.5\n"
