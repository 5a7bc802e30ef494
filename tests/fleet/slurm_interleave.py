"""Adversarial interleaving of real `nightowl slurm drain` processes on the real slurmctld: ``sinfo`` and
``scontrol`` wrappers first on PATH that hold each process at its Slurm calls, then run the real tools.

Each process's first ``sinfo`` (its read before deciding) waits until every process has read; then one
process at a time may ``scontrol ... State=DRAIN``, in the given order, the next only after the one
before has read ``sinfo`` again (its confirmation). That is the interleaving in which ranking the drains
of one second by node name let every check keep its own: reverse name order. A wait that never ends
gives up after ``WATCHDOG_S`` (under nightowl's 30 s Slurm command timeout) and runs the tool anyway: the test then
judges the cap on what it finds, never a hang or a drain killed while it waited.
"""

from __future__ import annotations

import shutil
from pathlib import Path

# Under nightowl's own 30 s Slurm command timeout: a check that holds before it drains never takes its turn, and
# the next must then go on (its drain unforced) rather than be killed by nightowl's timeout as a failed drain.
WATCHDOG_S = 20

_COMMON = """#!/bin/bash
# written by tests/fleet/slurm_interleave.py
dir='{dir}'
me=$PPID
node() {{ tr '\\0' '\\n' < /proc/$me/cmdline | grep -A1 -x drain | tail -n 1; }}
wait_for() {{  # a condition (bash), polled, with a watchdog
  local i=0
  until eval "$1"; do i=$((i + 1)); [ "$i" -gt $(({watchdog} * 20)) ] && return 1; sleep 0.05; done
}}
"""

SINFO = (
    _COMMON
    + """calls=$(( $(cat "$dir/calls.$me" 2>/dev/null || echo 0) + 1 ))
echo "$calls" > "$dir/calls.$me"
if [ "$calls" = 1 ]; then
  : > "$dir/read.$me"
  wait_for '[ "$(ls "$dir" | grep -c "^read\\.")" -ge {count} ]'
fi
echo "$(date +%s.%N) $me sinfo $calls" >> "$dir/trace"
'{sinfo}' "$@"; rc=$?
if [ "$calls" = 2 ]; then  # this check has confirmed: the next in order may drain
  next=$(grep -A1 -x "$(node)" "$dir/order" | tail -n +2)
  echo "${{next:-none}}" > "$dir/turn.new" && mv "$dir/turn.new" "$dir/turn"
fi
exit $rc
"""
)

SCONTROL = (
    _COMMON
    + """case "$*" in
  *State=DRAIN*) mine=$(node); wait_for '[ "$(cat "$dir/turn" 2>/dev/null)" = "$mine" ]' ;;
esac
echo "$(date +%s.%N) $me scontrol $*" >> "$dir/trace"
exec '{scontrol}' "$@"
"""
)


def interleaving_bin(root: Path, order: list[str]) -> Path:
    """A folder to put first on PATH: the wrappers, holding len(order) processes to ``order``."""
    folder = root / "interleave-bin"
    state = root / "interleave-state"
    folder.mkdir()
    state.mkdir()
    (state / "order").write_text("".join(f"{n}\n" for n in order))
    (state / "turn").write_text(order[0] + "\n")
    fill = {"dir": state, "watchdog": WATCHDOG_S, "count": len(order)}
    for name, text in (("sinfo", SINFO), ("scontrol", SCONTROL)):
        real = shutil.which(name)
        assert real, f"{name} not installed"
        script = folder / name
        script.write_text(text.format(**fill, sinfo=shutil.which("sinfo"), scontrol=shutil.which("scontrol")))
        script.chmod(0o755)
    return folder
