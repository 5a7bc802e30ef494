"""A time fact's epoch seconds read as a time (issue 45 item 9): the text report printed first-look's
``replica_metrics.process_start_time`` and ``replica_health.server_time`` as ``1.79617e+09``."""

from __future__ import annotations

import re
import time
from pathlib import Path

from nightowl.cli.render import human, text_report
from nightowl.engine.bundle_summary import triage_summary
from nightowl.library.rehearse import rehearsal_cases, replay_case

ONE_RESTART = "read by URL only, one engine started 90 s before the look (no scrape saw the restart)"


def test_time_facts_print_as_utc_times_and_other_numbers_do_not() -> None:
    epoch = 1796167774.0
    shown = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(epoch))
    assert human(epoch, fact="replica_metrics.process_start_time") == shown
    assert human({"replica_health.server_time": epoch}) == f"replica_health.server_time: {shown}"
    assert human(epoch, fact="nvidia_smi.memory_used_bytes") == "1.79617e+09"  # a count stays a number
    assert human(12.5, fact="replica_metrics.process_start_time") == "12.5"  # not an epoch


def test_the_first_look_report_shows_no_float_epoch(tmp_path: Path) -> None:
    case = next(c for c in rehearsal_cases("first-look") if c["name"] == ONE_RESTART)
    summary = triage_summary(
        "first-look", "run-1", tmp_path / "run-1", replay_case("first-look", case, out_dir=tmp_path)
    )
    text = text_report(summary, verbose=True)
    assert "process_start_time" in text
    assert not re.search(r"\d\.\d+e\+0\d", text), [line for line in text.splitlines() if "e+0" in line]
    assert re.search(r"process_start_time on \S+: \d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC", text)
