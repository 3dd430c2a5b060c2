"""A throw-away single-host Slurm cluster: its own munged, slurmctld and slurmd (as root).

    python3 examples/slurm/single_host_cluster.py up DIR    # prints: export SLURM_CONF=...
    python3 examples/slurm/single_host_cluster.py down DIR

tests/env/test_slurm_job.py starts one per test session.

Everything lives in one directory: a fresh munge key and socket (the machine's munged, if
any, is left alone), a generated slurm.conf with one node of 8 CPUs (config_overrides lets
a 2-core machine offer them), free non-default ports, a tree topology with one leaf switch,
pid files. ``stop()`` ends the three daemons by those pids. ``start()`` raises
``SlurmUnavailable`` with the reason when the packages are missing or a daemon won't run.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

DAEMONS = ("munged", "slurmctld", "slurmd")
PROGRAMS = ("mungekey", "munged", "slurmctld", "slurmd", "sbatch", "srun", "scontrol", "scancel")


class SlurmUnavailable(Exception):
    pass


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class SlurmCluster:
    root: Path
    node: str = field(default_factory=lambda: socket.gethostname().split(".")[0])
    leaf: str = "leaf1"

    @property
    def conf(self) -> Path:
        return self.root / "slurm.conf"

    def env(self) -> dict[str, str]:
        return {**os.environ, "SLURM_CONF": str(self.conf)}

    def scontrol(self, *args: str) -> str:
        done = subprocess.run(
            ["scontrol", *args],
            env=self.env(),
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )
        return done.stdout + done.stderr

    # -- start / stop -------------------------------------------------------------------
    def start(self) -> None:
        missing = [p for p in PROGRAMS if shutil.which(p) is None]
        if missing:
            raise SlurmUnavailable(
                f"not installed: {', '.join(missing)} (setup.sh installs slurmd slurmctld "
                "slurm-client munge)"
            )
        if os.geteuid() != 0:
            raise SlurmUnavailable("slurmd must run as root to start job steps")
        for sub in ("state", "spool", "log"):
            (self.root / sub).mkdir(parents=True, exist_ok=True)
        self.root.chmod(0o755)  # munged and slurmstepd check the path of their files
        self._start_munge()
        self._write_conf()
        self._run("slurmctld", "slurmctld", "-f", str(self.conf))
        self._run("slurmd", "slurmd", "-f", str(self.conf))
        self._wait_idle()

    def _run(self, name: str, *argv: str) -> None:
        done = subprocess.run(
            argv, env=self.env(), capture_output=True, text=True, timeout=60, check=False
        )
        if done.returncode != 0:
            raise SlurmUnavailable(f"{name} would not start: {done.stderr.strip()[-500:]}")

    def _start_munge(self) -> None:
        key = self.root / "munge.key"
        self._run("mungekey", "mungekey", "--create", f"--keyfile={key}")
        key.chmod(0o400)
        self._run(
            "munged",
            "munged",
            "--force",
            f"--socket={self.root / 'munge.sock'}",
            f"--key-file={key}",
            f"--pid-file={self.root / 'munged.pid'}",
            f"--log-file={self.root / 'log' / 'munged.log'}",
            f"--seed-file={self.root / 'munged.seed'}",
        )

    def _write_conf(self) -> None:
        r = self.root
        ctld, slurmd = _free_port(), _free_port()
        self.conf.write_text(
            f"""\
ClusterName=netqualtest
SlurmctldHost={self.node}(127.0.0.1)
SlurmUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket={r / "munge.sock"}
MpiDefault=none
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SlurmctldPort={ctld}
SlurmdPort={slurmd}
StateSaveLocation={r / "state"}
SlurmdSpoolDir={r / "spool"}
SlurmctldPidFile={r / "slurmctld.pid"}
SlurmdPidFile={r / "slurmd.pid"}
SlurmctldLogFile={r / "log" / "slurmctld.log"}
SlurmdLogFile={r / "log" / "slurmd.log"}
ReturnToService=2
SlurmdParameters=config_overrides
TopologyPlugin=topology/tree
KillWait=5
InactiveLimit=0
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
NodeName={self.node} NodeAddr=127.0.0.1 CPUs=8 Sockets=1 CoresPerSocket=8 ThreadsPerCore=1 \
RealMemory=4000 State=UNKNOWN
PartitionName=debug Nodes={self.node} Default=YES OverSubscribe=YES MaxTime=INFINITE State=UP
"""
        )
        (r / "topology.conf").write_text(f"SwitchName={self.leaf} Nodes={self.node}\n")

    def _wait_idle(self, timeout_s: float = 60.0) -> None:
        end = time.monotonic() + timeout_s
        resumed = False
        text = ""
        while time.monotonic() < end:
            text = self.scontrol("show", "node", self.node, "--oneliner")
            state = next((w for w in text.split() if w.startswith("State=")), "")
            if state.startswith("State=IDLE"):
                return
            if ("DOWN" in state or "DRAIN" in state) and not resumed:
                self.scontrol("update", f"nodename={self.node}", "state=resume")
                resumed = True
            time.sleep(0.5)
        logs = "".join(self.log_tail(d) for d in ("slurmctld", "slurmd"))
        raise SlurmUnavailable(f"node {self.node} not idle after {timeout_s:g} s: {text}{logs}")

    def log_tail(self, daemon: str, lines: int = 15) -> str:
        path = self.root / "log" / f"{daemon}.log"
        if not path.exists():
            return ""
        tail = path.read_text(errors="replace").splitlines()[-lines:]
        return f"\n--- {path} ---\n" + "\n".join(tail)

    def stop(self) -> None:
        """SIGTERM each daemon by its pid file, SIGKILL what is still there after 10 s."""
        for daemon in reversed(DAEMONS):
            pid_file = self.root / f"{daemon}.pid"
            with contextlib.suppress(OSError, ValueError):
                pid = int(pid_file.read_text().split()[0])
                os.kill(pid, signal.SIGTERM)
                end = time.monotonic() + 10
                while time.monotonic() < end and _alive(pid):
                    time.sleep(0.1)
                if _alive(pid):
                    os.kill(pid, signal.SIGKILL)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="A single-host Slurm cluster in DIR.")
    parser.add_argument("action", choices=["up", "down"])
    parser.add_argument("dir", type=Path, help="scratch directory for its files")
    args = parser.parse_args(argv)
    cluster = SlurmCluster(args.dir.resolve())
    if args.action == "down":
        cluster.stop()
        return 0
    try:
        cluster.start()
    except SlurmUnavailable as err:
        cluster.stop()
        print(f"Slurm cannot run here: {err}", file=sys.stderr)
        return 1
    print(f"node {cluster.node} is idle; use it with:\n  export SLURM_CONF={cluster.conf}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
