"""A one-node Slurm cluster from Debian's packages (munge, slurmctld, slurmd, slurm-client) on loopback.

Everything lives in one temp dir: the munge key and socket, slurm.conf, state and logs. slurmd runs
deploy/slurm/nightowl-healthcheck.sh as its HealthCheckProgram every second through a wrapper that,
like a site's own wrapper, passes nightowl's settings (slurmd gives the program an empty environment)
and runs the real script only while the test has armed it. The node is called ``gpu-17``
(``slurmd -N``) and its GPU tools are stand-ins serving a recorded host (tests/fleet/standin.py);
23 more nodes (``SPARES``) exist only in slurm.conf, to be drained and resumed through scontrol.

Binding to 127.0.0.1 (CommunicationParameters=NoCtldInAddrAny,NoInAddrAny) makes both daemons resolve
gethostname(); where that is not a loopback address they run in their own UTS namespace named
``localhost``. Needs root (SlurmUser=root, and slurmd itself).
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
from pathlib import Path

from tests.fleet.daemons import LOOPBACK, Daemon, assert_loopback_only, free_port, wait_for
from tests.fleet.prometheus_stack import ROOT, nightowl_argv
from tests.fleet.standin import StandinNode

BINARIES = ("munged", "munge", "unmunge", "slurmctld", "slurmd", "scontrol", "sinfo")
HEALTHCHECK = ROOT / "deploy" / "slurm" / "nightowl-healthcheck.sh"
NODE = "gpu-17"
# Nodes slurm.conf lists with no slurmd behind them (an address nothing listens on): they never answer,
# but slurmctld drains and resumes them through scontrol as it would real ones, so the circuit
# breaker's tests see a cluster of 24 nodes.
SPARES = [f"spare-{i:02d}" for i in range(1, 24)]


def why_not() -> str | None:
    """Why the cluster cannot run here, or None."""
    missing = [b for b in BINARIES if shutil.which(b) is None]
    if missing:
        return f"not installed: {', '.join(missing)} (Debian munge, slurmctld, slurmd, slurm-client; scripts/test)"
    if os.geteuid() != 0:
        return "slurmd must run as root"
    return None


def _resolves_to_loopback(name: str) -> bool:
    try:
        return all(info[4][0].startswith("127.") for info in socket.getaddrinfo(name, None, socket.AF_INET))
    except OSError:
        return False


class SlurmCluster:
    def __init__(self, root: Path, recording: Path) -> None:
        os.chmod(root, 0o711)  # munged wants o+x on every directory above its socket
        self.root = root
        self.node = StandinNode(root / "node", recording)
        self.conf = root / "slurm.conf"
        self.socket = root / "munge" / "munge.socket"
        self.hostname = socket.gethostname().split(".")[0]
        self.uts = not _resolves_to_loopback(self.hostname)
        if self.uts:
            self.hostname = "localhost"
        self.env = {**os.environ, "SLURM_CONF": str(self.conf)}
        self.daemons: dict[str, Daemon] = {}
        self.armed = root / "armed"
        self.runs = root / "healthcheck.runs"
        # One marker per check in flight (healthcheck.running.PID): slurmd may start a check while an
        # earlier, slow one still runs, and reset() must wait for every one of them.
        self.running = root / "healthcheck.running"
        self.settings = root / "healthcheck.env"  # sourced by the wrapper: a test's own settings
        self.log = root / "healthcheck.log"

    # --- start / stop ---------------------------------------------------------------------------
    def start(self) -> SlurmCluster:
        try:
            self._write_files()
            self._start("munged", self._munged_argv())
            wait_for("munge round trip", self._munge_ok, 15, list(self.daemons.values()))
            self._start("slurmctld", ["slurmctld", "-D"])
            self._start("slurmd", ["slurmd", "-D", "-N", NODE])
            wait_for("node idle", lambda: self.state() == "idle", 60, list(self.daemons.values()))
            assert_loopback_only([self.daemons["slurmctld"], self.daemons["slurmd"]])
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        for name in ("slurmd", "slurmctld", "munged"):
            if name in self.daemons:
                self.daemons[name].stop()

    def _start(self, name: str, argv: list[str]) -> None:
        if self.uts and name != "munged":
            argv = ["unshare", "--uts", "sh", "-c", 'hostname localhost && exec "$@"', "sh", *argv]
        self.daemons[name] = Daemon(name, argv, self.root / "log", self.env)

    def _munged_argv(self) -> list[str]:
        munge = self.root / "munge"
        return [
            "munged",
            "--foreground",
            f"--socket={self.socket}",
            f"--key-file={munge / 'munge.key'}",
            f"--pid-file={munge / 'munged.pid'}",
            f"--seed-file={munge / 'munged.seed'}",
        ]

    def _munge_ok(self) -> bool:
        sealed = subprocess.run(["munge", "-n", "-S", str(self.socket)], capture_output=True, timeout=5)
        if sealed.returncode:
            return False
        opened = subprocess.run(
            ["unmunge", "-S", str(self.socket)], input=sealed.stdout, capture_output=True, timeout=5
        )
        return opened.returncode == 0

    # --- files ------------------------------------------------------------------------------------
    def _write_files(self) -> None:
        for folder in ("munge", "log", "state", "spool", "bundles"):
            (self.root / folder).mkdir(mode=0o700)
        (self.root / "munge").chmod(0o711)
        key = self.root / "munge" / "munge.key"
        key.write_bytes(os.urandom(1024))
        key.chmod(0o400)
        wrapper = self.root / "healthcheck.sh"
        wrapper.write_text(self._wrapper())
        wrapper.chmod(0o755)
        self.conf.write_text(self._slurm_conf(wrapper))

    def _wrapper(self) -> str:
        nightowl = nightowl_argv()
        assert len(nightowl) == 1, "the health check needs an installed `nightowl` script"
        # PATH holds only the stand-ins and nightowl: the script must add the system directories itself.
        return f"""#!/bin/sh
