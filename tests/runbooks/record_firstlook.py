"""Record first-look rehearsal hosts from the loopback stand-in replicas (tests/runbooks/firstlook_standins.py).

    .venv/bin/python -m tests.runbooks.record_firstlook all-down slow ...   # or no name: every case below

Runs ``nightowl triage first-look --host r1 --host r2 --host r3`` on this machine against three
stand-ins staged with one fault, and copies each replica's recorded outputs from the bundle to
``fixtures/hosts/first-look-<case>-r<n>/`` with a SOURCE.md saying what is real and what is staged.
The rehearsal cases that replay them are in fixtures/rehearsals/first-look.yaml.
"""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from tests.runbooks.firstlook_standins import Replica, record_cases, replicas

NAMES = ("r1", "r2", "r3")
HOSTS = Path(__file__).resolve().parents[2] / "fixtures" / "hosts"
# vLLM V1's start-up line (vllm/entrypoints/utils.py log_non_default_args; format of
# fixtures/corpus/serving/vllm_v0.11.0_startup_args_gpu_util_0.98_qwen3vl_issue27466.txt)
ARGS_LINE = "(APIServer pid=8267) INFO 10-24 01:21:55 [utils.py:233] non-default args: {args}\n"


@dataclass
class Case:
    stage: Callable[[dict[str, Replica]], None]
    fault: str  # what SOURCE.md says was staged
    params: list[str] = field(default_factory=list)
    engine_args: dict[str, str] = field(default_factory=dict)  # host -> the dict text of its start-up line
    no_curl: bool = False


def _all(**values: object) -> Callable[[dict[str, Replica]], None]:
    def stage(specs: dict[str, Replica]) -> None:
        for replica in specs.values():
            for name, value in values.items():
                setattr(replica, name, value)

    return stage


def _one(host: str, **values: object) -> Callable[[dict[str, Replica]], None]:
    def stage(specs: dict[str, Replica]) -> None:
        for name, value in values.items():
            setattr(specs[host], name, value)

    return stage


FP8 = "{'model': '/models/Qwen2.5-Coder-32B-Instruct', 'max_model_len': 32768, 'kv_cache_dtype': 'fp8'}"
CASES: dict[str, Case] = {
    "cannot-judge": Case(
        _all(), "curl is not on the hosts: every command fails to start (no /health read)", no_curl=True
    ),
    "all-down-change": Case(
        _all(health_status=503, version="0.7.0"),
        "every replica answers 503 on /health and reports version 0.7.0; each engine's start-up line adds"
        " kv_cache_dtype fp8 (the rehearsal's baseline: 0.6.3, kv_cache_dtype auto)",
        engine_args=dict.fromkeys(NAMES, FP8),
    ),
    "all-down": Case(_all(health_status=503), "every replica answers 503 on /health, same release everywhere"),
    "partial-change": Case(
        _one("r3", health_status=503, version="0.6.4"), "r3 answers 503 on /health and reports version 0.6.4"
    ),
    "slow": Case(_one("r1", health_delay=1.2), "r1 answers /health after 1.2 s"),
    "restarted": Case(
        _one("r2", restart_at_scrape=1), "r2's second scrape shows a new process (start time and counters reset)"
    ),
    "evidence-missing": Case(_one("r2", metrics_status=404), "r2 answers 404 on /metrics (the others are healthy)"),
}

SOURCE = """# first-look-{case}-{host}

Recorded from a loopback stand-in replica (tests/runbooks/firstlook_standins.py) by running the
first-look runbook on three of them (r1, r2, r3) with tests/runbooks/record_firstlook.py. Staged fault:
{fault}.

The /metrics scrapes carry vLLM's metric names and HELP texts (fixtures/corpus/serving:
vllm_metrics_v0.5.x_help_type_only_metric_inventory_functionary_pr263.txt), TTFT buckets and starting
counts of vllm_metrics_tgis_fork_bloom560m_ibm_vllm_pr18_part_tokens_ttft.txt and TPOT buckets and counts
of vllm_metrics_v0_qwen32b_prodstack318_part2_tpot_histogram.txt; the requests added per window, the
gauges, /health, /version and /v1/models answers are composed to stage the fault (not recorded from a
real incident). nvidia-smi-query.out is empty: the recording machine has no nvidia-smi, the command
could not start (its error is in the bundle's trace.json, not here), so no GPU model was compared.{extra}
"""
ENGINE_LOG_NOTE = """ engine-log.out is one line in the format of vLLM V1's start-up "non-default args" line
(fixtures/corpus/serving/vllm_v0.11.0_startup_args_gpu_util_0.98_qwen3vl_issue27466.txt), values composed."""
NO_CURL_NOTE = """ Here no command could start (PATH without curl): every output is empty, which is
how a bundle keeps a command that never ran; nothing was read from any replica."""


def record(name: str, case: Case, tmp: Path) -> None:
    from click.testing import CliRunner

    import nightowl.transports as transports
    from nightowl.cli.main import main
    from nightowl.transports.local import LocalTransport

    specs = {n: Replica() for n in NAMES}
    case.stage(specs)
    transports.open_transport = lambda spec, options=None: LocalTransport(spec)  # type: ignore[assignment]
    argv = ["triage", "first-look", *[a for n in NAMES for a in ("--host", n)], "--out", str(tmp), *case.params]
    if case.engine_args:
        logs = {}
        for host, text in case.engine_args.items():
            logs[host] = tmp / f"{host}.log"
            logs[host].write_text(ARGS_LINE.format(args=text))
        argv += ["--param", "engine_log_file={" + ", ".join(f"{h}: {p}" for h, p in logs.items()) + "}"]
    path = os.environ["PATH"]
    with replicas(specs):
        base = "{" + ", ".join(f"{n}: {r.url}" for n, r in specs.items()) + "}"
        argv += ["--param", f"base_url={base}", "--param", "window_seconds=0", "--format", "json"]
        if case.no_curl:
            os.environ["PATH"] = str(tmp)
        try:
            result = CliRunner().invoke(main, argv)
        finally:
            os.environ["PATH"] = path
    bundle = next(p for p in tmp.iterdir() if p.is_dir() and (p / "hosts").is_dir())
    for host in NAMES:
        target = HOSTS / f"first-look-{name}-{host}"
        shutil.rmtree(target, ignore_errors=True)
        shutil.copytree(bundle / "hosts" / host, target)
        extra = (ENGINE_LOG_NOTE if case.engine_args else "") + (NO_CURL_NOTE if case.no_curl else "")
        (target / "SOURCE.md").write_text(SOURCE.format(case=name, host=host, fault=case.fault, extra=extra))
    print(f"{name}: exit {result.exit_code}", file=sys.stderr)


if __name__ == "__main__":
    record_cases(sys.argv[1:], CASES, record)
