"""`nightowl watch`: follow the kernel log and judge each burst of trigger lines within seconds.

``source`` (and ``file_source``, ``kmsg_source``, ``journal_source``) read lines; ``triggers`` says which
lines open a burst, by the kernel-log parser's own reading; ``burst`` debounces them; ``daemon`` runs the
follower and the one-at-a-time runner; ``state`` keeps the position and the health file; ``evidence``
adds a burst's lines to the run's kernel-log evidence. The CLI (nightowl/cli/watch_cmd.py) wires them
and holds the one call into the run path.
"""
