"""Sweep benchmark: nightowl's node-health sweep against a bare paramiko thread pool.

Starts a loopback fleet of real OpenSSH servers (tests/ssh/fleet.py) whose `nvidia-smi` stand-in
takes 0.4 s, plus (``--unreachable N``) addresses with nothing listening (127.0.x.y, connection
refused at once), spread through the inventory, then times, in each round:
  (a) a bare paramiko thread pool: per reachable host one connection, the command lines nightowl's
      node-health sends (node_health_commands) on concurrent channels, outputs read and dropped;
  (b) the same pool dialling every inventory host, the unreachable ones failing on connect (the pool
      "doing the same" as the sweep: it cannot know which hosts are down before dialling them);
  (c) `nightowl sweep --runbook node-health` over the whole inventory (parsing, deciding, bundle).
Prints the verdict errors of each round (a live host not "healthy", a dead one not "unreachable"), wall
times, the ratios of (c) to (a) and to (b) (target: nightowl within 1.2x), peak RSS, and CPU per host
(this process's CPU time over the inventory's hosts; sshd's own CPU is not counted). On a 2-core
machine sshd's crypto shares the cores with the client, so the ratio is what counts.

    .venv/bin/python bench/sweep.py [--hosts 64] [--unreachable 0] [--forks 64] [--repeat 3]
    .venv/bin/python bench/sweep.py --hosts 64 --unreachable 936      # the 1,000-host case
    .venv/bin/python bench/sweep.py --evidence real --hosts 32        # an 8-GPU node's outputs at real size
"""

from __future__ import annotations

import argparse
import contextlib
import resource
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.ssh.fleet import Fault, Fleet  # noqa: E402

def node_health_commands() -> list[str]:
    """The command lines nightowl's node-health sends: each command collector of its `collect` node, its
    first runnable alternative with the runbook's default parameters, wrapped as SSHTransport wraps it
    (coreutils `timeout`, so the host ends a hung command itself). The bare pool sends exactly these, so
    both sides ask the hosts for the same work (derived collectors run no command)."""
    from nightowl import runbooks
    from nightowl.collectors import get_collector
    from nightowl.engine.model import split_entry
    from nightowl.engine.runner import resolve_argv
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


def bare_pool(fleet: Fleet, names: list[str], forks: int) -> tuple[float, float]:
    """Wall and CPU seconds; a host that refuses the connection is skipped, as a bare pool would.

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
        except paramiko.SSHException as exc:  # a live host the bare pool lost (sshd busy): counted, not fatal
            BARE_FAILURES.append(f"{name}: {exc}")

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

        def run(command: str) -> None:
            _, stdout, stderr = client.exec_command(command, timeout=20)
            stdout.read()
            stderr.read()
            stdout.channel.recv_exit_status()

        with ThreadPoolExecutor(max_workers=len(commands)) as pool:
            list(pool.map(run, commands))
        client.close()

    cpu0, started = time.process_time(), time.monotonic()
    with ThreadPoolExecutor(max_workers=forks) as pool:
        list(pool.map(one, names))
    return time.monotonic() - started, time.process_time() - cpu0


def nightowl_sweep(fleet: Fleet, names: list[str], forks: int, out: Path) -> tuple[float, float, list[dict[str, Any]]]:
    from click.testing import CliRunner

    from nightowl.cli.main import main

    inventory = fleet.write_inventory(out / "hosts.yaml", names)
    args = [
        "sweep",
        "--inventory",
        str(inventory),
        "--known-hosts",
        str(fleet.known_hosts),
        "--ssh-config",
        str(fleet.ssh_config),
        "--identity",
        str(fleet.client_key),
        "--forks",
        str(forks),
        "--format",
        "json",
        "--out",
        str(out / "bundles"),
    ]
    cpu0, started = time.process_time(), time.monotonic()
    with _timed_bundle_finish() as finish:
        result = CliRunner().invoke(main, args)
    wall, cpu = time.monotonic() - started, time.process_time() - cpu0
    FINISH_SECONDS.append(finish[0])
    import json

    try:
        return wall, cpu, json.loads(result.stdout)["hosts"]
    except (ValueError, KeyError):  # no report at all: every host is a wrong answer, and why is shown
        why = (result.output.strip().splitlines() or [repr(result.exception)])[-1][:160]
        return wall, cpu, [{"host": n, "status": f"no report (exit {result.exit_code}: {why})"} for n in names]


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


FINISH_SECONDS: list[float] = []  # per sweep: the bundle's last step (verdicts, trace, manifest)
BARE_FAILURES: list[str] = []  # live hosts a bare pool run lost (it did less work than asked)


@contextlib.contextmanager
def _timed_bundle_finish() -> Iterator[list[float]]:
    """Time BundleWriter.finish (serial, after every host is done) to show where a sweep's time goes."""
    from nightowl.engine.bundle import BundleWriter

    spent = [0.0]
    real = BundleWriter.finish

    def finish(self: Any, *args: Any, **kwargs: Any) -> Any:
        started = time.monotonic()
        try:
            return real(self, *args, **kwargs)
        finally:
            spent[0] += time.monotonic() - started

    BundleWriter.finish = finish  # type: ignore[method-assign]
    try:
        yield spent
    finally:
        BundleWriter.finish = real  # type: ignore[method-assign]


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
    parser.add_argument("--forks", type=int, default=64)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument(
        "--evidence",
        choices=("small", "real"),
        default="small",
        help="small: a one-GPU recording with a 159-byte kernel log; real: an 8-GPU node at real size "
        "(bench/real_evidence.py: 80 KB nvidia-smi -q, 0.8 MB boot log, NVLink status)",
    )
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        run_rounds(args, Path(tmp))


