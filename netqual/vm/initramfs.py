"""The guest's initramfs: static busybox, ``init.sh`` and the few modules needed to reach the
host's root over virtio-9p. Everything else (Python, rdma-core, perftest, the rest of the
modules) comes from the host at run time, so the image stays ~3 MB and builds in a second.
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from pathlib import Path

from netqual.base.errors import GuestError
from netqual.vm.kernel import Kernel

BUSYBOX_PATHS = ("/bin/busybox", "/usr/bin/busybox")  # Debian's busybox-static
EARLY_MODULES = ["virtio_pci", "9pnet_virtio", "9p", "overlay"]
INIT_SCRIPT = Path(__file__).with_name("init.sh")
_MODPROBE_HELPER = '#!/bin/sh\nexec chroot /newroot /sbin/modprobe "$@"\n'


def find_busybox() -> Path:
    for candidate in BUSYBOX_PATHS:
        path = Path(candidate)
        if path.is_file() and _is_static(path):
            return path
    raise GuestError(
        "no static busybox found (install Debian's busybox-static); the guest's initramfs needs one"
    )


def _is_static(path: Path) -> bool:
    """A static binary has no ELF interpreter (PT_INTERP): no ld.so line in ``ldd``."""
    proc = subprocess.run(["ldd", str(path)], capture_output=True, text=True, check=False)
    return "ld-linux" not in proc.stdout


def build_initramfs(kernel: Kernel, dest: Path) -> Path:
    """Write the initramfs (newc cpio, uncompressed) for ``kernel`` to ``dest``."""
    busybox = find_busybox()
    modules = kernel.load_order(EARLY_MODULES)
    with tempfile.TemporaryDirectory(prefix="netqual-initramfs.") as tmp_name:
        root = Path(tmp_name)
        for sub in ("bin", "proc", "sys", "dev", "lib/modules"):
            (root / sub).mkdir(parents=True)
        shutil.copy2(busybox, root / "bin" / "busybox")
        (root / "bin" / "sh").symlink_to("busybox")
        init = root / "init"
        shutil.copy2(INIT_SCRIPT, init)
        init.chmod(0o755)
        helper = root / "bin" / "modprobe-newroot"
        helper.write_text(_MODPROBE_HELPER)
        helper.chmod(0o755)
        order = []
        for ko in modules:
            rel = Path("lib/modules") / ko.name
            shutil.copy2(ko, root / rel)
            order.append(str(rel))
        (root / "modules.order").write_text("\n".join(order) + "\n")
        files = sorted(str(p.relative_to(root)) for p in root.rglob("*"))
        dest.parent.mkdir(parents=True, exist_ok=True)
        with dest.open("wb") as out:
            proc = subprocess.run(
                ["cpio", "--quiet", "-o", "-H", "newc"],
                input="\n".join(files).encode(),
                stdout=out,
                stderr=subprocess.PIPE,
                cwd=root,
                check=False,
            )
        if proc.returncode != 0:
            raise GuestError(f"cpio failed: {proc.stderr.decode(errors='replace').strip()}")
    return dest
