"""LLM-serving arithmetic shared by collectors and runbooks: histogram windows and KV-cache sizing.

Pure functions only (no I/O): ``histogram`` (delta, quantile, window_mean over cumulative
Prometheus histograms) and ``kv_size`` (KV bytes per token from config.json, max concurrency).
"""