# HealthCheckProgram of the test cluster: what a site sets, then the project's script (while armed).
# Marked running before looking at the switch: reset() disarms, then waits for no run in flight.
marker='{self.running}'.$$
: > "$marker"
[ -e '{self.armed}' ] || {{ /bin/rm -f "$marker"; exit 0; }}
export SLURM_CONF='{self.conf}'
export PATH='{self.node.bin}:{Path(nightowl[0]).parent}'
export NIGHTOWL='{nightowl[0]}' NIGHTOWL_OUT='{self.root / "bundles"}' NIGHTOWL_TEXTFILE='{self.root / "nightowl.prom"}'
export NIGHTOWL_HEALTHCHECK_LOG='{self.log}' NIGHTOWL_HEALTHCHECK_LOCK='{self.root / "healthcheck.lock"}'
[ -e '{self.settings}' ] && . '{self.settings}'
/bin/bash '{HEALTHCHECK}' >> '{self.log}' 2>&1
echo "$?" >> '{self.runs}'
/bin/rm -f "$marker"
"""

    def _slurm_conf(self, wrapper: Path) -> str:
        hardware = subprocess.run(
            ["slurmd", "-C"], capture_output=True, text=True, check=True, env={**os.environ, "SLURM_CONF": "/dev/null"}
        ).stdout.split("\n")[0]
        hardware = " ".join(f for f in hardware.split() if not f.startswith(("NodeName=", "RealMemory=")))
        p = self.root
        return f"""# one-node test cluster on loopback (tests/fleet/slurm_cluster.py)
