"""The runbook engine: load and validate decision graphs, run them on hosts, write bundles.

It imports nothing GPU-specific and nothing from the CLI.
"""
