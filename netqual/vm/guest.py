"""One call from nothing to a finished guest run: kernel (cached), initramfs, script, boot."""

from __future__ import annotations

import shlex
from pathlib import Path

from netqual.vm.initramfs import build_initramfs
from netqual.vm.kernel import cached_kernel, fetch_kernel
from netqual.vm.qemu import GuestRun, GuestSpec, boot

RXE_NET_SCRIPT = Path(__file__).with_name("rxe-net.sh")
SCRIPT_FILE = "guest-run.sh"


def rxe_preamble(mtu: int = 1500) -> str:
    """Shell lines that bring up rxe0/rxe1 on a veth pair (198.18.0.1 <-> .2) in the guest."""
    return f"/bin/sh {shlex.quote(str(RXE_NET_SCRIPT))} {mtu} || exit 90\n"


def run_in_guest(
    script_text: str,
    out_dir: Path,
    timeout_s: float,
    *,
    rxe: bool = True,
    cache_dir: Path | None = None,
    spec: GuestSpec | None = None,
    interactive: bool = False,
) -> GuestRun:
    """Run ``script_text`` (POSIX sh) as root in a fresh guest; ``out_dir`` is writable at the
    same path inside. Downloads and unpacks the kernel package on first use."""
    kernel = cached_kernel(cache_dir) or fetch_kernel(cache_dir)
    out_dir = out_dir.resolve()
    out_dir.mkdir(parents=True, exist_ok=True)
    initrd = build_initramfs(kernel, out_dir / "initramfs.cpio")
    script = out_dir / SCRIPT_FILE
    script.write_text(
        "#!/bin/sh\n"
        + (rxe_preamble() if rxe else "")
        + f"cd {shlex.quote(str(out_dir))}\n"
        + script_text
    )
    return boot(kernel, initrd, script, out_dir, timeout_s, spec, interactive)
