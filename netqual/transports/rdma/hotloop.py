"""The compiled ping-pong loop (hotloop.c), loaded with ctypes; pingpong.py falls back to its
Python loop whenever this module says the compiled one cannot run, and says why.

The shared library is built when netqual is installed (hatch_build.py: a C compiler and
libibverbs-dev's headers; a failed build never fails the install) and sits next to this
file. ctypes releases the GIL for the length of each call: the whole timed loop.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

LIB_NAME = "_hotloop.so"
LIB_PATH = Path(__file__).with_name(LIB_NAME)
ABI = 3  # NQ_ABI in hotloop.c
LOOP_ENV = "NETQUAL_RDMA_LOOP"  # "python" forces the Python loop (comparisons, debugging)
NOT_BUILT_HINT = (
    "rebuild netqual with a C compiler and libibverbs-dev installed "
    "(./setup.sh does both; see docs/rdma.md)"
)

# Status codes (enum in hotloop.c)
OK, TIMEOUT, ABORTED, WC_ERROR, POST_ERROR, SIGNAL = 0, 1, 2, 3, 4, 5


class LoopState(ctypes.Structure):
    """struct nq_loop: keep in step with hotloop.c (nq_layout checks the size)."""

    _fields_ = [
        ("qp", ctypes.c_uint64),
        ("send_addr", ctypes.c_uint64),
        ("recv_addr", ctypes.c_uint64),
        ("remote_addr", ctypes.c_uint64),
        ("lkey", ctypes.c_uint32),
        ("rkey", ctypes.c_uint32),
        ("size", ctypes.c_uint32),
        ("send_flags", ctypes.c_uint32),
        ("wr_id", ctypes.c_uint64),
        ("abort_fd", ctypes.c_int32),
        ("signal_fd", ctypes.c_int32),
        ("wc_status", ctypes.c_int32),
        ("vendor_err", ctypes.c_uint32),
        ("post_errno", ctypes.c_int32),
        ("posted", ctypes.c_uint64),
        ("unreaped", ctypes.c_uint64),
        ("round", ctypes.c_uint32),
        ("waiting", ctypes.c_int32),
        ("t0", ctypes.c_int64),
        ("blocks_addr", ctypes.c_uint64),
        ("got_addr", ctypes.c_uint64),
        ("marks_addr", ctypes.c_uint64),
        ("width", ctypes.c_uint32),
        ("mark", ctypes.c_uint32),
    ]


@dataclass(frozen=True)
class Layout:
    """What nq_layout reports: sizes and offsets of the verbs.h structs it was built with."""

    abi: int
    loop_bytes: int
    signal_every: int
    ctx_post_send: int
    ctx_poll_cq: int
    ctx_bytes: int
    qp_send_cq: int
    qp_qp_num: int
    qp_qp_type: int
    qp_bytes: int
    cq_bytes: int
    send_wr_bytes: int
    wc_bytes: int


@dataclass(frozen=True)
class Library:
    lib: ctypes.CDLL
    layout: Layout
    path: Path


_cache: dict[str, Library | str] = {}


def _load() -> Library | str:
    if not LIB_PATH.is_file():
        return f"the compiled loop was not built into this install ({NOT_BUILT_HINT})"
    try:
        lib = ctypes.CDLL(str(LIB_PATH))
    except OSError as err:
        return f"the compiled loop {LIB_PATH} does not load ({err})"
    out = (ctypes.c_int64 * 16)()
    count = lib.nq_layout(out, 16)
    layout = Layout(*[int(v) for v in out[:13]]) if count >= 13 else None
    if layout is None or layout.abi != ABI or layout.loop_bytes != ctypes.sizeof(LoopState):
        return f"the compiled loop {LIB_PATH} is from another netqual version ({NOT_BUILT_HINT})"
    loop_t = ctypes.POINTER(LoopState)
    lib.nq_initiate.argtypes = [
        loop_t,
        ctypes.c_uint32,
        ctypes.c_uint32,
        ctypes.c_int64,
        ctypes.c_void_p,
        ctypes.POINTER(ctypes.c_uint32),
    ]
    lib.nq_initiate.restype = ctypes.c_int
    lib.nq_respond.argtypes = [
        loop_t,
        ctypes.c_uint32,
        ctypes.c_int64,
        ctypes.POINTER(ctypes.c_uint32),
    ]
    lib.nq_respond.restype = ctypes.c_int
    lib.nq_check_qp.argtypes = [ctypes.c_uint64, ctypes.c_uint32]
    lib.nq_check_qp.restype = ctypes.c_int
    return Library(lib, layout, LIB_PATH)


def library() -> Library | str:
    """The loaded library, or why there is none (one line)."""
    if "lib" not in _cache:
        _cache["lib"] = _load()
    return _cache["lib"]


def forced_python() -> bool:
    return os.environ.get(LOOP_ENV, "").strip().lower() == "python"


_CHECK_PROBLEMS = {
    -1: "is not a pointer",
    -2: "is not readable memory",
    -3: "is not an RC QP with this QP number",
    -4: "has no context or send CQ",
}


FORCED = f"{LOOP_ENV}=python"
NO_QP = "this pyverbs does not give the compiled loop its QP"


def chosen(qp_address: Callable[[], int | None]) -> tuple[Library, int] | str:
    """The compiled loop and the ``ibv_qp *`` it is to drive, or why the Python loop runs
    (one line: ``FORCED``, the library not built or not loadable, ``NO_QP``). The one choice
    of ``netqual doctor`` (``status``) and of every ping-pong (``pingpong.compiled_loop``,
    which then checks the QP found). ``qp_address`` is asked only once the library loaded;
    None: this pyverbs gives no address."""
    if forced_python():
        return FORCED
    lib = library()
    if isinstance(lib, str):
        return lib
    address = qp_address()
    return NO_QP if address is None else (lib, address)


def status(qp_class: type | None) -> tuple[bool, str]:
    """(the compiled loop will run, in words) for ``netqual doctor``, before any QP exists:
    ``qp_class`` is the binding's QP class, whose objects must give up their ibv_qp
    address (where it lies in them stands for the address)."""
    from netqual.transports.rdma.verbs import pyverbs_qp_offset

    found = chosen(lambda: None if qp_class is None else pyverbs_qp_offset(qp_class))
    if isinstance(found, str):
        return False, f"python loop ({found})" if found == FORCED else f"python loop: {found}"
    return True, f"compiled loop ({found[0].path})"


def check_qp(lib: Library, address: int, qp_num: int) -> str | None:
    """None when ``address`` holds an ibv_qp for ``qp_num``; else why not. Never crashes on a
    wrong address (the C side reads it with process_vm_readv)."""
    rc = int(lib.lib.nq_check_qp(address, qp_num))
    if rc == 0:
        return None
    return f"the QP handle found at {address:#x} {_CHECK_PROBLEMS.get(rc, f'failed ({rc})')}"


@contextlib.contextmanager
def signal_wakeup() -> Iterator[int]:
    """A pipe that Python's C-level signal handler writes to (signal.set_wakeup_fd), for the
    loop to poll: with the GIL released no handler can run until the loop returns, so it
    returns when a signal came and is called again. -1 off the main thread (handlers run
    only there) or when someone else (asyncio) already owns the wakeup fd."""
    if threading.current_thread() is not threading.main_thread():
        yield -1
        return
    r, w = os.pipe()
    os.set_blocking(r, False)
    os.set_blocking(w, False)
    old = signal.set_wakeup_fd(w, warn_on_full_buffer=False)
    try:
        if old != -1:
            signal.set_wakeup_fd(old)
            yield -1
        else:
            yield r
    finally:
        if old == -1:
            signal.set_wakeup_fd(-1)
        os.close(r)
        os.close(w)


def drain(fd: int) -> None:
    with contextlib.suppress(BlockingIOError):
        while os.read(fd, 512):
            pass


def initiate(
    lib: Library,
    state: LoopState,
    *,
    warmup: int,
    iterations: int,
    deadline_ns: int,
    samples_address: int,
) -> tuple[int, int]:
    """Run the initiator's rounds in C, GIL released. Returns (status, rounds done)."""
    done = ctypes.c_uint32(0)
    rc = lib.lib.nq_initiate(
        ctypes.byref(state), warmup, iterations, deadline_ns, samples_address, ctypes.byref(done)
    )
    return int(rc), int(done.value)


def respond(lib: Library, state: LoopState, *, rounds: int, deadline_ns: int) -> tuple[int, int]:
    done = ctypes.c_uint32(0)
    rc = lib.lib.nq_respond(ctypes.byref(state), rounds, deadline_ns, ctypes.byref(done))
    return int(rc), int(done.value)
