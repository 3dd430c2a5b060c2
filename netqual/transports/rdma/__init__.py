"""The RDMA transport over pyverbs. Importing this package never imports pyverbs.

Modules: ``verbs`` (the only pyverbs import, and builders), ``gid`` (GID selection),
``devices`` (device/port inventory and choice), ``conninfo`` (what the ends exchange),
``endpoint`` (verbs resources and QP transitions), ``pingpong``, ``bulk``, ``errors``
(completion and transition failures in words), ``session`` (the request and its limits),
``transport`` (``RdmaTransport``).
"""

from __future__ import annotations

from netqual.transports.rdma.options import RdmaOptions
from netqual.transports.rdma.session import unavailable_message
from netqual.transports.rdma.transport import RdmaTransport, transport_for_agent

__all__ = ["RdmaOptions", "RdmaTransport", "transport_for_agent", "unavailable_message"]
