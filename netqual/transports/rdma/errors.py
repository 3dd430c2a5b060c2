"""Verbs failures in plain words. A dead path is data: these become ProbeError reasons."""

from __future__ import annotations

import errno
import os

from netqual.base.errors import ProbeError

# enum ibv_wc_status (verbs.h); the meaning is what it usually says about the path.
WC_STATUS: dict[int, tuple[str, str]] = {
    0: ("IBV_WC_SUCCESS", "success"),
    1: ("IBV_WC_LOC_LEN_ERR", "local length error: message larger than the buffer"),
    2: ("IBV_WC_LOC_QP_OP_ERR", "local QP operation error: WR not valid for this QP"),
    3: ("IBV_WC_LOC_EEC_OP_ERR", "local EE context operation error"),
    4: ("IBV_WC_LOC_PROT_ERR", "local protection error: bad lkey or buffer outside the MR"),
    5: ("IBV_WC_WR_FLUSH_ERR", "flushed: the QP went to the error state after an earlier failure"),
    6: ("IBV_WC_MW_BIND_ERR", "memory window bind error"),
    7: ("IBV_WC_BAD_RESP_ERR", "bad response from the peer"),
    8: ("IBV_WC_LOC_ACCESS_ERR", "local access error: MR lacks LOCAL_WRITE"),
    9: ("IBV_WC_REM_INV_REQ_ERR", "remote invalid request: peer refused the operation or length"),
    10: ("IBV_WC_REM_ACCESS_ERR", "remote access error: stale rkey or address (peer restarted?)"),
    11: ("IBV_WC_REM_OP_ERR", "remote operation error: peer could not complete the request"),
    12: ("IBV_WC_RETRY_EXC_ERR", "retry exceeded: peer unreachable or QP gone"),
    13: ("IBV_WC_RNR_RETRY_EXC_ERR", "receiver not ready: peer alive but no receive posted"),
    14: ("IBV_WC_LOC_RDD_VIOL_ERR", "local RDD violation"),
    15: ("IBV_WC_REM_INV_RD_REQ_ERR", "remote invalid RD request"),
    16: ("IBV_WC_REM_ABORT_ERR", "remote aborted the operation"),
    17: ("IBV_WC_INV_EECN_ERR", "invalid EE context number"),
    18: ("IBV_WC_INV_EEC_STATE_ERR", "invalid EE context state"),
    19: ("IBV_WC_FATAL_ERR", "fatal device error"),
    20: ("IBV_WC_RESP_TIMEOUT_ERR", "response timeout"),
    21: ("IBV_WC_GENERAL_ERR", "general error (see the provider's vendor error)"),
    22: ("IBV_WC_TM_ERR", "tag matching error"),
    23: ("IBV_WC_TM_RNDV_INCOMPLETE", "tag matching rendezvous incomplete"),
}


def wc_status_text(status: int) -> str:
    """12 -> 'IBV_WC_RETRY_EXC_ERR (retry exceeded: peer unreachable or QP gone)'."""
    name, meaning = WC_STATUS.get(status, (f"IBV_WC_STATUS_{status}", "unknown status"))
    return f"{name} ({meaning})"


RETRY_EXC_ERR = 12


def ack_timeout_ms(exponent: int) -> float:
    """The IBA local ACK timeout per try: 4.096 us x 2^exponent (14 -> 67.1 ms)."""
    return 4.096e-3 * (1 << exponent)


def completion_error(
    what: str, status: int, vendor_err: int = 0, ack: tuple[int, int] | None = None
) -> ProbeError:
    """``ack``: (QP timeout exponent, retry count) the QP ran under; a retry-exceeded error
    then says how long the peer had to answer and which flag gives it longer."""
    vendor = f", vendor error {vendor_err:#x}" if vendor_err else ""
    hint = ""
    if status == RETRY_EXC_ERR and ack is not None:
        exponent, retries = ack
        hint = (
            f"; no ACK within {ack_timeout_ms(exponent):.4g} ms, {retries} retries "
            f"(QP timeout {exponent}: raise --rdma-qp-timeout for a slow responder, "
            "e.g. rxe/siw on a loaded host, or a long-haul link)"
        )
    return ProbeError(f"rdma {what} completion failed: {wc_status_text(status)}{vendor}{hint}")


_TRANSITION_HINTS: dict[tuple[str, int], str] = {
    ("RTR", errno.EINVAL): "bad GID index, path MTU or rd_atomic value for this port",
    ("RTR", errno.ETIMEDOUT): "the peer's MAC address could not be resolved: the IP path is dead",
    ("RTS", errno.EINVAL): "bad timeout, retry or rd_atomic value",
    ("INIT", errno.EINVAL): "bad port number or access flags",
}


def transition_error(state: str, code: int | None, link: str) -> ProbeError:
    """A failed ``ibv_modify_qp`` explained: errno name and what it usually means."""
    code = abs(code) if code is not None else None
    if code:
        name = errno.errorcode.get(code, str(code))
        text = f"{name}: {os.strerror(code)}"
    else:
        text = "unknown error"
    hint = _TRANSITION_HINTS.get((state, code or 0))
    if state == "RTR" and code == errno.ETIMEDOUT and link != "Ethernet":
        hint = "the path to the peer did not answer"
    suffix = f"; {hint}" if hint else ""
    return ProbeError(f"rdma QP transition to {state} failed ({text}){suffix}")
