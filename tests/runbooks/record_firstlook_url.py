"""Record first-look rehearsal hosts read by URL only (``triage first-look --replica NAME=URL``).

    .venv/bin/python -m tests.runbooks.record_firstlook_url            # every case below

As tests/runbooks/record_firstlook.py, but the three stand-ins are reached over HTTP from this machine
(nightowl/transports/http.py), so ``replica-health.out`` keeps each answer's headers (its ``Date``: the
replica's clock) and what needs the node (container state, engine log, GPUs) is not in the recording.
Copies each replica's outputs to ``fixtures/hosts/first-look-<case>-r<n>/`` with a SOURCE.md.
"""

from __future__ import annotations

import shutil
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.runbooks.firstlook_standins import Replica, Window, record_cases, render, replicas

NAMES = ("r1", "r2", "r3")
HOSTS = Path(__file__).resolve().parents[2] / "fixtures" / "hosts"


class FreshReplica(Replica):
    """A replica whose engine process started ``age`` seconds before now (a deploy, a crash-restart)
    before the first scrape: its counters start at zero and never go back within the look."""

    def __init__(self, age: float, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.started = time.time() - age

    def scrape(self) -> str:
        index = min(self.scrapes, len(self.windows) - 1)
        self.scrapes += 1
        return render(self.windows[: index + 1], self.started, fresh=True)


@dataclass
class Case:
    specs: Callable[[], dict[str, Replica]]
    fault: str


CASES: dict[str, Case] = {
    "fresh-start": Case(
        lambda: {"r1": Replica(), "r2": Replica(), "r3": FreshReplica(90)},
        "r3's engine process started 90 s before the first scrape (its process_start_time_seconds against"
        " its Date header); no scrape in the look sees a restart",
    ),
    "mixed": Case(
        lambda: {
            "r1": Replica(),
            "r2": Replica(health_status=503),
            "r3": Replica(windows=[Window(), Window(), Window(ttft=0.12)]),
            "r4": FreshReplica(90),
        },
        "r2 answers 503 on /health; r3's TTFT rises about 4x in the last half window (flat traffic); r4, healthy,"
        " started its engine process 90 s before the first scrape (issue 45.1)",
    ),
    "deploy-down": Case(
        lambda: {n: FreshReplica(240, health_status=503) for n in NAMES},
        "every replica answers 503 on /health; every engine process started 240 s before the look (a deploy)",
    ),
}

SOURCE = """# first-look-{case}-{host}

Recorded from a loopback stand-in replica (tests/runbooks/firstlook_standins.py) reached by URL only
(`nightowl triage first-look --replica r1=URL ...`, tests/runbooks/record_firstlook_url.py). Staged fault:
{fault}.

The /metrics scrapes carry vLLM's metric names and HELP texts (fixtures/corpus/serving:
vllm_metrics_v0.5.x_help_type_only_metric_inventory_functionary_pr263.txt), TTFT buckets of
vllm_metrics_tgis_fork_bloom560m_ibm_vllm_pr18_part_tokens_ttft.txt and TPOT buckets of
vllm_metrics_v0_qwen32b_prodstack318_part2_tpot_histogram.txt; the requests added per window, the gauges,
the start time, /health, /version and /v1/models answers are composed to stage the fault (not recorded from
a real incident). replica-health.out keeps the HTTP headers of each answer (curl -i). No node was read:
nvidia-smi-query.out is empty (the command was refused over --replica: it needs the node), and there is
no container-state or engine-log output.
"""


def record(name: str, case: Case, tmp: Path) -> None:
    from click.testing import CliRunner

    from nightowl.cli.main import main

    specs = case.specs()
    with replicas(specs):
        argv = ["triage", "first-look", *[a for n, r in specs.items() for a in ("--replica", f"{n}={r.url}")]]
        argv += ["--param", "window_seconds=0", "--out", str(tmp), "--format", "json"]
        result = CliRunner().invoke(main, argv)
    bundle = next(p for p in tmp.iterdir() if p.is_dir() and (p / "hosts").is_dir())
    for host in specs:
        target = HOSTS / f"first-look-{name}-{host}"
        shutil.rmtree(target, ignore_errors=True)
        shutil.copytree(bundle / "hosts" / host, target)
        (target / "SOURCE.md").write_text(SOURCE.format(case=name, host=host, fault=case.fault))
    print(f"{name}: exit {result.exit_code}", file=sys.stderr)


if __name__ == "__main__":
    record_cases(sys.argv[1:], CASES, record)
