"""The results file -> records: ``load`` (results.json, validated against the schema) and
``results_from_dict``. Every problem names the file and the field.

Paths are decoded by msgspec into typed wire records (``results.wirepath``: the schema's
path definition as types and bounds, so every value of every path is checked) and
straight into the columns of a ``PathTable``; the rest of the document is small and goes
through the JSON Schema. A 1,024-node full mesh (523,776 paths, ~200 MB) loads in seconds
without half a million dict trees.
"""

from __future__ import annotations

import contextlib
import gc
import json
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import msgspec
import numpy as np

from netqual.analysis.decision import decide, undecided
from netqual.analysis.fleet import from_dict as fleet_from_dict
from netqual.analysis.interference import from_dict as interference_from_dict
from netqual.analysis.matrix import fill_tiers
from netqual.analysis.plausible import mark_impossible
from netqual.base.errors import ResultsFileError
from netqual.base.fields import FieldReader, is_number
from netqual.base.names import address_problem, name_problem, nic_name_problem
from netqual.codec.hostpath import from_dict as hosts_from_dict
from netqual.codec.plan import plan_from_dict
from netqual.files.filedata import checked
from netqual.files.schema import validate
from netqual.model.node import DEFAULT_PORT, Nic, Node, Role
from netqual.model.path import NotMeasured
from netqual.model.policy import Policy, PolicyFieldError
from netqual.model.run import SCHEMA_VERSION, Mode, RunKind, RunMeta
from netqual.model.stats import Metric
from netqual.model.suspects import Suspect
from netqual.model.workload import Workload
from netqual.planning.rails import split_endpoint
from netqual.results.fanin_codec import from_list as fanin_from_list
from netqual.results.multirail_codec import from_list as multirail_from_list
from netqual.results.summary import summarize
from netqual.results.suspects_codec import localisation_from_dict, suspect_from_dict
from netqual.results.wirepath import PATH_DECODER, convert_path, decode_path
from netqual.table.paths import PathTable
from netqual.table.run import Results
from netqual.table.store import CHUNK, concat


def _checked(rd: _Reader, key: str, value: str, problem: str | None) -> str:
    """``value`` where ``problem`` (a base.names rule) is None, else the file's error."""
    if problem is not None:
        raise rd.fail(key, problem)
    return value


def _nic(rd: _Reader) -> Nic:
    """A NIC as an inventory's ``nics`` have it (base.names: the inventory's rules)."""
    rail = rd.num("rail")
    if rail != int(rail) or rail < 0:
        raise rd.fail("rail", f"expected a rail number >= 0, got {rail:g}")
    name = rd.string("name")
    address = rd.string("address")
    device = None if rd.data.get("device") is None else rd.string("device")
    return Nic(
        name=_checked(rd, "name", name, nic_name_problem(name)),
        address=_checked(rd, "address", address, address_problem(address)),
        rail=int(rail),
        device=None
        if device is None
        else _checked(rd, "device", device, nic_name_problem(device, device=True)),
    )


def _endpoint_problem(name: str, agent: str | None) -> str | None:
    """Why ``name`` is not a node name or, below node ``agent``, not its "NODE/NIC"."""
    if agent is None:
        return name_problem(name)
    node, nic = split_endpoint(name)
    if node != agent or nic is None:
        return f"{name!r:.80} is not an endpoint of node {agent!r:.80} (NODE/NIC)"
    return nic_name_problem(nic)


def _node(rd: _Reader) -> Node:
    """A node as the inventory has it, held to the inventory's rules (base.names); an
    address may be empty (a run read from results.jsonl whose run.json lists no nodes)."""
    n = rd.data
    role = rd.member(Role, n.get("role") or Role.ANY.value, "role")
    agent = None if n.get("agent") is None else rd.string("agent")
    if agent is not None:
        _checked(rd, "agent", agent, name_problem(agent))
    name = rd.string("name")
    address = rd.string("address")
    agent_address = None if n.get("agent_address") is None else rd.string("agent_address")
    for key, value in (("address", address), ("agent_address", agent_address)):
        if value:
            _checked(rd, key, value, address_problem(value))
    return Node(
        name=_checked(rd, "name", name, _endpoint_problem(name, agent)),
        address=address,
        port=int(n.get("port") or DEFAULT_PORT),
        role=role,
        rack=rd.value("rack"),
        labels=dict(rd.value("labels") or {}),
        nics=tuple(_nic(rd.of(x, f"nics[{j}]")) for j, x in enumerate(n.get("nics") or [])),
        agent=agent,
        agent_address=agent_address,
        nic=None if n.get("nic") is None else _nic(rd.at("nic")),
    )