ClusterName=nightowl
SlurmctldHost={self.hostname}({LOOPBACK})
SlurmctldPort={free_port()}
SlurmdPort={free_port()}
CommunicationParameters=NoCtldInAddrAny,NoInAddrAny
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket={self.socket}
StateSaveLocation={p / "state"}
SlurmdSpoolDir={p / "spool"}
SlurmctldPidFile={p / "slurmctld.pid"}
SlurmdPidFile={p / "slurmd.pid"}
SlurmctldLogFile={p / "log" / "slurmctld.log"}
SlurmdLogFile={p / "log" / "slurmd.log"}
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
MpiDefault=none
SwitchType=switch/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SchedulerType=sched/backfill
MailProg=/bin/true
ReturnToService=2
HealthCheckProgram={wrapper}
HealthCheckInterval=1
HealthCheckNodeState=ANY
NodeName={NODE} NodeHostname={self.hostname} NodeAddr={LOOPBACK} {hardware} RealMemory=100 State=UNKNOWN
NodeName=spare-[01-23] NodeAddr=127.0.0.2 Port={free_port()} CPUs=1 RealMemory=100 State=UNKNOWN
PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP
"""

    # --- what tests do and ask ---------------------------------------------------------------
    def scontrol(self, *args: str) -> str:
        result = subprocess.run(["scontrol", *args], env=self.env, capture_output=True, text=True, timeout=30)
        assert result.returncode == 0, f"scontrol {' '.join(args)}: {result.stderr}"
        return result.stdout

    def state(self) -> str:
        result = subprocess.run(
            ["sinfo", "-h", "-N", "-n", NODE, "-o", "%T"], env=self.env, capture_output=True, text=True, timeout=30
        )
        return result.stdout.strip().splitlines()[0] if result.returncode == 0 and result.stdout.strip() else ""

    def reason(self, node: str = NODE) -> str:
        result = subprocess.run(
            ["sinfo", "-h", "-N", "-n", node, "-o", "%E"], env=self.env, capture_output=True, text=True, timeout=30
        )
        return result.stdout.strip().splitlines()[0] if result.stdout.strip() else ""

    def node_state(self, node: str) -> str:
        result = subprocess.run(
            ["sinfo", "-h", "-N", "-n", node, "-o", "%T"], env=self.env, capture_output=True, text=True, timeout=30
        )
        return result.stdout.strip().splitlines()[0] if result.stdout.strip() else ""

    def _none_running(self) -> bool:
        return not any(self.running.parent.glob(self.running.name + ".*"))

    def completed_checks(self) -> int:
        return len(self.runs.read_text().splitlines()) if self.runs.exists() else 0

    def wait_checks(self, count: int, timeout: float = 60) -> None:
        """Wait until ``count`` more health checks have run to the end (a check that began earlier is not one)."""
        start = self.completed_checks() + 1  # the one running now may have read the old recording
        wait_for(
            f"{count} health checks",
            lambda: self.completed_checks() >= start + count,
            timeout,
            list(self.daemons.values()),
        )

    def wait_state(self, predicate: object, what: str, timeout: float = 60) -> str:
        seen: list[str] = []

        def check() -> str | None:
            state = self.state()
            if not seen or seen[-1] != state:
                seen.append(state)
            return state if predicate(state) else None  # type: ignore[operator]

        try:
            return wait_for(what, check, timeout, list(self.daemons.values()))
        except AssertionError as exc:
            raise AssertionError(f"node states seen: {' -> '.join(seen)}; reason {self.reason()!r}\n{exc}") from None

    def reset_logging_to(self, log: Path, exports: str = "") -> Path:
        """``reset``, then have the health check log nightowl's actions to ``log`` (``exports``: more settings
        for it, ``NAME=value`` words). Returns ``log``."""
        self.reset()
        self.settings.write_text(f"export NIGHTOWL_ACTIONS_LOG='{log}'{' ' + exports if exports else ''}\n")
        return log

    def reset(self) -> None:
        """Disarm the health check and bring the node back to idle, whatever a test left."""
        self.armed.unlink(missing_ok=True)
        wait_for("the running health checks to end", self._none_running, 60)
        self.settings.unlink(missing_ok=True)
        # A drain that slurmctld applies late (a check that ended just before the disarm) must not
        # reach the next test: resume until the node stays idle through two health-check intervals.
        for _ in range(5):
            if "drain" in self.state():
                self.scontrol("update", f"nodename={NODE}", "state=resume")
            self.wait_state(lambda s: s == "idle", "node idle after reset")
            time.sleep(2.5)
            if self.state() == "idle":
                break
