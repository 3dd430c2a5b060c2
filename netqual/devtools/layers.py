"""Import direction check: ``python -m netqual.devtools.layers`` exits 1 when a module
imports one from a layer it may not use, or a third-party package reserved for another
layer (rich and typer only in the terminal edges, jinja2 only in the HTML report).

Layers, lowest first; each is a package prefix. The top level of ``netqual`` holds only
``__init__`` and ``__main__``: every other module lives in a room (a package):

    base      netqual.base           errors, units, names, choices, interrupts, the token
    model     netqual.model, .codec  records only (path, node, plan, policy, run, stats,
                                     fan-in, fleet, ...); their JSON forms shared by wire
                                     and files
    files     netqual.files          input files (TOML, bounds), safe outputs, run dirs,
                                     the results schema
    table     netqual.table          every path of a run as columns; Results
    planning  netqual.planning       inventory, plan, pairs, rounds, budget, estimate
    wire      netqual.agent.wire     the control channel both sides speak
    measure   netqual.agent, netqual.transports: the agent and the probes
    analysis  netqual.analysis, netqual.results, netqual.workload, netqual.campaign
    gate      netqual.gate           pass/fail judgement
    report    netqual.report         report.html, CSV
    render    netqual.render         terminal and CI text
    run       netqual.run, netqual.lab, netqual.vm: the coordinator side (no output)
    cli       netqual.cli            commands

base, model, files and table are the core. They may import (``ALLOWED`` below): model ->
base; files, table -> base, model; planning, wire -> core; measure -> core, planning,
wire, analysis (the doctor judges its own host path); analysis -> core, planning; gate,
report -> core, analysis; render -> core, planning, analysis, gate; run -> everything
below it except gate, report and render; cli -> all.

So the core returns results and only the edges (cli) write output; statistics never know
how samples travelled; the report shows waivers without importing the gate. A module
missing from ``MODULE_LAYERS`` is an error too: a new module says where it belongs.

Import cycles fail the check as well, within a layer too and whether the import runs or
sits under ``if TYPE_CHECKING:`` (a cycle the runtime never sees still ties two modules
together for every reader and for the type checker).
"""

from __future__ import annotations

import ast
import sys
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

PACKAGE = "netqual"

CORE = frozenset({"base", "model", "files", "table"})

ALLOWED: Mapping[str, frozenset[str]] = {
    "base": frozenset(),
    "model": frozenset({"base"}),
    "files": frozenset({"base", "model"}),
    "table": frozenset({"base", "model"}),
    "planning": CORE,
    "wire": CORE,
    # the doctor judges its own node's host path with the analysis' findings
    "measure": CORE | {"planning", "wire", "analysis"},
    "analysis": CORE | {"planning"},
    "gate": CORE | {"analysis"},
    "report": CORE | {"analysis"},
    "render": CORE | {"planning", "analysis", "gate"},
    "run": CORE | {"planning", "wire", "measure", "analysis"},
    "cli": CORE | {"planning", "wire", "measure", "analysis", "gate", "report", "render", "run"},
    "devtools": frozenset(),
}

# The top level of the package holds only these; every other module lives in a room (a
# package) whose name says what it holds, and each room belongs to one layer.
TOP_LEVEL = frozenset({"netqual", "netqual.__main__"})

# Package prefixes; the longest prefix wins ("netqual.agent.wire.protocol" -> wire).
MODULE_LAYERS: Mapping[str, str] = {
    "netqual": "base",  # the package itself: __version__
    "netqual.base": "base",  # errors, units, names, choices, interrupts, the shared token
    "netqual.model": "model",  # records only: path, node, plan, policy, run, stats, ...
    "netqual.codec": "model",  # JSON forms that both the wire and the results file speak
    "netqual.files": "files",  # input files (TOML, bounds), outputs, run directories, schema
    "netqual.table": "table",  # every path of a run as columns; Results
    "netqual.planning": "planning",
    "netqual.agent.wire": "wire",
    "netqual.agent": "measure",
    "netqual.transports": "measure",
    "netqual.engines": "measure",  # fetch engines (Mooncake, NIXL) in worker processes
    "netqual.analysis": "analysis",
    "netqual.results": "analysis",
    "netqual.workload": "analysis",
    "netqual.campaign": "analysis",  # campaign.toml, the DuckDB history store, trend, metrics
    "netqual.campaign.milestone": "gate",  # milestone gates: a profile plus the history rules
    "netqual.gate": "gate",
    "netqual.report": "report",
    "netqual.render": "render",
    "netqual.run": "run",
    "netqual.lab": "run",
    "netqual.vm": "run",  # the qemu guest with Soft-RoCE (real verbs where the host has none)
    "netqual.cli": "cli",
    "netqual.__main__": "cli",
    "netqual.devtools": "devtools",
}

# Third-party packages only some layers may import (the core never imports rich or typer).
RESERVED: Mapping[str, frozenset[str]] = {
    "rich": frozenset({"cli", "render"}),
    "typer": frozenset({"cli"}),
    "click": frozenset({"cli"}),
    "jinja2": frozenset({"report"}),
}