class _Reader(FieldReader[ResultsFileError]):
    """Typed reads from one object of a results file (``where`` in it), naming the file
    and the field on any mistake."""

    MISSING = "missing required key"

    def __init__(self, source: str, data: object, where: str = "") -> None:
        if not isinstance(data, Mapping):
            raise ResultsFileError(source, "expected an object", field=where)
        super().__init__(data, where)
        self.source = source

    def error(self, field: str, problem: str) -> ResultsFileError:
        return ResultsFileError(self.source, problem, field=field)

    def of(self, value: object, key: str) -> _Reader:
        """``value`` (found at ``key`` in this object) as an object of its own."""
        return _Reader(self.source, value, self.field(key))

    def at(self, key: str) -> _Reader:
        """The object at ``key``, which must be there."""
        return self.of(self.value(key), key)

    def num(self, key: str) -> float:
        v = self.value(key)
        if not is_number(v):
            raise self.fail(key, f"expected a number, got {v!r}")
        return float(v)

    def opt_num(self, key: str) -> float | None:
        return None if self.data.get(key) is None else self.num(key)

    def string(self, key: str) -> str:
        v = self.value(key)
        if not isinstance(v, str):
            raise self.fail(key, f"expected a string, got {v!r}")
        return v


_DEFAULT_POLICY = Policy()  # what a file written without a policy was judged by
_OLDER_DEMO = "(demo "  # how netqual demo named its inventory before run.kind existed


def _kind(run: _Reader, retest_of: Any) -> RunKind:
    """``run.kind``; a file from before it was recorded is judged the one way it was: a
    demo by its inventory's name, a retest by ``retest_of``, else a cluster run."""
    if run.data.get("kind") is not None:
        return run.member(RunKind, run.string("kind"), "kind")
    inventory = run.data.get("inventory")
    if isinstance(inventory, str) and inventory.startswith(_OLDER_DEMO):
        return RunKind.DEMO
    return RunKind.RETEST if retest_of is not None else RunKind.CLUSTER


def policy_from_dict(pol: Mapping[str, Any]) -> Policy:
    """A policy as ``policy_to_dict`` wrote it (absent keys: the defaults). Raises
    PolicyFieldError, ValueError, TypeError or OverflowError."""
    return Policy(
        metric=Metric(pol.get("metric", _DEFAULT_POLICY.metric.value)),
        safe_max_us=float(pol.get("safe_max_us", _DEFAULT_POLICY.safe_max_us)),
        unsafe_above_us=float(pol.get("unsafe_above_us", _DEFAULT_POLICY.unsafe_above_us)),
        min_samples=int(pol.get("min_samples", _DEFAULT_POLICY.min_samples)),
        fanin_knee_factor=float(pol.get("fanin_knee_factor", _DEFAULT_POLICY.fanin_knee_factor)),
        max_loss_pct=float(pol.get("max_loss_pct", _DEFAULT_POLICY.max_loss_pct)),
        max_engine_vs_probe=float(
            pol.get("max_engine_vs_probe", _DEFAULT_POLICY.max_engine_vs_probe)
        ),
    )


def _agents(run: _Reader) -> dict[str, dict[str, object]]:
    """run.agents: per node, the agent's version and clock offset the pre-flight saw."""
    if run.data.get("agents") is None:
        return {}
    agents = run.at("agents")
    out: dict[str, dict[str, object]] = {}
    for node, value in agents.data.items():
        entry = agents.of(value, node)
        version = entry.data.get("version")
        if version is not None and not isinstance(version, str):
            raise entry.fail("version", f"expected a string, got {version!r}")
        out[node] = {"version": version, "clock_offset_s": entry.opt_num("clock_offset_s")}
    return out


def _check_path_ends(table: PathTable, listed: int, rd: _Reader) -> None:
    """A path to a node the node list lacks names it by the same rules (each distinct
    name once: the listed ones were checked as nodes)."""
    for code, name in enumerate(table.names[listed:], listed):
        node, nic = split_endpoint(name)
        problem = name_problem(node) or (None if nic is None else nic_name_problem(nic))
        if problem is not None:
            i = int(np.flatnonzero((table.src == code) | (table.dst == code))[0])
            end = "src" if table.src[i] == code else "dst"
            raise rd.fail(f"paths[{i}].{end}", problem)


def _check_intervals(table: PathTable, rd: _Reader) -> None:
    """No interval with its low bound above its high one (columns: one comparison each)."""
    for m in Metric:
        low, high = table.ci95_low_us[m], table.ci95_high_us[m]
        bad = np.flatnonzero(low > high)
        if len(bad):
            i = int(bad[0])
            raise rd.fail(
                f"paths[{i}].rtt_us",
                f"the {m.value} 95% interval is inverted: low {low[i]:g} > high {high[i]:g}",
            )


