"""Many hosts at once: which hosts (``inventory``), what sets them apart (``outliers``), and the
fleet views of a sweep (``table`` for people, ``textfile`` for node-exporter).

Nothing here parses options or prints; ``nightowl sweep`` and ``nightowl check`` (nightowl/cli)
call these, and so can any Python caller.
"""