def run_rounds(args: argparse.Namespace, root: Path) -> None:
    if args.evidence == "real":
        from bench.real_evidence import recorded_host

        recorded = recorded_host(root / "real-size-host")
    else:
        recorded = ROOT / "fixtures" / "hosts" / "healthy-l40s"
    names = [f"node-{i:04d}" for i in range(args.hosts)]
    dead = [f"dead-{i:04d}" for i in range(args.unreachable)]
    inventory = spread(names, dead)
    total = len(inventory)
    runs: dict[str, list[float]] = {k: [] for k in ("bare", "bare_all", "sweep", "cpu_bare", "cpu_sweep")}
    errors: list[list[str]] = []
    hosts = {**dict.fromkeys(names, recorded), **dict.fromkeys(dead, Fault.REFUSED)}
    with Fleet(root / "fleet", hosts) as fleet:
        for name in names:
            fleet.set_output(name, "nvidia-smi", sleep=0.4)
        if args.evidence == "real":
            from bench.real_evidence import list_boots_standin

            list_boots_standin(fleet.root / "bin")
        for round_ in range(args.repeat):
            wall, cpu = bare_pool(fleet, names, args.forks)
            runs["bare"].append(wall)
            runs["cpu_bare"].append(cpu / len(names))
            if dead:
                runs["bare_all"].append(bare_pool(fleet, inventory, args.forks)[0])
            out = root / f"run-{round_}"
            out.mkdir()
            wall, cpu, swept = nightowl_sweep(fleet, inventory, args.forks, out)
            errors.append(verdict_errors(swept, set(dead)))
            runs["sweep"].append(wall)
            runs["cpu_sweep"].append(cpu / total)
            shutil.rmtree(out / "bundles", ignore_errors=True)  # real-size bundles add up on a shared disk
    med = {k: statistics.median(v) for k, v in runs.items() if v}
    print(f"evidence={args.evidence}")
    print(f"hosts={total} ({len(names)} reachable, {len(dead)} refused) forks={args.forks} repeat={args.repeat}")
    print(f"verdict errors per round            : {', '.join(str(len(e)) for e in errors)}")
    for wrong in sorted({w for round_errors in errors for w in round_errors})[:8]:
        print(f"  wrong: {wrong}")
    print(f"bare paramiko pool, reachable hosts : {med['bare']:.2f} s  (runs: {_list(runs['bare'])})")
    if dead:
        print(f"bare paramiko pool, every host      : {med['bare_all']:.2f} s  (runs: {_list(runs['bare_all'])})")
    print(f"nightowl sweep, every host          : {med['sweep']:.2f} s  (runs: {_list(runs['sweep'])})")
    finish = statistics.median(FINISH_SECONDS)
    print(f"  of which bundle finish (serial)   : {finish:.2f} s  (verdicts, trace, manifest)")
    # Per round as well: this machine's speed drifts between rounds, and a round's two runs share it.
    paired = statistics.median(x / y for x, y in zip(runs["sweep"], runs["bare"], strict=True))
    print(f"ratio sweep / bare (reachable)      : {med['sweep'] / med['bare']:.2f}x  (round by round: {paired:.2f}x)")
    if dead:
        paired_all = statistics.median(x / y for x, y in zip(runs["sweep"], runs["bare_all"], strict=True))
        print(
            f"ratio sweep / bare (every host)     : {med['sweep'] / med['bare_all']:.2f}x"
            f"  (round by round: {paired_all:.2f}x)"
        )
    print("target: within 1.2x of the bare pool")
    if BARE_FAILURES:
        print(f"bare pool lost {len(BARE_FAILURES)} live host(s), e.g. {BARE_FAILURES[0]}")
    print(f"CPU per reachable host, bare pool   : {med['cpu_bare'] * 1000:.1f} ms")
    print(f"CPU per inventory host, nightowl    : {med['cpu_sweep'] * 1000:.1f} ms")
    # this process's peak: the bare pool's and the sweep's (both run here), never sshd's
    print(f"peak RSS of this process            : {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MB")


def _list(values: list[float]) -> str:
    return ", ".join(f"{v:.2f}" for v in values)


if __name__ == "__main__":
    main()
