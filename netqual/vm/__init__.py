"""A qemu guest with real RDMA verbs (Soft-RoCE) for hosts whose kernel has none (docs/rdma.md).

The guest runs Debian's kernel package (downloaded and unpacked into a cache, never
installed) under TCG, and sees the host's root read-only through virtio-9p with a tmpfs
overlay, so it runs the host's own Python, netqual checkout and rdma-core::

    reason = qemu_unavailable()              # None when qemu can run here
    kernel = fetch_kernel()                  # apt-get download + dpkg-deb -x + depmod -b
    run = run_in_guest("netqual doctor > doctor.txt\n", out_dir, timeout_s=300)
    run.exit_code, run.timed_out, run.console_tail()   # files the script wrote: out_dir/*
"""

from __future__ import annotations

from netqual.vm.guest import run_in_guest, rxe_preamble
from netqual.vm.initramfs import build_initramfs
from netqual.vm.kernel import Kernel, cached_kernel, default_cache_dir, fetch_kernel
from netqual.vm.qemu import GuestRun, GuestSpec, boot, qemu_unavailable

__all__ = [
    "GuestRun",
    "GuestSpec",
    "Kernel",
    "boot",
    "build_initramfs",
    "cached_kernel",
    "default_cache_dir",
    "fetch_kernel",
    "qemu_unavailable",
    "run_in_guest",
    "rxe_preamble",
]
