"""Engine-log times and metric windows on the timeline, from real serving outputs in the corpus."""

from __future__ import annotations

import shutil
from pathlib import Path

from nightowl.paths import data_dir
from nightowl.postmortem import bundle_context, render_bundle
from tests.postmortem.bundles import make_bundle, section

SERVING = data_dir("fixtures") / "corpus" / "serving"
RUNBOOK = """\
id: serving-draft-test
title: engine log, then two metric scrapes
parameters:
  engine_log_file: {default: /var/log/tgi.log}
  metrics_url: {default: "http://10.20.0.8:8080/metrics"}
entry: first
nodes:
  first:
    collect: [engine-log, "metrics:before"]
    next: second
  second:
    collect: ["metrics:after"]
    next: decide
  decide:
    decide:
      - when: "(engine_log.has_oom | default(false)) == true"
        goto: engine-oom
    default: fine
  engine-oom:
    verdict:
      id: engine-oom
      severity: critical
      action: reconfigure
      summary: "The engine ran out of GPU memory in phase {{ engine_log.oom_phase }}."
      evidence: [engine_log.oom]
  fine:
    verdict: {id: fine, severity: ok, action: none, summary: "nothing found (engine log {{ status.engine_log }})"}
"""


def serving_bundle(tmp_path: Path) -> Path:
    host = tmp_path / "hosts" / "tgi-node-3"
    host.mkdir(parents=True)
    # TGI 1.3 log: warmed up, then CUDA OOM in prefill at 2023-12-22T00:21:35Z (huggingface/tgi#1374).
    shutil.copy(SERVING / "tgi_runtime_prefill_cuda_oom_after_warmup_issue1374.txt", host / "engine-log.out")
    scrape = SERVING / "vllm_metrics_v0.5.3_llama3_70b_h100_ttft_count_vs_success_issue8115.txt"
    shutil.copy(scrape, host / "metrics.1.out")
    shutil.copy(scrape, host / "metrics.2.out")
    runbook = tmp_path / "serving.yaml"
    runbook.write_text(RUNBOOK)
    return make_bundle(tmp_path / "out", ["tgi-node-3"], runbook=str(runbook), host_root=tmp_path / "hosts")


def test_engine_log_times_and_metric_windows(tmp_path: Path) -> None:
    bundle = serving_bundle(tmp_path)
    context = bundle_context(bundle)
    engine = [m for m in context["timeline"] if m["what"].startswith("engine log:")]
    assert engine, "no engine-log line placed on the timeline"
    assert all(m["clock"] == "host log (UTC offset written)" for m in engine)  # TGI writes ...Z times
    assert engine[0]["shown"] == "2023-12-22T00:21:35.318928Z" and "ERROR" in engine[0]["what"]
    whats = [m["what"] for m in context["timeline"]]
    # The two scrapes are part of nightowl's own run (one row); what changed between them is a row.
    assert sum(w.startswith("metric window of") for w in whats) == 1
    assert sum(w.startswith("nightowl ran runbook") for w in whats) == 1
    assert [m["epoch"] for m in context["timeline"]] == sorted(m["epoch"] for m in context["timeline"])
    text = render_bundle(bundle)
    assert "engine out of memory in phase" in section(text, "Impact")
    assert "`engine-oom`" in section(text, "Root causes")
    assert "serving replica(s) (tgi-node-3)" in section(text, "Impact")
