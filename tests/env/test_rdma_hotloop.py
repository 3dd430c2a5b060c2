"""The compiled ping-pong loop's edges: the build that may not happen, the QP handle that
is checked before use, and doctor saying which loop runs. The loop itself runs in
test_rdma_loop.py (every test, on both loops) and on real verbs in test_rxe_guest.py."""

from __future__ import annotations

import ctypes
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from paths import REPO

from netqual.agent import doctor
from netqual.transports.rdma import hotloop, verbs

ROOT = REPO


def _lib() -> hotloop.Library:
    lib = hotloop.library()
    if isinstance(lib, str):
        pytest.skip(lib)
    return lib


def _hatch_build() -> object:
    pytest.importorskip("hatchling", reason="hatchling not installed (pip install hatchling)")
    sys.path.insert(0, str(ROOT))
    try:
        import hatch_build
    finally:
        sys.path.remove(str(ROOT))
    return hatch_build


def test_a_missing_or_failing_compiler_only_says_why(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    build = _hatch_build()
    out = tmp_path / "_hotloop.so"
    monkeypatch.setenv("CC", str(tmp_path / "no-such-cc"))
    assert "did not run" in build.compile_hotloop(ROOT, out)  # type: ignore[attr-defined]
    monkeypatch.setenv("CC", "false")
    assert build.compile_hotloop(ROOT, out) == "false failed: (no output)"  # type: ignore[attr-defined]
    monkeypatch.setenv("CC", "true")
    assert build.compile_hotloop(ROOT, out) == "true wrote no _hotloop.so"  # type: ignore[attr-defined]
    monkeypatch.setenv("NETQUAL_NO_HOTLOOP", "1")
    assert build.compile_hotloop(ROOT, out) == "NETQUAL_NO_HOTLOOP=1"  # type: ignore[attr-defined]
    assert not out.exists()


@pytest.mark.slow
def test_wheel_carries_the_loop_and_installs_elsewhere(tmp_path: Path) -> None:
    """Built where gcc and libibverbs-dev are (setup.sh installs both): a platform wheel
    (any CPython: the library calls no Python API) whose installed copy loads."""
    _lib()
    _hatch_build()
    dist = tmp_path / "dist"
    build = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation",
         "-w", str(dist), str(ROOT)],
        capture_output=True, text=True, check=False, timeout=300,
    )  # fmt: skip
    assert build.returncode == 0, build.stderr[-3000:]
    (wheel,) = dist.glob("netqual-*.whl")
    assert wheel.name.endswith("-py3-none-linux_x86_64.whl"), wheel.name
    names = set(zipfile.ZipFile(wheel).namelist())
    assert "netqual/transports/rdma/_hotloop.so" in names
    assert "netqual/transports/rdma/hotloop.c" in names
    target = tmp_path / "site"
    zipfile.ZipFile(wheel).extractall(target)
    probe = (
        "import sys; from netqual.transports.rdma import hotloop; "
        "lib = hotloop.library(); assert not isinstance(lib, str), lib; "
        "assert str(lib.path).startswith(sys.argv[1]), lib.path; print(lib.layout.abi)"
    )
    run = subprocess.run(
        [sys.executable, "-c", probe, str(target)],
        cwd=tmp_path, env={"PYTHONPATH": str(target)},
        capture_output=True, text=True, check=False, timeout=120,
    )  # fmt: skip
    assert run.returncode == 0 and run.stdout.strip() == str(hotloop.ABI), run.stderr[-2000:]


def test_a_wrong_qp_handle_is_refused_not_followed() -> None:
    lib = _lib()
    assert hotloop.check_qp(lib, 0, 7) == "the QP handle found at 0x0 is not a pointer"
    assert hotloop.check_qp(lib, 8, 7) == "the QP handle found at 0x8 is not readable memory"
    zeros = ctypes.create_string_buffer(lib.layout.qp_bytes)
    assert hotloop.check_qp(lib, ctypes.addressof(zeros), 7) == (
        f"the QP handle found at {ctypes.addressof(zeros):#x} is not an RC QP with this QP number"
    )


def test_pyverbs_qp_handle_sits_after_the_base_struct() -> None:
    """Real pyverbs (where importable): its QP class is recognised and the offset is the
    base struct's size; a class that is not pyverbs' QP gives None (Python loop)."""
    try:
        pv = verbs.load()
    except Exception as err:
        pytest.skip(f"pyverbs not importable: {err}")
    offset = verbs.pyverbs_qp_offset(pv.qp.QP)
    assert offset is not None and offset == pv.qp.QP.__mro__[1].__basicsize__
    assert verbs.pyverbs_qp_offset(type("QP", (), {})) is None
    assert verbs.pyverbs_qp_address(object()) is None


def test_doctor_names_the_loop(monkeypatch: pytest.MonkeyPatch) -> None:
    try:
        verbs.load()
    except Exception as err:
        pytest.skip(f"pyverbs not importable: {err}")
    monkeypatch.setitem(hotloop._cache, "lib", "the compiled loop was not built (test)")
    report = doctor.local_report("n1")
    assert report["pingpong_loop"] == {
        "compiled": False,
        "text": "python loop: the compiled loop was not built (test)",
    }
    (warning,) = [p for p in report["problems"] if p["severity"] == doctor.WARNING]
    assert warning["message"].startswith(
        "the RDMA ping-pong runs its python loop: the compiled loop was not built (test)"
    )
    monkeypatch.setenv(hotloop.LOOP_ENV, "python")
    report = doctor.local_report("n1")
    assert report["pingpong_loop"]["text"] == "python loop (NETQUAL_RDMA_LOOP=python)"
    assert not [p for p in report["problems"] if p["severity"] == doctor.WARNING]
    monkeypatch.delenv(hotloop.LOOP_ENV)
    monkeypatch.delitem(hotloop._cache, "lib")
    if not isinstance(hotloop.library(), str):
        report = doctor.local_report("n1")
        assert report["pingpong_loop"]["compiled"] is True
        assert report["pingpong_loop"]["text"].startswith("compiled loop (")
