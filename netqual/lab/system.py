"""The lab's only contact with the system: iproute2 commands, sysctls and processes.

Everything is done inside namespaces the lab created (``ip -n NS ...``); the root
namespace's interfaces and routes are never touched.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import shutil
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

from netqual.base.errors import LabError

NETNS_DIR = Path("/run/netns")


def unavailable_reason() -> str | None:
    """None when this machine can host a lab, else why not (shown to the user)."""
    if os.geteuid() != 0:
        return "the lab needs root (network namespaces, TUN devices); run it with sudo"
    if shutil.which("ip") is None:
        return "the lab needs iproute2's `ip` command"
    if not Path("/dev/net/tun").exists():
        return "the lab needs /dev/net/tun (the tun kernel module)"
    return None


def ip(*args: str, netns: str | None = None, stdin: str | None = None) -> str:
    cmd = ["ip", *(["-n", netns] if netns else []), *args]
    proc = subprocess.run(cmd, input=stdin, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        shown = " ".join(cmd) if stdin is None else f"{' '.join(cmd)} <<{stdin!r}"
        raise LabError(f"`{shown}` failed: {proc.stderr.strip() or proc.returncode}")
    return proc.stdout


def tc(netns: str, *args: str) -> None:
    """``tc -n NETNS ARGS`` (traffic control: the tbf qdisc of a rate-limited link)."""
    if shutil.which("tc") is None:
        raise LabError("a rate-limited link needs iproute2's `tc` command")
    cmd = ["tc", "-n", netns, *args]
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise LabError(f"`{' '.join(cmd)}` failed: {proc.stderr.strip() or proc.returncode}")


def ip_batch(netns: str, lines: list[str]) -> None:
    if lines:
        ip("-batch", "-", netns=netns, stdin="\n".join(lines) + "\n")


def netns_list() -> set[str]:
    if not NETNS_DIR.is_dir():
        return set()
    return {p.name for p in NETNS_DIR.iterdir()}


def netns_add(name: str) -> None:
    ip("netns", "add", name)
    ip("link", "set", "lo", "up", netns=name)


def netns_delete(name: str) -> None:
    ip("netns", "delete", name)


def netns_pids(name: str) -> list[int]:
    try:
        out = ip("netns", "pids", name)
    except LabError:
        return []
    return [int(p) for p in out.split()]


def sysctl(netns: str, key: str, value: str) -> None:
    cmd = ["ip", "netns", "exec", netns, "sysctl", "-qw", f"{key}={value}"]
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise LabError(f"`{' '.join(cmd)}` failed: {proc.stderr.strip()}")


def start_time(pid: int) -> int | None:
    """Kernel start time of ``pid`` (clock ticks since boot), None when it is gone.

    Stored next to each PID so that ``down`` never signals a recycled PID."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return int(stat.rsplit(")", 1)[1].split()[19])


def alive(pid: int, started: int | None) -> bool:
    now = start_time(pid)
    return now is not None and (started is None or now == started) and not _zombie(pid)


def _zombie(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except OSError:
        return True


def stop(pids: list[tuple[int, int | None]], timeout_s: float = 3.0) -> list[int]:
    """SIGTERM, wait up to ``timeout_s``, then SIGKILL. Returns the PIDs that were running."""
    running = [(p, s) for p, s in pids if alive(p, s)]
    for pid, _ in running:
        _signal(pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and any(alive(p, s) for p, s in running):
        _reap()
        time.sleep(0.02)
    for pid, started in running:
        if alive(pid, started):
            _signal(pid, signal.SIGKILL)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and any(alive(p, s) for p, s in running):
        _reap()
        time.sleep(0.02)
    return [p for p, _ in running]


def _signal(pid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, sig)


def _reap() -> None:
    """Collect exited children of this process (``up`` and ``down`` in one test process)."""
    try:
        while os.waitpid(-1, os.WNOHANG)[0] > 0:
            pass
    except ChildProcessError:
        pass


_libc = ctypes.CDLL(None, use_errno=True)
CLONE_NEWNET = 0x40000000


def setns_fd(fd: int) -> None:
    if _libc.setns(fd, CLONE_NEWNET) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"setns: {os.strerror(err)}")


def setns_path(path: str) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        setns_fd(fd)
    finally:
        os.close(fd)


@contextlib.contextmanager
def inside(netns: str) -> Iterator[None]:
    """Run the calling thread (and threads it starts) in namespace ``netns`` for the block."""
    home = os.open("/proc/thread-self/ns/net", os.O_RDONLY | os.O_CLOEXEC)
    try:
        try:
            setns_path(str(NETNS_DIR / netns))
        except OSError as err:
            raise LabError(f"cannot enter network namespace {netns}: {err.strerror}") from err
        try:
            yield
        finally:
            setns_fd(home)
    finally:
        os.close(home)


def listening(pid: int, port: int) -> bool:
    """Whether a TCP socket listens on ``port`` in the network namespace of ``pid``."""
    try:
        table = Path(f"/proc/{pid}/net/tcp").read_text().splitlines()[1:]
    except OSError:
        return False
    wanted = f":{port:04X}"
    return any(f[1].endswith(wanted) and f[3] == "0A" for f in (ln.split() for ln in table))
