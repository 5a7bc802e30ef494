"""LLM-serving arithmetic shared by collectors, runbooks and the CLI: histogram windows, KV-cache sizing, the gate.

Pure functions only (no I/O): ``histogram`` (delta, quantile, window_mean over cumulative
Prometheus histograms), ``kv_size`` (KV bytes per token from config.json, max concurrency) and
``bench_compare`` (a benchmark run against a baseline, the per-release regression gate).
"""
