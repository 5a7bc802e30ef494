"""Many hosts at once: which hosts (``inventory``), the sweep itself as a library call (``sweep``: a
``SweepResult``), what sets hosts apart (``outliers``), the fleet views of a sweep (``table`` for people,
``textfile`` for node-exporter), and the scheduler actions on nodes (``scheduler_actions``, one outcome per node).

Nothing here parses options or prints; ``nightowl sweep``, ``nightowl check`` and ``nightowl slurm`` (nightowl/cli)
call these, and so can any Python caller.
"""
