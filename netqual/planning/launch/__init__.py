"""Inventories from where clusters already run: hostfiles, Slurm allocations, Kubernetes.

Each source module turns its input into a ``Draft`` (``draft.py``), which checks the node
names and renders the inventory TOML that ``netqual run`` loads. Nothing here starts agents:
the examples in ``examples/slurm`` and ``examples/kubernetes`` do that with the cluster's
own launcher.
"""

from netqual.planning.launch.draft import Draft, render_inventory

__all__ = ["Draft", "render_inventory"]
