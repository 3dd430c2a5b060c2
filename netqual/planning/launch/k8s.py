"""``netqual inventory from-k8s``: the agent DaemonSet's pods and the nodes they run on.

Input is what ``kubectl get pods -o json`` and ``kubectl get nodes -o json`` print (a
``List`` with ``items``), read from files or fetched live with the official ``kubernetes``
client (an optional dependency). Each selected pod becomes one inventory node: its name
is the pod's node name (the DaemonSet starts the agent with ``--name`` = that node name),
its address the pod IP (the node's own address under ``hostNetwork``), its port the
container port named ``netqual`` (else the default). Rack, site (zone) and role come
from node labels.
"""

from __future__ import annotations

import contextlib
import importlib
import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from netqual.base.choices import ChoiceError, parse_choice
from netqual.base.errors import ClusterApiError, InputError, UsageError
from netqual.files.filedata import load_json
from netqual.model.node import DEFAULT_PORT, Node, Role
from netqual.planning.launch.draft import (
    DEFAULT_MAX_NODES,
    Draft,
    check_name,
    check_node_count,
    check_unique,
)

ZONE_LABEL = "topology.kubernetes.io/zone"
REGION_LABEL = "topology.kubernetes.io/region"
PORT_NAME = "netqual"


@dataclass(frozen=True)
class K8sRequest:
    selector: str = "app=netqual-agent"
    rack_label: str = "netqual.io/rack"
    role_label: str = "netqual.io/role"
    port: int = DEFAULT_PORT
    token_file: str | None = None
    max_nodes: int = DEFAULT_MAX_NODES


def parse_selector(text: str) -> list[tuple[str, str, str | None]]:
    """Equality-based label selector -> [(key, op, value)]: ``a=b``, ``a==b``, ``a!=b``, ``a``."""
    terms: list[tuple[str, str, str | None]] = []
    for raw in text.split(","):
        term = raw.strip()
        if not term:
            continue
        for op in ("!=", "==", "="):
            if op in term:
                key, _, value = term.partition(op)
                terms.append((key.strip(), "!=" if op == "!=" else "=", value.strip()))
                break
        else:
            if any(c in term for c in " ()!"):
                raise UsageError("--selector", f"only equality selectors are supported: {term!r}")
            terms.append((term, "exists", None))
    return terms


def _matches(labels: Mapping[str, str], terms: list[tuple[str, str, str | None]]) -> bool:
    for key, op, value in terms:
        if op == "exists" and key not in labels:
            return False
        if op == "=" and labels.get(key) != value:
            return False
        if op == "!=" and labels.get(key) == value:
            return False
    return True


def load_list(path: Path) -> dict[str, Any]:
    """A ``kubectl get ... -o json`` document from a file."""
    source = str(path)
    try:
        raw = path.read_bytes()
    except OSError as err:
        raise InputError(source, f"cannot read: {err.strerror or err}") from err
    data = load_json(raw, source, InputError)
    if not isinstance(data, dict) or not isinstance(data.get("items"), list):
        raise InputError(source, "expected `kubectl get ... -o json` output (a List)", "items")
    return data


