"""nccl-tests: several tests in one output are each named as themselves; every leading-column layout."""

from __future__ import annotations

import pytest

from nightowl.collectors.nccl import nccl_tests
from tests.helpers import ROOT

TWO_TESTS = """\
# Collective test starting: all_reduce_perf
#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong
     1048576        262144     float     sum      -1    20.10   52.17   97.82      0    20.00   52.43   98.31      0
# Avg bus bandwidth    : 97.8
./build/all_gather_perf -b 8 -e 1M -g 8
#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong
     1048576         32768     float    none      -1    15.00   69.91   61.17      0    14.90   70.37   61.58      0
# Avg bus bandwidth    : 61.2
"""


def test_concatenated_tests_name_each_row() -> None:
    facts = nccl_tests.facts(nccl_tests.parse(TWO_TESTS))
    assert [row["collective"] for row in facts["rows"]] == ["all_reduce", "all_gather"]
    assert facts["collectives"] == ["all_reduce", "all_gather"]
    assert facts["collective"] == "all_reduce"
    assert any("2 tests in one output" in w for w in facts["warnings"])


def test_a_name_after_the_rows_does_not_rename_them() -> None:
    text = TWO_TESTS.split("./build")[0] + "./build/broadcast_perf -b 8\n"
    facts = nccl_tests.facts(nccl_tests.parse(text))
    assert [row["collective"] for row in facts["rows"]] == ["all_reduce"]


@pytest.mark.parametrize(
    ("cells", "redop", "root"),
    [
        ("sum      -1", "sum", -1),  # 2.10+
        ("sum", "sum", None),  # older all_reduce
        ("0", None, 0),  # older broadcast/reduce: root only
        ("", None, None),  # older all_gather / sendrecv, or alltoall's empty redop cell
    ],
)
def test_leading_columns_of_every_layout(cells: str, redop: str | None, root: int | None) -> None:
    line = f"  1024   256   float   {cells}   7.09    0.14    0.14  0e+00     7.09    0.14    0.14  0e+00"
    row = nccl_tests.parse(line).rows[0]
    assert (row.redop, row.root) == (redop, root)
    assert row.out_of_place is not None and row.out_of_place.max_error == 0.0 and row.out_of_place.wrong is None


def test_wrong_count_and_na_cells() -> None:
    line = "  1024   256   float   sum   -1   7.09    0.14    0.14      3     7.09    0.14    0.14    N/A"
    row = nccl_tests.parse(line).rows[0]
    assert row.out_of_place is not None and row.out_of_place.wrong == 3
    assert row.in_place is not None and row.in_place.wrong is None and row.in_place.max_error is None


def test_three_leading_cells_are_unreadable() -> None:
    line = "  1024   256   float   sum   -1   x   7.09    0.14    0.14  0     7.09    0.14    0.14  0"
    result = nccl_tests.parse(line)
    assert result.rows == [] and result.warnings


def test_every_rank_failing_on_a_busy_gpu_is_read_not_empty() -> None:
    """Issue 23.9: ranks that stopped on CUDA "busy or unavailable" are evidence (gpu_busy), not a blank output."""
    from nightowl.collectors import get_collector
    from nightowl.engine.output_status import shows_nothing

    collector = get_collector("nccl-tests")
    text = (ROOT / "fixtures/hosts/nccl-tests-gpus-busy-a/nccl-tests.out").read_text()
    assert not shows_nothing(collector, text)
    data = collector.facts(collector.parse(text))
    assert data["gpu_busy"] and data["gpu_busy_failures"] == 2 and data["rows"] == []
    assert shows_nothing(collector, "# nThread 1 nGpus 1\n#\n")  # nothing measured, nothing said: still no_data
    healthy = collector.facts(collector.parse((ROOT / "fixtures/hosts/nccl-busbw-low/nccl-tests.out").read_text()))
    assert not healthy["gpu_busy"]