@dataclass(frozen=True)
class Violation:
    file: str
    line: int
    importer: str
    imported: str
    problem: str

    def __str__(self) -> str:
        return f"{self.file}:{self.line}: {self.importer} imports {self.imported}: {self.problem}"


def layer_of(module: str) -> str | None:
    """The layer of a module or a name inside it; the package entry matches only itself."""
    parts = module.split(".")
    for n in range(len(parts), 1, -1):
        layer = MODULE_LAYERS.get(".".join(parts[:n]))
        if layer is not None:
            return layer
    if module == PACKAGE or parts[1:] == ["__version__"]:
        return MODULE_LAYERS[PACKAGE]
    return None


def module_name(path: Path, root: Path) -> str:
    rel = path.relative_to(root).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _imports(tree: ast.AST, module: str, is_package: bool) -> Iterator[tuple[int, str]]:
    """Every module named by an import statement, at any depth (lazy imports count)."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = module.split(".")
                drop = node.level - 1 if is_package else node.level
                base = base[: len(base) - drop] if drop else base
                target = ".".join([*base, node.module] if node.module else base)
            else:
                target = node.module or ""
            yield node.lineno, target
            # "from netqual import hops" imports netqual.hops, not just the package.
            for alias in node.names:
                yield node.lineno, f"{target}.{alias.name}"


def check_file(path: Path, root: Path) -> list[Violation]:
    module = module_name(path, root)
    where = str(path)
    if path.name != "__init__.py" and module.count(".") == 1 and module not in TOP_LEVEL:
        problem = "a module at the top level of netqual: put it in a room (a package)"
        return [Violation(where, 1, module, module, problem)]
    own = layer_of(module)
    if own is None:
        return [Violation(where, 1, module, module, "module has no layer in MODULE_LAYERS")]
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=where)
    out = []
    seen: set[tuple[int, str]] = set()  # one report per statement and offending layer
    for line, target in _imports(tree, module, path.name == "__init__.py"):
        top = target.split(".")[0]
        if top == PACKAGE:
            if target == PACKAGE:
                continue
            layer = layer_of(target)
            if layer is None or layer == own or layer in ALLOWED[own] or (line, layer) in seen:
                continue
            seen.add((line, layer))
            out.append(Violation(where, line, module, target, f"{own} may not import {layer}"))
        elif top in RESERVED and own not in RESERVED[top]:
            allowed = ", ".join(sorted(RESERVED[top]))
            out.append(Violation(where, line, module, target, f"{top} is for {allowed} only"))
    return out


def check(root: Path) -> list[Violation]:
    """All violations under ``root`` (the directory that holds the netqual package):
    imports against the layer order, then import cycles."""
    out: list[Violation] = []
    paths = sorted((root / PACKAGE).rglob("*.py"))
    for path in paths:
        out.extend(check_file(path, root))
    return out + cycles(paths, root)


def _graph(paths: list[Path], root: Path) -> dict[str, dict[str, tuple[str, int]]]:
    """module -> {imported netqual module: (file, line)}; every import counts, lazy ones and
    those under ``if TYPE_CHECKING:`` too (a cycle hidden from the runtime is still one
    for the reader and for the type checker)."""
    modules = {module_name(p, root): p for p in paths}
    graph: dict[str, dict[str, tuple[str, int]]] = {}
    for module, path in modules.items():
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        edges: dict[str, tuple[str, int]] = {}
        for line, target in _imports(tree, module, path.name == "__init__.py"):
            parts = target.split(".")
            for n in range(len(parts), 0, -1):  # the module a name lives in
                name = ".".join(parts[:n])
                if name in modules:
                    if name not in (module, PACKAGE) and not module.startswith(name + "."):
                        edges.setdefault(name, (str(path), line))
                    break
        graph[module] = edges
    return graph


def cycles(paths: list[Path], root: Path) -> list[Violation]:
    """One violation per import cycle (a strongly connected group of modules), naming the
    modules in order and the file and line of its first import. A submodule importing its
    own package (the package's re-exports) is not counted: that is how packages work."""
    graph = _graph(paths, root)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups: list[list[str]] = []

    def visit(start: str) -> None:  # Tarjan's algorithm, iterative (no recursion limit)
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                group: list[str] = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    group.append(member)
                    if member == node:
                        break
                if len(group) > 1:
                    groups.append(group)

    for module in sorted(graph):
        if module not in index:
            visit(module)
    out = []
    for group in groups:
        members = set(group)
        first = min(group)
        path = [first]  # walk the cycle through the group from its first module
        while True:
            nxt = min(m for m in graph[path[-1]] if m in members)
            if nxt in path:
                path.append(nxt)
                break
            path.append(nxt)
        file, line = graph[path[0]][path[1]]
        out.append(Violation(file, line, path[0], path[1], "import cycle " + " -> ".join(path)))
    return out


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    root = Path(args[0]) if args else Path(__file__).resolve().parents[2]
    violations = check(root)
    for v in violations:
        print(v)
    if violations:
        print(f"{len(violations)} import(s) against the layer order or in a cycle", file=sys.stderr)
        return 1
    print(f"layers: {PACKAGE} imports point one way; 0 import cycles")
    return 0


if __name__ == "__main__":
    sys.exit(main())
