"""Booting the guest: qemu with TCG (no KVM needed), the host's root shared read-only over
virtio-9p, and a second, writable 9p share for results. Bounded by a timeout; qemu is
killed when it runs past it."""

from __future__ import annotations

import shutil
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from netqual.base.errors import GuestError
from netqual.base.units import plural
from netqual.vm.kernel import Kernel

QEMU = "qemu-system-x86_64"
EXIT_FILE = "guest-exit"  # init.sh writes the script's exit status here
CONSOLE_FILE = "console.log"
CLOCK_FILE = "guest-clock"  # init.sh: guest seconds across a number of RTC seconds
CLOCK_RATE_OK = (0.6, 1.7)  # guest seconds per host second the guest may run at (init.sh)
CLOCK_BOOTS = 3  # boots before a guest whose clock is off is given up


@dataclass(frozen=True)
class GuestSpec:
    cpus: int = 2
    memory_mib: int = 3072
    kernel_args: tuple[str, ...] = ()  # appended to the kernel command line


@dataclass(frozen=True)
class GuestRun:
    """How one boot ended. ``exit_code`` is the guest script's; None if it never finished."""

    exit_code: int | None
    timed_out: bool
    elapsed_s: float
    out_dir: Path
    console_log: Path | None  # None when the console was the terminal
    clock_rate: float | None = None  # guest seconds per RTC second (None: not measured)
    boots: int = 1  # more than one where the guest's clock was off and it booted again

    def console_tail(self, lines: int = 40) -> str:
        if self.console_log is None or not self.console_log.is_file():
            return ""
        text = self.console_log.read_text(errors="replace").splitlines()
        return "\n".join(text[-lines:])


def qemu_unavailable() -> str | None:
    """None when qemu can boot the guest here, else why not."""
    if shutil.which(QEMU) is None:
        return f"{QEMU} is not installed (Debian: apt install qemu-system-x86)"
    proc = subprocess.run([QEMU, "-version"], capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        return f"{QEMU} -version failed: {proc.stderr.strip()}"
    return None


def _checked(path: Path, what: str) -> str:
    text = str(path.resolve())
    if any(c in text for c in " ,\t\n\"'"):
        raise GuestError(f"{what} {text!r}: the qemu command line cannot carry spaces or commas")
    return text


def qemu_command(
    kernel: Kernel,
    initrd: Path,
    script: Path,
    out_dir: Path,
    spec: GuestSpec,
    interactive: bool = False,
) -> list[str]:
    out = _checked(out_dir, "results directory")
    append = " ".join(
        [
            "console=ttyS0",
            "panic=-1",
            # TCG's TSC is the host's clock, one for every vCPU, but the kernel sees an AMD
            # CPU without constant_tsc on 2 vCPUs and falls back to the HPET: every clock
            # read a system call and an emulated MMIO access. With the TSC trusted it is a
            # vDSO read: importing netqual.cli in the guest took 12 s instead of 19-27 s.
            "tsc=reliable",
            "quiet" if not interactive else "loglevel=4",
            f"netqual.modules={_checked(kernel.modules_dir, 'modules directory')}",
            f"netqual.out={out}",
            f"netqual.run={_checked(script, 'guest script')}",
            *spec.kernel_args,
        ]
    )
    # -nodefaults drops the default serial port: name it (the terminal, with qemu's
    # monitor on Ctrl-A c, or a file).
    serial = "mon:stdio" if interactive else f"file:{out}/{CONSOLE_FILE}"
    console = ["-display", "none", "-serial", serial]
    return [
        QEMU,
        "-accel",
        "tcg,thread=multi",
        "-cpu",
        "max",
        "-smp",
        str(spec.cpus),
        "-m",
        str(spec.memory_mib),
        "-nodefaults",
        "-no-reboot",
        *console,
        "-kernel",
        str(kernel.vmlinuz),
        "-initrd",
        str(initrd),
        "-append",
        append,
        "-virtfs",
        "local,path=/,mount_tag=hostroot,security_model=none,readonly=on,multidevs=remap",
        "-virtfs",
        f"local,path={out},mount_tag=results,security_model=none",
    ]


def boot(
    kernel: Kernel,
    initrd: Path,
    script: Path,
    out_dir: Path,
    timeout_s: float,
    spec: GuestSpec | None = None,
    interactive: bool = False,
) -> GuestRun:
    """Boot, run ``script`` (a host path, run by /bin/sh in the guest), power off. A guest
    whose clock runs off the host's (init.sh measures it against the RTC before running the
    script: TCG's TSC calibration on a loaded host) is booted again, up to CLOCK_BOOTS
    times in all, within ``timeout_s`` in all."""
    if reason := qemu_unavailable():
        raise GuestError(reason)
    out_dir.mkdir(parents=True, exist_ok=True)
    cmd = qemu_command(kernel, initrd, script, out_dir, spec or GuestSpec(), interactive)
    start = time.monotonic()
    rates: list[float] = []
    while True:
        run = _boot_once(cmd, out_dir, timeout_s - (time.monotonic() - start), interactive)
        rate = clock_rate(out_dir)
        if rate is not None:
            rates.append(rate)
        off = rate is not None and not CLOCK_RATE_OK[0] <= rate <= CLOCK_RATE_OK[1]
        if not off or run.timed_out:
            break
        if len(rates) >= CLOCK_BOOTS:
            raise GuestError(
                f"the guest's clock ran off the host's in {plural(len(rates), 'boot')} (guest "
                f"seconds per second: {', '.join(f'{r:.2f}' for r in rates)}; its TSC calibration "
                "under TCG on a loaded host): its timeouts would be as far off"
            )
    return GuestRun(
        exit_code=run.exit_code,
        timed_out=run.timed_out,
        elapsed_s=time.monotonic() - start,
        out_dir=out_dir,
        console_log=run.console_log,
        clock_rate=rate,
        boots=max(1, len(rates)),
    )


def clock_rate(out_dir: Path) -> float | None:
    """Guest seconds per RTC second as init.sh measured them; None where it could not."""
    try:
        fields = (out_dir / CLOCK_FILE).read_text().split()
        t0, t1, rtc = (float(f) for f in fields)
    except (OSError, ValueError):
        return None
    return (t1 - t0) / rtc if rtc > 0 else None


def _boot_once(cmd: list[str], out_dir: Path, timeout_s: float, interactive: bool) -> GuestRun:
    for name in (EXIT_FILE, CLOCK_FILE):
        (out_dir / name).unlink(missing_ok=True)
    start = time.monotonic()
    timed_out = False
    # Interactive: qemu owns the terminal. Otherwise its own output is only error text.
    stdio = None if interactive else subprocess.DEVNULL
    with subprocess.Popen(cmd, stdin=stdio, stdout=stdio, stderr=None) as proc:
        try:
            proc.wait(timeout=max(timeout_s, 1.0))
        except subprocess.TimeoutExpired:
            timed_out = True
            proc.kill()
            proc.wait()
    elapsed = time.monotonic() - start
    exit_file = out_dir / EXIT_FILE
    code: int | None = None
    if exit_file.is_file():
        text = exit_file.read_text().strip()
        code = int(text) if text.lstrip("-").isdigit() else None
    return GuestRun(
        exit_code=code,
        timed_out=timed_out,
        elapsed_s=elapsed,
        out_dir=out_dir,
        console_log=None if interactive else out_dir / CONSOLE_FILE,
    )