def fetch_live(namespace: str, selector: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """Pods and nodes from the API server (in-cluster config, else ~/.kube/config)."""
    try:  # optional dependency, untyped: held as Any
        client: Any = importlib.import_module("kubernetes.client")
        config: Any = importlib.import_module("kubernetes.config")
    except ImportError:
        raise UsageError(
            "--pods",
            "reading the cluster live needs the kubernetes package "
            "(pip install 'netqual[k8s]'); or pass --pods FILE --nodes FILE saved with "
            "kubectl get pods -o json / kubectl get nodes -o json",
        ) from None
    try:
        try:
            config.load_incluster_config()
        except config.ConfigException:
            # $KUBECONFIG as it is now (the client reads it once, at import).
            config.load_kube_config(config_file=os.environ.get("KUBECONFIG"))
        api = client.CoreV1Api()
        pods = api.list_namespaced_pod(namespace, label_selector=selector)
        nodes = api.list_node()
        to_json = client.ApiClient().sanitize_for_serialization
        return to_json(pods), to_json(nodes)
    except Exception as err:  # the client raises many unrelated types: config, HTTP, TLS
        raise ClusterApiError(f"Kubernetes API: {_api_problem(err)}") from err


def _api_problem(err: Exception) -> str:
    """One line: 'HTTP 403 Forbidden: pods is forbidden: ...' or the error's first line."""
    status = getattr(err, "status", None)
    if status is None:
        return (str(err).splitlines() or [type(err).__name__])[0]
    message = ""
    with contextlib.suppress(ValueError, AttributeError):
        message = str(json.loads(getattr(err, "body", "") or "{}").get("message", ""))
    text = f"HTTP {status} {getattr(err, 'reason', '') or ''}".rstrip()
    return f"{text}: {message}" if message else text


def _str(obj: Any, *keys: str) -> str | None:
    for key in keys:
        if not isinstance(obj, Mapping):
            return None
        obj = obj.get(key)
    return obj if isinstance(obj, str) and obj else None


def _at(obj: Any, *keys: str) -> Any:
    """``obj[k1][k2]...``, or None where a level is missing or not an object: a listing
    is a file from anywhere, any level may be of another type."""
    for key in keys:
        if not isinstance(obj, Mapping):
            return None
        obj = obj.get(key)
    return obj


def _list(obj: Any, *keys: str) -> list[Any]:
    found = _at(obj, *keys)
    return found if isinstance(found, list) else []


def _labels(obj: Any) -> dict[str, str]:
    """An object's ``metadata.labels``, text values only."""
    found = _at(obj, "metadata", "labels")
    if not isinstance(found, Mapping):
        return {}
    return {k: v for k, v in found.items() if isinstance(k, str) and isinstance(v, str)}


def _pod_port(pod: Mapping[str, Any], default: int) -> int:
    for container in _list(pod, "spec", "containers"):
        for port in _list(container, "ports"):
            number = _at(port, "containerPort")
            if _at(port, "name") == PORT_NAME and type(number) is int and 0 < number < 65536:
                return number
    return default


def _node_labels(nodes: Mapping[str, Any]) -> dict[str, Mapping[str, str]]:
    labels: dict[str, Mapping[str, str]] = {}
    for item in nodes["items"]:
        name = _str(item, "metadata", "name")
        if name:
            labels[name] = _labels(item)
    return labels


def from_k8s(
    pods: Mapping[str, Any],
    nodes: Mapping[str, Any],
    req: K8sRequest,
    pods_source: str = "kubernetes pods",
    nodes_source: str = "kubernetes nodes",
) -> Draft:
    terms = parse_selector(req.selector)
    node_labels = _node_labels(nodes)
    out: list[Node] = []
    where: list[str] = []
    check_node_count(len(pods["items"]), req.max_nodes, pods_source, "items")
    for i, pod in enumerate(pods["items"]):
        pod_name = _str(pod, "metadata", "name") or f"#{i}"
        if not _matches(_labels(pod), terms):
            continue
        at = f"items[{i}] (pod {pod_name})"
        node_name = _str(pod, "spec", "nodeName")
        if node_name is None:
            raise InputError(pods_source, "pod is not scheduled on a node", f"{at}.spec.nodeName")
        address = _str(pod, "status", "podIP")
        if address is None:
            raise InputError(
                pods_source, "pod has no IP yet (pending? wait until it runs)", f"{at}.status.podIP"
            )
        check_name(node_name, pods_source, f"{at}.spec.nodeName")
        if node_name not in node_labels:
            raise InputError(
                nodes_source, f"no node {node_name!r} (pod {pod_name} runs there)", "items"
            )
        labels = node_labels[node_name]
        role_text = labels.get(req.role_label, "any")
        try:
            role = parse_choice(Role, role_text, f"metadata.labels.{req.role_label}")
        except ChoiceError as err:
            raise InputError(nodes_source, f"node {node_name}: {err.problem}", err.where) from None
        extra = {
            k: labels[v] for k, v in (("site", ZONE_LABEL), ("region", REGION_LABEL)) if v in labels
        }
        rack = labels.get(req.rack_label)
        out.append(Node(node_name, address, _pod_port(pod, req.port), role, rack, extra))
        where.append(at)
    if not out:
        raise InputError(pods_source, f"no pod matches the selector {req.selector!r}", "items")
    check_unique(out, pods_source, where)
    origin = f"Kubernetes pods {pods_source} (selector {req.selector}), nodes {nodes_source}"
    return Draft(tuple(out), origin, req.port, req.token_file)
