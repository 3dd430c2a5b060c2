"""The node-pair grid both pages of the report draw: which nodes are rows, and which path
each node-pair cell shows. Shared by the main view (view.py) and the workload view
(workload.py), which must not import each other."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from netqual.analysis.matrix import matrix_nodes
from netqual.model.node import Node
from netqual.table.paths import IntArray
from netqual.table.run import Results

NODE_MATRIX_MAX = 48  # up to this many nodes the page draws one SVG cell per node pair


def report_nodes(results: Results) -> list[Node]:
    """The matrix rows, as the terminal orders them."""
    return matrix_nodes(results.nodes, results.paths)


def pair_rows(results: Results, order: Sequence[str]) -> IntArray:
    """An ``len(order)**2`` grid, row-major over ``order``: the path shown in each node-pair
    cell (its own direction, else the reverse one; the last such path of the table), -1
    where neither direction was measured. Indexing a grid, not a dict per path."""
    n = len(order)
    a, b = results.paths.codes(order)
    rows = np.arange(len(a), dtype=np.int64)
    ok = (a >= 0) & (b >= 0)
    forward = np.full(n * n, -1, dtype=np.int64)
    reverse = np.full(n * n, -1, dtype=np.int64)
    np.maximum.at(forward, a[ok] * n + b[ok], rows[ok])
    np.maximum.at(reverse, b[ok] * n + a[ok], rows[ok])
    grid: IntArray = np.where(forward >= 0, forward, reverse)
    return grid
