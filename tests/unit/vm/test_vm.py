"""netqual.vm building blocks without booting: module order, the qemu command line, the
initramfs contents. The boot itself is tests/env/test_rxe_guest.py."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from netqual.base.errors import GuestError
from netqual.vm import GuestSpec, Kernel, build_initramfs, cached_kernel, qemu
from netqual.vm.initramfs import EARLY_MODULES
from netqual.vm.qemu import CLOCK_FILE, GuestRun, boot, clock_rate, qemu_command

DEP = """\
fs/9p/9p.ko: fs/fscache/fscache.ko fs/netfs/netfs.ko net/9p/9pnet.ko
net/9p/9pnet.ko:
net/9p/9pnet_virtio.ko: net/9p/9pnet.ko drivers/virtio/virtio_ring.ko drivers/virtio/virtio.ko
fs/fscache/fscache.ko: fs/netfs/netfs.ko
fs/netfs/netfs.ko:
drivers/virtio/virtio.ko:
drivers/virtio/virtio_ring.ko:
drivers/virtio/virtio_pci.ko: drivers/virtio/virtio_ring.ko drivers/virtio/virtio.ko
fs/overlayfs/overlay.ko:
"""


def _kernel(tmp_path: Path) -> Kernel:
    modules = tmp_path / "lib" / "modules" / "6.1.0-9-amd64"
    for line in DEP.splitlines():
        ko = modules / line.split(":")[0]
        ko.parent.mkdir(parents=True, exist_ok=True)
        ko.write_bytes(b"\x7fELF module " + ko.name.encode())
    (modules / "modules.dep").write_text(DEP)
    vmlinuz = tmp_path / "boot" / "vmlinuz-6.1.0-9-amd64"
    vmlinuz.parent.mkdir()
    vmlinuz.write_bytes(b"kernel")
    return Kernel("linux-image-6.1.0-9-amd64", "6.1.0-9-amd64", vmlinuz, modules)


def test_load_order_puts_dependencies_first_once(tmp_path: Path) -> None:
    kernel = _kernel(tmp_path)
    names = [p.name for p in kernel.load_order(["9p", "9pnet-virtio", "9p"])]
    assert names == [
        "netfs.ko",
        "fscache.ko",
        "9pnet.ko",
        "9p.ko",
        "virtio_ring.ko",
        "virtio.ko",
        "9pnet_virtio.ko",
    ]
    with pytest.raises(GuestError, match="has no module 'rdma_rxe'"):
        kernel.load_order(["rdma_rxe"])


def test_qemu_command_line(tmp_path: Path) -> None:
    kernel = _kernel(tmp_path)
    out = tmp_path / "out"
    cmd = qemu_command(kernel, out / "i.cpio", out / "run.sh", out, GuestSpec(cpus=3))
    text = " ".join(cmd)
    assert cmd[:3] == ["qemu-system-x86_64", "-accel", "tcg,thread=multi"]
    assert "-smp 3 " in text and "-m 3072 " in text and "-no-reboot" in cmd
    assert "path=/,mount_tag=hostroot,security_model=none,readonly=on,multidevs=remap" in text
    assert f"path={out},mount_tag=results" in text
    assert f"netqual.run={out}/run.sh" in text and f"netqual.out={out}" in text
    assert f"file:{out}/console.log" in text
    assert " tsc=reliable " in text  # the vDSO clock, not an emulated HPET read per call
    planted = qemu_command(kernel, out / "i", out / "run.sh", out, GuestSpec(kernel_args=("x=1",)))
    assert planted[planted.index("-append") + 1].endswith(" x=1")
    with pytest.raises(GuestError, match="cannot carry spaces or commas"):
        qemu_command(kernel, out / "i", out / "run.sh", tmp_path / "a,b", GuestSpec())


@pytest.mark.skipif(shutil.which("cpio") is None, reason="cpio is not installed")
def test_initramfs_holds_busybox_init_and_the_early_modules(tmp_path: Path) -> None:
    try:
        image = build_initramfs(_kernel_with_early(tmp_path), tmp_path / "initramfs.cpio")
    except GuestError as err:
        pytest.skip(str(err))  # no static busybox here
    listing = subprocess.run(
        ["cpio", "-it", "--quiet"], stdin=image.open("rb"), capture_output=True, check=True
    ).stdout.decode()
    files = set(listing.split())
    assert {"init", "bin/busybox", "bin/sh", "bin/modprobe-newroot", "modules.order"} <= files
    order = subprocess.run(
        ["cpio", "-i", "--to-stdout", "--quiet", "modules.order"],
        stdin=image.open("rb"),
        capture_output=True,
        check=True,
    ).stdout.decode()
    assert order.splitlines()[-1] == "lib/modules/overlay.ko"
    assert order.index("virtio.ko") < order.index("virtio_pci.ko")


def _kernel_with_early(tmp_path: Path) -> Kernel:
    kernel = cached_kernel()
    if kernel is not None:
        return kernel  # the real unpacked package, when this machine has fetched it
    fake = _kernel(tmp_path)
    assert all(fake.module_path(m) for m in EARLY_MODULES)
    return fake


def test_the_clock_rate_init_wrote(tmp_path: Path) -> None:
    assert clock_rate(tmp_path) is None  # not measured (no RTC in the guest)
    (tmp_path / CLOCK_FILE).write_text("28.26 48.74 3\n")
    assert clock_rate(tmp_path) == pytest.approx(6.83, abs=0.01)
    (tmp_path / CLOCK_FILE).write_text("garbled\n")
    assert clock_rate(tmp_path) is None


def _boots(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, rates: list[float | None]) -> list[int]:
    """boot() with qemu replaced by boots whose init measured ``rates`` in turn."""
    booted: list[int] = []

    def once(cmd: list[str], out_dir: Path, timeout_s: float, interactive: bool) -> GuestRun:
        rate = rates[len(booted)]
        booted.append(len(booted))
        (out_dir / CLOCK_FILE).unlink(missing_ok=True)
        if rate is not None:
            (out_dir / CLOCK_FILE).write_text(f"10.0 {10.0 + 3 * rate} 3\n")
        return GuestRun(0 if rate == 1.0 else None, False, 1.0, out_dir, None)

    monkeypatch.setattr(qemu, "qemu_unavailable", lambda: None)
    monkeypatch.setattr(qemu, "_boot_once", once)
    return booted


def test_a_guest_whose_clock_is_off_boots_again(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """init.sh powers a guest off before its script when its clock runs off the RTC (TCG's
    TSC calibration on a loaded host: ~7x in one boot in nine); the host boots it again."""
    booted = _boots(monkeypatch, tmp_path, [7.0, 1.0])
    run = boot(_kernel(tmp_path), tmp_path / "i", tmp_path / "run.sh", tmp_path / "o", 60.0)
    assert (len(booted), run.boots, run.exit_code) == (2, 2, 0)
    assert run.clock_rate == pytest.approx(1.0)


def test_a_clock_not_measured_or_right_boots_once(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    kernel = _kernel(tmp_path)
    measured: list[list[float | None]] = [[None], [1.0], [0.7]]
    for rates in measured:
        booted = _boots(monkeypatch, tmp_path, rates)
        run = boot(kernel, tmp_path / "i", tmp_path / "run.sh", tmp_path / "o", 60.0)
        assert (len(booted), run.boots) == (1, 1), rates


def test_a_clock_off_in_every_boot_is_an_error_naming_it(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    booted = _boots(monkeypatch, tmp_path, [7.0, 0.1, 7.0, 1.0])
    with pytest.raises(GuestError, match=r"clock ran off the host's in 3 boots .*7.00, 0.10, 7.00"):
        boot(_kernel(tmp_path), tmp_path / "i", tmp_path / "run.sh", tmp_path / "o", 60.0)
    assert len(booted) == 3
