"""The RDMA transport over pyverbs. Importing this package never imports pyverbs.

Modules: ``verbs`` (the only pyverbs import, and builders), ``gid`` (GID selection),
``devices`` (device/port inventory and choice), ``conninfo`` (what the ends exchange),
``endpoint`` (verbs resources and QP transitions), ``pingpong``, ``bulk``, ``errors``
(completion and transition failures in words), ``session`` (the request and its limits),
``transport`` (``RdmaTransport``, ``transport_for_agent``). The package itself holds only
``RdmaOptions``: every process that names a transport imports it (``netqual agent``,
``run``, ``probe``), and importing ``transport`` loads all the modules above.
"""

from __future__ import annotations

from netqual.transports.rdma.options import RdmaOptions

__all__ = ["RdmaOptions"]
