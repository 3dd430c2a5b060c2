"""Completion and QP-transition failures in plain words."""

from __future__ import annotations

import errno

import pytest

from netqual.transports.rdma import verbs
from netqual.transports.rdma.errors import (
    WC_STATUS,
    completion_error,
    transition_error,
    wc_status_text,
)


def test_wc_status_names_and_meaning() -> None:
    assert (
        wc_status_text(12) == "IBV_WC_RETRY_EXC_ERR (retry exceeded: peer unreachable or QP gone)"
    )
    assert wc_status_text(13).startswith("IBV_WC_RNR_RETRY_EXC_ERR (receiver not ready")
    assert "stale rkey" in wc_status_text(10)
    assert "error state" in wc_status_text(5)
    assert wc_status_text(99) == "IBV_WC_STATUS_99 (unknown status)"


def test_completion_error_message() -> None:
    err = completion_error("RDMA READ", 10, vendor_err=0x88)
    assert str(err) == (
        "rdma RDMA READ completion failed: IBV_WC_REM_ACCESS_ERR (remote access error: stale "
        "rkey or address (peer restarted?)), vendor error 0x88"
    )


def test_table_matches_the_installed_pyverbs_enum() -> None:
    try:
        verbs.load()
        from pyverbs import enums  # v44..v58
    except Exception as err:  # pyverbs absent, or v59+ where the enum module moved
        pytest.skip(f"installed pyverbs enum not available: {err}")
    for code, (name, _meaning) in WC_STATUS.items():
        assert int(getattr(enums, name)) == code, name


@pytest.mark.parametrize(
    ("state", "code", "link", "text"),
    [
        ("RTR", errno.EINVAL, "Ethernet", "bad GID index, path MTU or rd_atomic value"),
        (
            "RTR",
            errno.ETIMEDOUT,
            "Ethernet",
            "MAC address could not be resolved: the IP path is dead",
        ),
        ("RTR", errno.ETIMEDOUT, "InfiniBand", "the path to the peer did not answer"),
        ("INIT", errno.EINVAL, "InfiniBand", "bad port number or access flags"),
        ("RTS", errno.EPERM, "Ethernet", "EPERM"),
    ],
)
def test_transition_errors(state: str, code: int, link: str, text: str) -> None:
    message = str(transition_error(state, code, link))
    assert message.startswith(f"rdma QP transition to {state} failed (")
    assert text in message


def test_negative_errno_and_unknown() -> None:
    assert "EINVAL" in str(transition_error("RTR", -errno.EINVAL, "Ethernet"))
    assert "unknown error" in str(transition_error("RTS", None, "Ethernet"))