def results_from_dict(
    d: Mapping[str, Any], source: str, decoded: PathTable | None = None
) -> Results:
    """Results from parsed JSON; ``decoded``: the paths, already decoded (``load``),
    else ``d["paths"]`` is converted here."""
    rd = _Reader(source, d)
    version = rd.value("schema_version")
    if version != SCHEMA_VERSION:
        raise rd.fail(
            "schema_version", f"unsupported version {version!r} (expected {SCHEMA_VERSION!r})"
        )
    runs = rd.at("run")
    run = runs.data
    pol = runs.value("policy")
    try:
        policy = policy_from_dict(pol)
    except PolicyFieldError as err:
        raise rd.fail(f"run.policy.{err.field}", err.problem) from err
    except (ValueError, TypeError, OverflowError) as err:
        raise rd.fail("run.policy", str(err)) from err
    try:
        mode = Mode(runs.string("mode"))
    except (ValueError, TypeError) as err:
        raise rd.fail("run", str(err)) from err
    try:
        plan = plan_from_dict(run.get("plan") or {})
    except (TypeError, ValueError) as err:
        raise rd.fail("run.plan", str(err)) from err
    meta = RunMeta(
        started_at=runs.string("started_at"),
        finished_at=runs.string("finished_at"),
        transport=runs.string("transport"),
        mode=mode,
        policy=policy,
        plan=plan,
        clock=dict(run.get("clock") or {}),
        host=dict(run.get("host") or {}),
        agents=_agents(runs),
        inventory=run.get("inventory"),
        kind=_kind(runs, d.get("retest_of")),
        schedule=dict(run.get("schedule") or {}),
        complete=run.get("complete", True) is not False,
        pairs_planned=run.get("pairs_planned")
        if isinstance(run.get("pairs_planned"), int)
        else None,
        plan_recorded=bool(run.get("plan")),
    )
    nodes: list[Node] = []
    seen: dict[str, int] = {}
    for i, n in enumerate(rd.value("nodes")):
        node = _node(rd.of(n, f"nodes[{i}]"))
        if node.name in seen:
            raise rd.fail(
                f"nodes[{i}].name",
                f"duplicate node name {node.name!r} (also nodes[{seen[node.name]}])",
            )
        seen[node.name] = i
        nodes.append(node)
    names = [n.name for n in nodes]
    if decoded is None:
        items = rd.value("paths")
        if not isinstance(items, list):
            raise rd.fail("paths", "expected a list")
        wire = [convert_path(p, source, f"paths[{i}]") for i, p in enumerate(items)]
        decoded = PathTable.from_paths(wire, names)
        del wire
    # A file without per-path tiers (older, or written by another tool) is judged by its
    # node list's racks and sites, never as one tier that blames every node for distance.
    # A decided file (rtt_verdict per path) is read back as its RTT classes and decided
    # again at the end, from everything the file holds: a file of any version is judged
    # by today's rule, and an edited verdict decides nothing.
    table = undecided(fill_tiers(concat([decoded], names), nodes))
    del decoded
    _check_path_ends(table, len(names), rd)
    _check_intervals(table, rd)
    paths = mark_impossible(table)
    rd.value("summary")
    tool = rd.value("tool")
    workload = None
    if d.get("workload") is not None:
        try:
            workload = Workload.from_json(d["workload"])
        except (KeyError, TypeError, ValueError, AttributeError) as err:
            raise rd.fail("workload", f"malformed workload: {err!r}") from err
    stored = d.get("suspects")
    suspects: list[Suspect] = []
    for i, entry in enumerate(stored or ()):
        try:
            suspects.append(suspect_from_dict(entry))
        except (KeyError, TypeError, ValueError) as err:
            raise rd.fail(f"suspects[{i}]", f"not a suspect: {err}") from err
    localisation = None
    if d.get("localisation") is not None:
        try:
            localisation = localisation_from_dict(d["localisation"])
        except ValueError as err:
            raise rd.fail("localisation", str(err)) from err
    retest_of = d.get("retest_of")
    if retest_of is not None and not isinstance(retest_of, str):
        raise rd.fail("retest_of", f"expected a string, got {retest_of!r}")
    not_measured = []
    for i, entry in enumerate(d.get("not_measured") or ()):
        nm = rd.of(entry, f"not_measured[{i}]")
        not_measured.append(
            NotMeasured(
                src=nm.string("src"),
                dst=nm.string("dst"),
                reason=nm.string("reason"),
                kind=str(entry.get("kind") or "configuration"),
            )
        )
    return decide(
        Results(
            run=meta,
            nodes=tuple(nodes),
            paths=paths,
            summary=summarize(paths, policy.metric),
            interference=(
                interference_from_dict(d["interference"], source)
                if d.get("interference") is not None
                else None
            ),
            tool_name=str(tool.get("name", "netqual")),
            tool_version=str(tool.get("version", "0")),
            schema_version=version,
            workload=workload,
            suspects=None if stored is None else tuple(suspects),
            retest_of=retest_of,
            not_measured=tuple(not_measured),
            fanin=fanin_from_list(d["fanin"], source) if d.get("fanin") is not None else (),
            fleet=fleet_from_dict(d["fleet"], source) if d.get("fleet") is not None else None,
            hosts=tuple(hosts_from_dict(node, doc) for node, doc in (d.get("hosts") or {}).items()),
            multirail=multirail_from_list(d["multirail"], source) if d.get("multirail") else (),
            localisation=localisation,
        )
    )


