"""`nightowl check` on one real-size node: CPU (start-up included), wall, peak RSS and verdict (issue 22).

Serves one node's recorded outputs at real size (bench/real_evidence.py: an 8-GPU `nvidia-smi -q -x` and `-q`, a
0.8 MB boot log and two earlier boots, NVLink status) through bench/sweep.py's Fleet stand-ins on PATH,
then runs `nightowl check --format json` as a child process ``--repeat`` times in each of four modes
(interleaved):
  cold/warm: the validated-runbook cache (docs/reference.md#the-runbook-cache) empty before every run,
             or filled by a run before the timed ones;
  pyc/no-pyc: nightowl's own modules imported from .pyc files (as pip installs them), or compiled from
             source on every run (as bench/sweep.py's --check row, PYTHONDONTWRITEBYTECODE=1, ran before
             issue 22); the stdlib and dependencies keep their .pyc files in both. Bytecode goes to a
             PYTHONPYCACHEPREFIX folder of the bench's own, so no checkout is written to.
CPU is the child's: its own process (user + system of its threads, written by the child at exit), and
with the tools it ran (wait4: its children included, which here are the fleet's stand-ins, shell scripts
that print the recorded outputs, where a node runs nvidia-smi and journalctl); this process's and sshd's
costs are never counted. Prints one table row per mode (median, min and max of the runs).

    .venv/bin/python bench/check.py [--repeat 5] [--modes warm-pyc,cold-pyc,warm-no-pyc,cold-no-pyc] [--code DIR]

``--code DIR`` times the nightowl of another checkout (e.g. the commit before a change) with this bench.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.real_evidence import recorded_host, serve_real_size  # noqa: E402
from bench.sweep import Fleet, code_env, run_nightowl  # noqa: E402

MODES = ("warm-pyc", "cold-pyc", "warm-no-pyc", "cold-no-pyc")
TARGET_CPU_S = 0.5


Run = tuple[float, float, float, float, str]  # CPU s with the tools it ran, its own CPU s, wall s, peak RSS MB, verdict


def one_check(fleet: Fleet, name: str, folder: Path, pyc: bool, code: Path) -> Run:
    """One `nightowl check` as if on ``name``, its cache and bytecode in ``folder``: (CPU s with the tools it
    ran, CPU s of nightowl's process alone, wall s, peak RSS MB, verdict id or why none)."""
    ip, port = fleet.addresses[name]
    env = {
        "PATH": f"{fleet.root / 'bin'}:{os.environ.get('PATH', '/usr/bin:/bin')}",
        "SSH_CONNECTION": f"127.0.0.1 40000 {ip} {port}",
        "NODE_NAME": name,
        "NIGHTOWL_CACHE_DIR": str(folder / "cache"),
        **code_env(code),
        "PYTHONPYCACHEPREFIX": str(folder / "pyc"),
        "PYTHONDONTWRITEBYTECODE": "" if pyc else "1",  # empty: bytecode is written and read
    }
    if not pyc:  # nightowl's own bytecode dropped; the prefix mirrors absolute paths
        shutil.rmtree(folder / "pyc" / code.relative_to("/") / "nightowl", ignore_errors=True)
    out = folder / "out"
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    args = ["check", "--format", "json", "--out", str(out), "--history", str(out / "history.db")]
    own_file = folder / "own-cpu"
    own_file.unlink(missing_ok=True)
    wall, cpu, rss, code_, stdout, stderr = run_nightowl(args, env, own_cpu=own_file)
    own = float(own_file.read_text()) if own_file.exists() else float("nan")
    try:
        verdict = str((json.loads(stdout)["hosts"][0].get("verdict") or {}).get("id"))
    except (ValueError, KeyError, IndexError):
        verdict = f"no report (exit {code_}): {(stderr.strip().splitlines() or ['?'])[-1][:100]}"
    return cpu, own, wall, rss, verdict


def run_modes(fleet: Fleet, name: str, root: Path, modes: list[str], repeat: int, code: Path) -> list[str]:
    """``repeat`` rounds of one timed check per mode (interleaved, so a burst of load elsewhere falls on
    every mode alike); one Markdown table row per mode. Each mode has its own cache and bytecode folder,
    and an untimed first run writes the .pyc files (the stdlib's and dependencies' in every mode) and
    fills the cache."""
    runs: dict[str, list[Run]] = {mode: [] for mode in modes}
    for mode in modes:
        one_check(fleet, name, root / mode, True, code)
    for _ in range(repeat):
        for mode in modes:
            if mode.startswith("cold"):
                shutil.rmtree(root / mode / "cache", ignore_errors=True)
            runs[mode].append(one_check(fleet, name, root / mode, not mode.endswith("no-pyc"), code))
    rows = []
    for mode, results in runs.items():
        rows.append(
            f"| {mode} | {_spread([r[1] for r in results])} | {_spread([r[0] for r in results])} "
            f"| {statistics.median(r[2] for r in results):.3f} | {max(r[3] for r in results):.0f} "
            f"| {', '.join(sorted({r[4] for r in results}))} |"
        )
    return rows


def _spread(values: list[float]) -> str:
    return f"{statistics.median(values):.3f} ({min(values):.3f}-{max(values):.3f})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5, help="timed runs per mode")
    parser.add_argument("--modes", default=",".join(MODES), help=f"comma list of {', '.join(MODES)}")
    parser.add_argument("--code", type=Path, default=ROOT, help="the checkout whose nightowl is timed")
    args = parser.parse_args()
    modes = [m for m in args.modes.split(",") if m]
    unknown = sorted(set(modes) - set(MODES))
    if unknown:
        parser.error(f"unknown mode(s) {', '.join(unknown)}")
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        recorded = recorded_host(root / "real-size-host")
        name = "node-0000"
        with Fleet(root / "fleet", {name: recorded}) as fleet:
            serve_real_size(fleet, [name])
            rows = run_modes(fleet, name, root, modes, args.repeat, args.code.resolve())
    load = os.getloadavg()[0]
    print(f"nightowl check on one real-size node ({args.code}), repeat={args.repeat}, load {load:.1f} at the end")
    print(
        "| mode | nightowl's process CPU s median (min-max) | with the tools it ran (wait4) "
        "| wall s median | peak RSS MB | verdict |"
    )
    print("|---|---|---|---|---|---|")
    for row in rows:
        print(row)
    print(f"target: <= {TARGET_CPU_S} s CPU in all, start-up included")


if __name__ == "__main__":
    main()
