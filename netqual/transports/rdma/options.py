"""Per-node RDMA overrides: device, port, GID index, QP local ACK timeout
(``--rdma-device/--rdma-port/--gid-index/--rdma-qp-timeout``).

Each node reads its own overrides: device names and GID indexes differ between nodes.
An agent takes them from its command line or from ``NETQUAL_RDMA_DEVICE``,
``NETQUAL_RDMA_PORT``, ``NETQUAL_RDMA_GID_INDEX`` and ``NETQUAL_RDMA_QP_TIMEOUT``; a probe
request may carry a dict for the responder (``RdmaOptions.to_json``, read back with
``RdmaOptions.decode``), which then wins over the responder's own.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from netqual.agent.wire.messages import Fields
from netqual.base.errors import UsageError

ENV_DEVICE = "NETQUAL_RDMA_DEVICE"
ENV_PORT = "NETQUAL_RDMA_PORT"
ENV_GID_INDEX = "NETQUAL_RDMA_GID_INDEX"
ENV_QP_TIMEOUT = "NETQUAL_RDMA_QP_TIMEOUT"
# The IBA local ACK timeout exponent: 4.096 us x 2^N per try. 0 means "wait forever" in the
# IBA, so a vanished peer would never fail a probe: refused. 31 is the field's top.
QP_TIMEOUT_MIN, QP_TIMEOUT_MAX = 1, 31


@dataclass(frozen=True)
class RdmaOptions:
    device: str | None = None
    port: int | None = None
    gid_index: int | None = None
    qp_timeout: int | None = None  # IBA exponent; None: the endpoint's default (14)

    def __post_init__(self) -> None:
        if self.port is not None and not 1 <= self.port <= 255:
            raise UsageError("--rdma-port", f"port must be 1..255, got {self.port}")
        if self.gid_index is not None and not 0 <= self.gid_index <= 0xFFFF:
            raise UsageError("--gid-index", f"GID index must be 0..65535, got {self.gid_index}")
        if self.device is not None and not self.device:
            raise UsageError("--rdma-device", "device name must not be empty")
        if self.qp_timeout is not None and not (
            QP_TIMEOUT_MIN <= self.qp_timeout <= QP_TIMEOUT_MAX
        ):
            raise UsageError(
                "--rdma-qp-timeout",
                f"QP timeout exponent must be {QP_TIMEOUT_MIN}..{QP_TIMEOUT_MAX} "
                f"(4.096 us x 2^N per try; 0, wait forever, is not allowed), got {self.qp_timeout}",
            )

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> RdmaOptions:
        env = os.environ if env is None else env
        return cls(
            device=env.get(ENV_DEVICE) or None,
            port=_int(env.get(ENV_PORT), ENV_PORT),
            gid_index=_int(env.get(ENV_GID_INDEX), ENV_GID_INDEX),
            qp_timeout=_int(env.get(ENV_QP_TIMEOUT), ENV_QP_TIMEOUT),
        )

    @classmethod
    def decode(cls, f: Fields | None) -> RdmaOptions:
        """The options a peer sent (``to_json`` shape), field by field: a bad one is a
        BadRequestError naming the field, never a command-line error."""
        if f is None:
            return cls()

        def optional_int(key: str, high: int, low: int = 0) -> int | None:
            return None if f.body.get(key) is None else f.integer(key, low, high)

        return cls(
            device=f.optional_name("device"),
            port=optional_int("port", 255, low=1),
            gid_index=optional_int("gid_index", 0xFFFF),
            qp_timeout=optional_int("qp_timeout", QP_TIMEOUT_MAX, low=QP_TIMEOUT_MIN),
        )

    def to_json(self) -> dict[str, Any]:
        body: dict[str, Any] = {
            "device": self.device,
            "port": self.port,
            "gid_index": self.gid_index,
        }
        if self.qp_timeout is not None:  # absent when unset: older agents see what they knew
            body["qp_timeout"] = self.qp_timeout
        return body

    def over(self, base: RdmaOptions) -> RdmaOptions:
        """These options where set, ``base`` elsewhere."""
        return RdmaOptions(
            device=self.device if self.device is not None else base.device,
            port=self.port if self.port is not None else base.port,
            gid_index=self.gid_index if self.gid_index is not None else base.gid_index,
            qp_timeout=self.qp_timeout if self.qp_timeout is not None else base.qp_timeout,
        )

    @property
    def empty(self) -> bool:
        return (
            self.device is None
            and self.port is None
            and self.gid_index is None
            and self.qp_timeout is None
        )


def _int(text: str | None, name: str) -> int | None:
    if text is None or text.strip() == "":
        return None
    try:
        return int(text)
    except ValueError as err:
        raise UsageError(name, f"expected an integer, got {text!r}") from err
