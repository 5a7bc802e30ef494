"""Sweep benchmark: nightowl's node-health sweep against a bare paramiko thread pool.

Starts a loopback fleet of real OpenSSH servers (tests/ssh/fleet.py) whose `nvidia-smi` stand-in
takes 0.4 s, plus (``--unreachable N``) addresses with nothing listening (127.0.x.y, connection
refused at once), spread through the inventory, then times, in each round:
  (a) a bare paramiko thread pool: per reachable host one connection, the command lines nightowl's
      node-health sends (node_health_commands) on concurrent channels, outputs read and dropped;
  (b) the same pool dialling every inventory host, the unreachable ones failing on connect (the pool
      "doing the same" as the sweep: it cannot know which hosts are down before dialling them);
  (c) `nightowl sweep --runbook node-health` over the whole inventory (parsing, deciding, bundle);
  (d) with --floor, the pool of (a) or (b) also doing the least the issue asks of each output
      (``floor_work``: the lines that may hold a secret found, a SHA-256, a file, a C parse): what keeping
      what was read costs before anything is decided, in this process (no start-up counted).
Prints one table row per --forks value (a comma list): the verdict errors of each round (a live host not
"healthy", a dead one not "unreachable"), the median wall times of the pool and the sweep and their ratio
(target: nightowl within 1.2x), the sweep's CPU per live host beside the bare pool's (the transport's own
cost, in this process: the floor under the 30 ms target) and the sweep's peak RSS. The sweep runs as a child
process, so both are its own (wait4; start-up included), never this process's or sshd's. On a 2-core machine
sshd's crypto shares the cores with the client, so the ratio is what counts. --check also times `nightowl
check` on one node (the fleet's stand-ins on PATH serve it). Figures: bench/README.md.

    .venv/bin/python bench/sweep.py [--hosts 64] [--unreachable 0] [--forks 8,32,64] [--repeat 3]
    .venv/bin/python bench/sweep.py --hosts 64 --unreachable 936      # the 1,000-host case
    .venv/bin/python bench/sweep.py --evidence real --hosts 32 --check  # an 8-GPU node's outputs at real size
    .venv/bin/python bench/sweep.py --evidence real --hosts 32 --floor  # and the floor under any sweep
    .venv/bin/python bench/sweep.py --evidence real --hosts 32 --code /tmp/before  # another checkout's nightowl
    .venv/bin/python bench/sweep.py --evidence real --hosts 32 --steady  # first round vs steady state (issue 46)
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.fleet_run import FleetRun  # noqa: E402
from bench.real_evidence import NVIDIA_SMI_SECONDS  # noqa: E402
from tests.ssh.fleet import Fault, Fleet  # noqa: E402


def node_health_commands() -> list[str]:
    """The command lines nightowl's node-health sends: each command collector of its `collect` node, its
    first runnable alternative with the runbook's default parameters, wrapped as SSHTransport wraps it
    (coreutils `timeout`, so the host ends a hung command itself). The bare pool sends exactly these, so
    both sides ask the hosts for the same work (derived collectors run no command)."""
    from nightowl.collectors import get_collector
    from nightowl.engine.model import split_entry
    from nightowl.engine.runner import resolve_argv
    from nightowl.library import runbooks
    from nightowl.transports.ssh import remote_command

    loaded = runbooks.load("node-health")
    params = loaded.resolve_params({})
    lines = []
    for entry in loaded.runbook.nodes[loaded.runbook.entry].collect or []:
        collector = get_collector(split_entry(entry)[0])
        if getattr(collector, "inputs", None):
            continue
        argv = next((a for t in collector.commands if (a := resolve_argv(t, params)) is not None), None)
        if argv is not None:
            lines.append(remote_command(argv, collector.timeout))
    return lines


def floor_work(folder: Path) -> Callable[[int, bytes], None]:
    """What the issue asks a sweep to do with every output, done the cheapest way known here, and nothing
    else: the lines that may hold a secret found (nightowl's own trigger-line scan, 50x faster than the one
    case-insensitive regular-expression pass issue 22 names as the bar, which alone costs ~0.35 s a
    real-size host), a SHA-256, a file written, and a parse where C does it (the XML through expat into an
    ElementTree; any other text split into lines). No secret masked, no fact read, no decision, no bundle
    document, no history: a floor under any sweep that keeps what it read, not a rival to one."""
    import hashlib
    from xml.etree import ElementTree

    from nightowl.engine.private_files import write_private
    from nightowl.redact import _trigger_lines

    folder.mkdir(exist_ok=True)

    def keep(number: int, data: bytes) -> None:
        text = data.decode("utf-8", errors="replace")
        _trigger_lines(text.lower())
        digest = hashlib.sha256(data).hexdigest()
        write_private(folder / f"{number}-{digest[:8]}.txt", data)  # as nightowl writes a bundle file
        if text.lstrip().startswith("<?xml"):
            ElementTree.fromstring(data)
        else:
            text.splitlines()

    return keep


def bare_pool(fleet: Fleet, names: list[str], forks: int, floor: Path | None = None) -> tuple[float, float]:
    """Wall and CPU seconds; a host that refuses the connection is skipped, as a bare pool would.
    ``floor``: a folder under which each host's outputs also get ``floor_work``.

    known_hosts and the client key are read once, not per host: with 1,000 known hosts, parsing the
    file per connection would cost the pool minutes and flatter nightowl."""
    import paramiko

    known = paramiko.HostKeys(str(fleet.known_hosts))
    commands = node_health_commands()
    client_key = paramiko.Ed25519Key.from_private_key_file(str(fleet.client_key))

    def one(name: str) -> None:
        try:
            connect_and_run(name)
        except OSError:  # ECONNREFUSED from an unreachable address
            pass
        except (paramiko.SSHException, EOFError, BareLost) as exc:  # a live host the bare pool lost (sshd busy,
            BARE_FAILURES.append(f"{name}: {exc!r}")  # a connection or channel closed mid-command): counted, not fatal

    def connect_and_run(name: str) -> None:
        ip, port = fleet.addresses[name]
        client = paramiko.SSHClient()
        entry = f"[{ip}]:{port}" if port != 22 else ip
        for key_type, key in (known.lookup(entry) or {}).items():
            client.get_host_keys().add(entry, key_type, key)
        client.set_missing_host_key_policy(paramiko.RejectPolicy())
        client.connect(
            ip,
            port=port,
            username=fleet.user,
            pkey=client_key,
            allow_agent=False,
            look_for_keys=False,
            timeout=10,
        )

        keep = floor_work(floor / name) if floor is not None else None

        def run(number: int, command: str) -> None:
            _, stdout, stderr = client.exec_command(command, timeout=20)
            data = stdout.read()
            said = stderr.read()
            status = stdout.channel.recv_exit_status()
            if status == -1:  # the channel closed with no exit status: what it read is not the command's output
                raise BareLost(f"{command!r}: no exit status, {said[-200:]!r}")
            if keep is not None:
                keep(number, data)

        try:
            with ThreadPoolExecutor(max_workers=len(commands)) as pool:
                list(pool.map(run, range(len(commands)), commands))
        finally:  # a host lost mid-command too: its connection is not left to the next round's pool
            client.close()

    cpu0, started = time.process_time(), time.monotonic()
    with ThreadPoolExecutor(max_workers=forks) as pool:
        list(pool.map(one, names))
    return time.monotonic() - started, time.process_time() - cpu0


def nightowl_sweep(
    fleet: Fleet,
    names: list[str],
    forks: int,
    out: Path,
    workers: int | None = None,
    code: Path = ROOT,
    history: Path | None = None,
) -> tuple[float, float, float, list[dict[str, Any]]]:
    """`nightowl sweep` in a process of its own: wall seconds, its CPU seconds and peak RSS (MB, from
    wait4: the sweep's alone, start-up and imports included), and the report's hosts. ``code``: the
    checkout whose nightowl sweeps (``--code``; this one by default). ``history``: the store the sweep keeps
    (``--steady``: one for every round, so later rounds read from the last one's positions); default: its own."""
    inventory = fleet.write_inventory(out / "hosts.yaml", names)
    args = ["sweep", "--inventory", str(inventory), "--known-hosts", str(fleet.known_hosts)]
    args += ["--ssh-config", str(fleet.ssh_config), "--identity", str(fleet.client_key), "--forks", str(forks)]
    args += ["--format", "json", "--out", str(out / "bundles")]
    if "--history" in sweep_options(code):  # a nightowl from before the history has none to write
        args += ["--history", str(history or out / "history.db")]
    if workers is not None:
        args += ["--workers", str(workers)]
    wall, cpu, rss, status, stdout, stderr = run_nightowl(args, code_env(code))
    try:
        return wall, cpu, rss, json.loads(stdout)["hosts"]
    except (ValueError, KeyError):  # no report at all: every host is a wrong answer, and why is shown
        why = (stderr.strip().splitlines() or ["no output"])[-1][:160]
        return wall, cpu, rss, [{"host": n, "status": f"no report (exit {status}: {why})"} for n in names]


@functools.cache
def sweep_options(code: Path) -> str:
    """``nightowl sweep --help`` of ``code``'s nightowl (an earlier commit's may lack an option)."""
    return run_nightowl(["sweep", "--help"], code_env(code))[4]


def code_env(code: Path) -> dict[str, str]:
    """The environment that makes a timed child import ``code``'s nightowl (``--code``): run_nightowl's cwd
    (this checkout) must not shadow it on sys.path."""
    return {"PYTHONPATH": str(code), "PYTHONSAFEPATH": "1"}


def tree_rss_mb(pid: int) -> float:
    """The memory of ``pid`` and all its descendants now (MB): the sum of their proportional set sizes
    (/proc/PID/smaps_rollup ``Pss``), so the pages forked workers share with the process they were forked
    from count once, not once per worker as a sum of RSS would."""
    parents: dict[int, int] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            parents[int(stat.parent.name)] = int(stat.read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):  # gone meanwhile
            continue
    tree, grown = {pid}, True
    while grown:
        more = {p for p, parent in parents.items() if parent in tree} - tree
        tree |= more
        grown = bool(more)
    total_kb = 0
    for process in tree:
        try:
            rollup = Path(f"/proc/{process}/smaps_rollup").read_text()
        except OSError:
            continue
        total_kb += next((int(line.split()[1]) for line in rollup.splitlines() if line.startswith("Pss:")), 0)
    return total_kb / 1024


# How the timed children load nightowl's own modules: from .pyc files, as a pip install leaves them
# (compiled once by ``use_bytecode`` into a folder of the bench's own, so no checkout is written to), unless
# --no-pyc asks for compiling from source on every start (PYTHONDONTWRITEBYTECODE=1, as the figures before
# the eighth session were taken: ~0.2 s more CPU per process started).
BYTECODE_ENV: dict[str, str] = {"PYTHONDONTWRITEBYTECODE": "1"}


def use_bytecode(folder: Path, code: Path = ROOT) -> None:
    """Compile nightowl's modules (``code``'s) into ``folder`` (PYTHONPYCACHEPREFIX) and have the children read
    them."""
    BYTECODE_ENV.update(PYTHONPYCACHEPREFIX=str(folder), PYTHONDONTWRITEBYTECODE="")  # empty: bytecode on
    subprocess.run(
        [sys.executable, "-m", "compileall", "-q", str(code / "nightowl")],
        env={**os.environ, **BYTECODE_ENV},
        check=True,
        stdout=subprocess.DEVNULL,
    )


# Written at the child's exit (the last exit hook: after the runbook cache's) when asked: the CPU seconds of
# the nightowl process alone, its threads included, without the commands it ran (its children).
_OWN_CPU_HOOK = (
    "import atexit, resource, sys; "
    "own = sys.argv.pop(1); "
    "atexit.register(lambda: open(own, 'w').write(str(sum(resource.getrusage(resource.RUSAGE_SELF)[:2])))); "
)


def run_nightowl(
    args: list[str], env: dict[str, str] | None = None, own_cpu: Path | None = None
) -> tuple[float, float, float, int, str, str]:
    """Run the CLI as a child: (wall s, CPU s, peak RSS MB, exit code, stdout, stderr), its own rusage
    from wait4 (so neither this process's nor an earlier child's figures are counted; its reaped worker
    processes' CPU is in it). The peak RSS is the larger of wait4's (its largest process) and the sum over
    the process and its workers (proportional set sizes, ``tree_rss_mb``) sampled every 0.2 s: a sweep over
    workers holds them all at once. ``own_cpu``: a file the child writes the CPU seconds of its own process
    to at exit (``check`` runs the node's tools as its children, and wait4 counts them too)."""
    hook = _OWN_CPU_HOOK if own_cpu is not None else ""
    code = hook + "import sys; from nightowl.cli.main import main; sys.exit(main())"
    command = [sys.executable, "-c", code, *([str(own_cpu)] if own_cpu is not None else []), *args]
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        started = time.monotonic()
        child = subprocess.Popen(
            command,
            cwd=ROOT,
            env={**os.environ, **BYTECODE_ENV, "PYTHONPATH": str(ROOT), **(env or {})},
            stdout=out,
            stderr=err,
        )
        peak = [0.0]
        sampling = threading.Event()

        def sample() -> None:
            while not sampling.wait(0.2):
                peak[0] = max(peak[0], tree_rss_mb(child.pid))

        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        _, status, usage = os.wait4(child.pid, 0)
        sampling.set()
        sampler.join()
        child.returncode = os.waitstatus_to_exitcode(status)  # reaped here: Popen must not wait for it again
        wall = time.monotonic() - started
        out.seek(0)
        err.seek(0)
        rss = max(usage.ru_maxrss / 1024, peak[0])
        return wall, usage.ru_utime + usage.ru_stime, rss, child.returncode, out.read(), err.read()


def verdict_errors(hosts: list[dict[str, Any]], dead: set[str]) -> list[str]:
    """Every host whose answer is wrong: a live (healthy) host not judged healthy, a dead one not unreachable."""
    wrong = []
    for host in hosts:
        verdict = (host.get("verdict") or {}).get("id")
        if host["host"] in dead:
            if host["status"] != "unreachable":
                wrong.append(f"{host['host']}: {host['status']} {verdict}")
        elif verdict != "healthy":
            wrong.append(f"{host['host']}: {host['status']} {verdict or (host.get('error') or '')[:80]}")
    return wrong


BARE_FAILURES: list[str] = []  # live hosts a bare pool run lost (it did less work than asked)


class BareLost(Exception):
    """A command the bare pool ran that did not end well (no exit status: its channel closed under it)."""


def spread(reachable: list[str], dead: list[str]) -> list[str]:
    """The dead addresses spread evenly among the live ones, as failed nodes sit in a real fleet."""
    total = len(reachable) + len(dead)
    order = sorted(
        [((i + 0.5) / len(reachable), name) for i, name in enumerate(reachable)]
        + [((i + 0.5) / max(1, len(dead)), name) for i, name in enumerate(dead)]
    )
    assert len(order) == total
    return [name for _, name in order]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hosts", type=int, default=64, help="reachable hosts (real sshd on loopback)")
    parser.add_argument("--unreachable", type=int, default=0, help="addresses with nothing listening")
    parser.add_argument("--forks", default="64", help="forks, or a comma list of them: one table row each")
    parser.add_argument(
        "--workers",
        default="",
        help="the sweep's --workers, or a comma list: one table row per forks and workers "
        "(default: the CLI's own, one worker per core)",
    )
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument(
        "--floor",
        action="store_true",
        help="also time the bare pool doing the least the issue asks of each output (floor_work: a trigger-word "
        "pass, a SHA-256, a file, a C parse): the floor column",
    )
    parser.add_argument("--check", action="store_true", help="also time `nightowl check` on one recorded node")
    parser.add_argument(
        "--steady",
        action="store_true",
        help="issue 46: one history store for all rounds, a journalctl that keeps a real cursor, and a few new "
        "kernel-log lines per host between rounds; rows for the first round and the steady state (rounds 2..), "
        "with the bytes each live host sent",
    )
    parser.add_argument(
        "--every",
        type=float,
        help="with --steady: one `nightowl sweep --every EVERY` process for all rounds, its connections kept "
        "between them (bench/repeated.py), in place of a new sweep per round; long enough for a round, the "
        "log growth and the bare pool together (each round says when it began before they ended: 16 at 64 "
        "hosts on 2 cores)",
    )
    parser.add_argument(
        "--evidence",
        choices=("small", "real"),
        default="small",
        help="small: a one-GPU recording with a 159-byte kernel log; real: an 8-GPU node at real size "
        "(bench/real_evidence.py: 228 KB nvidia-smi -q -x, 80 KB nvidia-smi -q, 0.8 MB boot log, two earlier "
        "boots, NVLink status)",
    )
    parser.add_argument(
        "--no-pyc",
        action="store_true",
        help="compile nightowl from source in every process started (PYTHONDONTWRITEBYTECODE=1), as figures "
        "before the eighth session were taken; default: from .pyc files, as a pip install has them",
    )
    parser.add_argument(
        "--code",
        type=Path,
        default=ROOT,
        help="the checkout whose nightowl sweeps (e.g. a `git archive` of an earlier commit); the fleet, its "
        "evidence and the bare pool stay this checkout's",
    )
    args = parser.parse_args()
    args.code = args.code.resolve()
    args.forks = [int(f) for f in str(args.forks).split(",")]
    args.workers = [int(w) for w in str(args.workers).split(",") if w] or [None]
    with tempfile.TemporaryDirectory() as tmp:
        if not args.no_pyc:
            use_bytecode(Path(tmp) / "pyc", args.code)
        run_rounds(args, Path(tmp))


HEADER = (
    "| hosts (live, refused) | forks | workers | bare pool s | sweep s | ratio | verdict errors "
    "| CPU ms / live host | bare pool CPU ms / live host | floor CPU ms / live host (wall ratio) | sweep peak RSS MB |"
)


def run_rounds(args: argparse.Namespace, root: Path) -> None:
    if args.evidence == "real":
        from bench.real_evidence import recorded_host

        recorded = recorded_host(root / "real-size-host")
    else:
        recorded = ROOT / "fixtures" / "hosts" / "healthy-l40s"
    names = [f"node-{i:04d}" for i in range(args.hosts)]
    dead = [f"dead-{i:04d}" for i in range(args.unreachable)]
    inventory = spread(names, dead)
    hosts = {**dict.fromkeys(names, recorded), **dict.fromkeys(dead, Fault.REFUSED)}
    rows = []
    with Fleet(root / "fleet", hosts) as fleet:
        if args.evidence == "real":
            from bench.real_evidence import serve_real_size

            serve_real_size(fleet, names)
        else:
            for name in names:
                fleet.set_output(name, "nvidia-smi", sleep=NVIDIA_SMI_SECONDS)
        if args.steady:
            from bench.steady import cursor_journal_standin, serve_cheap_form

            cursor_journal_standin(fleet)
            serve_cheap_form(fleet, names)
        run = FleetRun(args, fleet, root, names, dead, inventory)
        for forks in args.forks:
            for workers in args.workers:
                if args.steady and args.every:
                    from bench.repeated import repeated_rounds

                    this = sys.modules[__name__]
                    rows += repeated_rounds(run, forks, this)
                elif args.steady:
                    from bench.steady import steady_rounds

                    this = sys.modules[__name__]
                    rows += steady_rounds(run, forks, workers, this)
                else:
                    rows.append(_rounds(run, forks, workers))
        check = check_cpu(fleet, names[0], root / "check") if args.check else None
    print(
        f"code={args.code} evidence={args.evidence} repeat={args.repeat} {'no-pyc' if args.no_pyc else 'pyc'} "
        "(medians; the bare pool dials "
        f"{'every inventory host' if dead else 'the live hosts'})"
    )
    if args.steady:
        from bench.repeated import HEADER as EVERY_HEADER
        from bench.steady import STEADY_HEADER, STEADY_TARGETS

        print(EVERY_HEADER if args.every else STEADY_HEADER)
        print("|---" * (EVERY_HEADER if args.every else STEADY_HEADER).count(" | ") + "|---|")
        for row in rows:
            print(row)
        print(STEADY_TARGETS)
        return
    print(HEADER)
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for row in rows:
        print(row)
    print("targets: ratio <= 1.2x, no verdict error, <= 30 ms CPU per real-size host, <= 400 MB RSS at 1,000 hosts")
    if BARE_FAILURES:
        print(f"bare pool lost {len(BARE_FAILURES)} live hosts, e.g. {BARE_FAILURES[0]}")
    if check is not None:
        print(
            f"nightowl check on one real-size node: {check[0]:.2f} s CPU, {check[1]:.2f} s wall, verdict {check[2]}"
            " (target: <= 0.5 s CPU)"
        )


def _rounds(run: FleetRun, forks: int, workers: int | None = None) -> str:
    """One table row: ``repeat`` rounds of the bare pool and the sweep at ``forks`` over ``workers``
    processes (None: the CLI's default). CPU and RSS are the whole process tree's (``run_nightowl``)."""
    args, fleet, root, names, dead, inventory = run.args, run.fleet, run.root, run.names, run.dead, run.inventory
    bare, bare_cpus, floor_walls, floor_cpus, swept_walls, cpus, rsss, wrong_counts = [], [], [], [], [], [], [], []
    wrong_seen: list[str] = []
    for round_ in range(args.repeat):
        bare_wall, bare_cpu = bare_pool(fleet, run.pool_hosts, forks)
        bare.append(bare_wall)
        bare_cpus.append(bare_cpu / len(names))
        if args.floor:
            kept = root / f"floor-{forks}-{workers}-{round_}"
            kept.mkdir()
            floor_wall, floor_cpu = bare_pool(fleet, run.pool_hosts, forks, kept)
            floor_walls.append(floor_wall)
            floor_cpus.append(floor_cpu / len(names))
            shutil.rmtree(kept, ignore_errors=True)
        out = root / f"run-{forks}-{workers}-{round_}"
        out.mkdir()
        wall, cpu, rss, swept = nightowl_sweep(fleet, inventory, forks, out, workers, args.code)
        wrong = verdict_errors(swept, set(dead))
        wrong_seen += wrong
        swept_walls.append(wall)
        cpus.append(cpu / len(names))
        rsss.append(rss)
        wrong_counts.append(len(wrong))
        shutil.rmtree(out, ignore_errors=True)  # real-size bundles add up on a shared disk
    for line in sorted(set(wrong_seen))[:4]:
        print(f"  forks {forks} workers {workers} wrong: {line}")
    med_bare, med_sweep = statistics.median(bare), statistics.median(swept_walls)
    return (
        f"| {len(inventory)} ({len(names)}, {len(dead)}) | {forks} | {workers or 'default'} | {med_bare:.2f} "
        f"| {med_sweep:.2f} "
        f"| {med_sweep / med_bare:.2f}x | {', '.join(map(str, wrong_counts))} | {statistics.median(cpus) * 1000:.0f} "
        f"| {statistics.median(bare_cpus) * 1000:.0f} "
        f"| {floor_column(floor_walls, floor_cpus, med_bare)} | {max(rsss):.0f} |"
    )


def floor_column(walls: list[float], cpus: list[float], bare_wall: float) -> str:
    """The floor pool's median CPU per live host and its wall time as a ratio to the bare pool's: what the
    least the issue asks of each output costs before nightowl decides anything ("-": not asked for)."""
    if not cpus:
        return "-"
    return f"{statistics.median(cpus) * 1000:.0f} ({statistics.median(walls) / bare_wall:.2f}x)"


def check_cpu(fleet: Fleet, name: str, out: Path) -> tuple[float, float, str]:
    """`nightowl check` run here as if on ``name``: the fleet's stand-ins on PATH serve that node's recorded
    outputs (they pick the node by $SSH_CONNECTION, as under its sshd). CPU and wall seconds, the verdict."""
    ip, port = fleet.addresses[name]
    env = {
        "PATH": f"{fleet.root / 'bin'}:{os.environ.get('PATH', '/usr/bin:/bin')}",
        "SSH_CONNECTION": f"127.0.0.1 40000 {ip} {port}",
        "NODE_NAME": name,
    }
    args = ["check", "--format", "json", "--out", str(out), "--history", str(out / "history.db")]
    wall, cpu, _, _, stdout, stderr = run_nightowl(args, env)
    try:
        verdict = (json.loads(stdout)["hosts"][0].get("verdict") or {}).get("id")
    except (ValueError, KeyError, IndexError):
        verdict = f"no report: {(stderr.strip().splitlines() or ['?'])[-1][:120]}"
    return cpu, wall, str(verdict)


if __name__ == "__main__":
    main()
