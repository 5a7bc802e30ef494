"""Serving-engine evidence (vLLM, SGLang, TGI): /metrics, engine logs, containers, benchmarks, probes."""
