"""examples/kubernetes against the Kubernetes API schemas, offline (kubernetes-validate
ships them; strict mode rejects unknown fields), plus the contracts between the manifests
and ``netqual inventory from-k8s``. No live cluster is involved."""

from __future__ import annotations

import json
from typing import Any

import kubernetes_validate
import pytest
import yaml
from paths import REPO

EXAMPLES = REPO / "examples" / "kubernetes"
MANIFESTS = sorted(EXAMPLES.glob("*.yaml"))
# The oldest Kubernetes release still commonly run, and the newest the package knows.
VERSIONS = ["1.28.0", kubernetes_validate.latest_version()]


def _docs(text: str) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(text) if d]


def _variants() -> list[tuple[str, str]]:
    found = []
    for path in MANIFESTS:
        text = path.read_text()
        found.append((path.name, text))
        if "#rdma " in text:
            found.append((f"{path.name}+rdma", text.replace("#rdma ", "")))
    return found


def _kind(name: str, kind: str, text: str | None = None) -> dict[str, Any]:
    docs = _docs(text if text is not None else (EXAMPLES / name).read_text())
    return next(d for d in docs if d["kind"] == kind)


def test_examples_exist() -> None:
    assert [p.name for p in MANIFESTS] == ["agent-daemonset.yaml", "coordinator-job.yaml"]


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize(("name", "text"), _variants(), ids=[v[0] for v in _variants()])
def test_manifest_matches_kubernetes_schema(name: str, text: str, version: str) -> None:
    docs = _docs(text)
    assert docs, name
    for doc in docs:
        kubernetes_validate.validate(doc, version, strict=True)


def test_validator_rejects_a_misspelt_field() -> None:
    ds = _kind("agent-daemonset.yaml", "DaemonSet")
    ds["spec"]["template"]["spec"]["hostNetwrok"] = True
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(ds, VERSIONS[-1], strict=True)


def test_daemonset_runs_the_agent_as_from_k8s_expects() -> None:
    ds = _kind("agent-daemonset.yaml", "DaemonSet")
    pod = ds["spec"]["template"]["spec"]
    (agent,) = pod["containers"]
    assert pod["hostNetwork"] is True
    assert pod["nodeSelector"]
    assert ds["spec"]["template"]["metadata"]["labels"] == {"app": "netqual-agent"}
    args = agent["args"]
    assert args[0] == "agent"
    # The agent's name is the node name; from-k8s names inventory nodes by spec.nodeName.
    assert args[args.index("--name") + 1] == "$(NODE_NAME)"
    (env,) = agent["env"]
    assert env["valueFrom"]["fieldRef"]["fieldPath"] == "spec.nodeName"
    port = next(p for p in agent["ports"] if p["name"] == "netqual")
    assert args[args.index("--listen") + 1] == f"0.0.0.0:{port['containerPort']}"
    assert agent["readinessProbe"]["tcpSocket"]["port"] == "netqual"
    # The token comes from a Secret, mounted readable by its owner only.
    token = args[args.index("--token-file") + 1]
    mount = next(m for m in agent["volumeMounts"] if token.startswith(m["mountPath"] + "/"))
    volume = next(v for v in pod["volumes"] if v["name"] == mount["name"])
    assert volume["secret"]["defaultMode"] == 0o400
    # The recorded kubectl output the from-k8s tests read has this container port.
    recorded = json.loads((REPO / "tests" / "data" / "k8s" / "pods.json").read_text())
    assert recorded["items"][0]["spec"]["containers"][0]["ports"][0] == {
        **port,
        "protocol": "TCP",
    }


def test_rdma_variant_requests_the_device_and_ipc_lock() -> None:
    text = (EXAMPLES / "agent-daemonset.yaml").read_text()
    plain = _kind("", "DaemonSet", text)["spec"]["template"]["spec"]["containers"][0]
    rdma = _kind("", "DaemonSet", text.replace("#rdma ", ""))["spec"]["template"]["spec"]
    agent = rdma["containers"][0]
    assert "add" not in plain["securityContext"]["capabilities"]
    assert agent["securityContext"]["capabilities"]["add"] == ["IPC_LOCK"]
    assert agent["resources"]["limits"]["rdma/rdma_shared_device_a"] == "1"


def test_job_builds_its_inventory_from_the_daemonset_with_rbac_to_read_it() -> None:
    text = (EXAMPLES / "coordinator-job.yaml").read_text()
    job = _kind("", "Job", text)
    pod = job["spec"]["template"]["spec"]
    script = pod["containers"][0]["args"][0]
    assert "netqual inventory from-k8s" in script
    assert "--selector app=netqual-agent" in script
    assert "netqual run" in script
    assert "netqual gate" in script
    mounts = {m["name"]: m["mountPath"] for m in pod["containers"][0]["volumeMounts"]}
    volumes = {v["name"]: v for v in pod["volumes"]}
    assert "persistentVolumeClaim" in volumes["results"]
    assert '--out "$run"' in script and mounts["results"] == "/results"
    account = pod["serviceAccountName"]
    rules = {d["kind"]: d["rules"] for d in _docs(text) if d["kind"] in ("Role", "ClusterRole")}
    assert {"resources": ["pods"], "verbs": ["get", "list"], "apiGroups": [""]} in rules["Role"]
    assert {"resources": ["nodes"], "verbs": ["get", "list"], "apiGroups": [""]} in rules[
        "ClusterRole"
    ]
    for binding in ("RoleBinding", "ClusterRoleBinding"):
        subjects = _kind("", binding, text)["subjects"]
        assert [s["name"] for s in subjects] == [account]
