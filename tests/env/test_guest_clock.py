"""A guest whose clock runs off the host's is caught before its script runs.

Under TCG the guest's TSC is the host's, and on a loaded host the kernel's calibration of it
came out ~7x off in about one boot in nine: every timeout in the guest was 7x short (a
10 s acceptance wait expired in 1.4 s). init.sh measures the guest's seconds against the
RTC (qemu's, ticking with the host's clock) and powers off without running the script;
netqual.vm.qemu.boot boots again. Here the miscalibration is planted: ``tsc_early_khz``
at a seventh of the host's TSC rate (the kernel keeps an early value that its refinement
contradicts by more than 1%), in one boot allowed."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from netqual.base.errors import GuestError
from netqual.vm import GuestSpec, cached_kernel, qemu, qemu_unavailable, run_in_guest

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]


def _tsc_khz() -> int | None:
    """The TSC rate the guest sees (the host's), where this host's kernel says it."""
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("cpu MHz"):
            return int(float(line.split(":")[1]) * 1000)
    return None


def test_a_guest_clock_seven_times_fast_is_caught_before_the_script(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    if reason := qemu_unavailable():
        pytest.skip(f"qemu cannot run here: {reason}")
    if shutil.which("busybox") is None or cached_kernel() is None:
        pytest.skip("no guest kernel prepared (setup.sh: netqual lab rdma-shell --prepare)")
    khz = _tsc_khz()
    if khz is None:
        pytest.skip("/proc/cpuinfo gives no cpu MHz here")
    monkeypatch.setattr(qemu, "CLOCK_BOOTS", 1)
    spec = GuestSpec(kernel_args=(f"tsc_early_khz={khz // 7}",))
    with pytest.raises(GuestError, match=r"clock ran off the host's in 1 boot ") as caught:
        run_in_guest("touch ran\n", tmp_path, 300.0, rxe=False, spec=spec)
    rate = float(str(caught.value).split("per second: ")[1].split(";")[0])
    assert 3.0 < rate < 14.0, caught.value  # ~7: the planted error, measured by the RTC
    assert not (tmp_path / "ran").exists()  # the script never ran
    console = (tmp_path / "console.log").read_text(errors="replace")
    assert "not running the script" in console