class _Document(msgspec.Struct):
    """The top level of results.json: paths kept as raw JSON (decoded one by one, typed),
    everything else as plain values for the JSON Schema. UNSET: the key is absent."""

    schema_version: Any = msgspec.UNSET
    tool: Any = msgspec.UNSET
    run: Any = msgspec.UNSET
    nodes: Any = msgspec.UNSET
    paths: list[msgspec.Raw] | msgspec.UnsetType = msgspec.UNSET
    summary: Any = msgspec.UNSET
    interference: Any = msgspec.UNSET
    workload: Any = msgspec.UNSET
    suspects: Any = msgspec.UNSET
    localisation: Any = msgspec.UNSET
    retest_of: Any = msgspec.UNSET
    not_measured: Any = msgspec.UNSET
    fanin: Any = msgspec.UNSET
    fleet: Any = msgspec.UNSET
    hosts: Any = msgspec.UNSET
    multirail: Any = msgspec.UNSET
    decision: Any = msgspec.UNSET  # derived: checked by the schema, decided again on load


def _json_error(source: str, text: str) -> ResultsFileError:
    """The stdlib parser's line and column for a file msgspec rejected as JSON."""
    try:
        json.loads(text)
    except json.JSONDecodeError as err:
        stripped = text.rstrip()
        truncated = err.pos >= len(stripped) - 1 or not stripped.endswith("}")
        hint = " (truncated? the file ends before the JSON does)" if truncated else ""
        return ResultsFileError(
            source, f"not valid JSON at line {err.lineno} column {err.colno}: {err.msg}{hint}"
        )
    return ResultsFileError(source, "not valid JSON")


def load(path: Path) -> Results:
    """Read and validate a results.json. Every problem is a ResultsFileError naming the field."""
    source = str(path)
    try:
        raw = path.read_bytes()
    except OSError as err:
        raise ResultsFileError(source, f"cannot read: {err.strerror or err}") from err
    try:
        raw.decode("utf-8")
    except UnicodeDecodeError as err:
        raise ResultsFileError(source, "not UTF-8 text") from err
    try:
        doc = msgspec.json.decode(raw, type=_Document)
    except msgspec.ValidationError as err:
        # not an object at the top level, or "paths" not a list
        if not raw.lstrip().startswith(b"{"):
            raise ResultsFileError(source, "expected a JSON object at the top level") from err
        raise ResultsFileError(source, "expected a list", field="paths") from err
    except msgspec.DecodeError as err:
        raise _json_error(source, raw.decode("utf-8")) from err
    except RecursionError as err:
        raise ResultsFileError(source, "nested too deeply") from err
    data = {
        f: getattr(doc, f)
        for f in doc.__struct_fields__
        if f != "paths" and getattr(doc, f) is not msgspec.UNSET
    }
    raws = [] if doc.paths is msgspec.UNSET else doc.paths
    checked(data, source, ResultsFileError)  # depth and number bounds of all but the paths
    # The schema checks everything but the paths (here an empty list); the typed decoder
    # checks every path against the schema's path definition.
    validate(data if doc.paths is msgspec.UNSET else {**data, "paths": []}, source)
    del doc
    names = [n["name"] for n in data.get("nodes") or () if isinstance(n.get("name"), str)]
    # Half a million small records, none of them in a reference cycle: the cyclic garbage
    # collector would only rescan them again and again (it doubles the decode time).
    # Decoded a chunk at a time into columns: all of them as records at once would take
    # ~2.7 KB per path (1.4 GB at 1,024 nodes) beside the file's bytes.
    with _no_gc():
        chunks = []
        for start in range(0, len(raws), CHUNK):
            part = raws[start : start + CHUNK]
            try:
                wire = list(map(PATH_DECODER.decode, part))
            except (msgspec.ValidationError, RecursionError):
                for i, r in enumerate(part, start):  # name the first bad path
                    decode_path(r, source, f"paths[{i}]")
                raise
            chunks.append(PathTable.from_paths(wire, names))
            del wire, part
        del raws, raw
        return results_from_dict(data, source, concat(chunks, names))


@contextlib.contextmanager
def _no_gc() -> Iterator[None]:
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()
