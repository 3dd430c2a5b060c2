"""Emulated fabric: racks, routers and delayed links in network namespaces (docs/lab.md).

Public API (used by ``netqual lab`` and ``netqual demo``)::

    reason = lab_available()        # None when usable, else why not ("needs root" ...)
    info = up()                     # default topology; agents running; info.inventory_path
    with inside(info.control_netns):  # the coordinator must run in the control namespace
        ...                         # coordinator run on info.inventory_path
    report = down()                 # removes every namespace, process and file it made

    with running() as info:           # up; the block runs in the control namespace; down
        ...
"""

from __future__ import annotations

from netqual.lab.fabric import (
    DownReport,
    LabInfo,
    LabStatus,
    ProcessStatus,
    down,
    lab_available,
    running,
    status,
    up,
)
from netqual.lab.layout import Kind, LabNode
from netqual.lab.state import default_state_dir
from netqual.lab.system import inside
from netqual.lab.topology import Topology, default_topology_path, load, load_default

__all__ = [
    "DownReport",
    "Kind",
    "LabInfo",
    "LabNode",
    "LabStatus",
    "ProcessStatus",
    "Topology",
    "default_state_dir",
    "default_topology_path",
    "down",
    "inside",
    "lab_available",
    "load",
    "load_default",
    "running",
    "status",
    "up",
]
