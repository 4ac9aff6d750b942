"""The node agent's manifests: the CRD's schema, the agent's RBAC, DaemonSet, overlays and policy.

Static: no API server. The CEL rules and the policy's behaviour are proven against a real one
in e2e/tests/test_agent_security.py.
"""

from __future__ import annotations

import copy
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.kube.structural import problems

MANIFESTS = Path(__file__).resolve().parents[2] / "manifests"
AGENT = MANIFESTS / "agent"
AGENT_USER = "system:serviceaccount:optsched-system:optsched-agent"

# The NodeGPUs contract's example object (field names are shared with the planner and other tools).
EXAMPLE = """
apiVersion: optsched.io/v1alpha1
kind: NodeGPUs
metadata: {name: gpu-node-1}
spec:
  migLayout:
  - gpu: 0
    instances:
    - {profile: 3g.40gb, start: 0}
    - {profile: 3g.40gb, start: 4}
status:
  backend: nvml
  driverVersion: "580.65.06"
  nvlinkIslands: [[0, 1, 2, 3, 4, 5, 6, 7]]
  gpus:
  - index: 0
    minor: 0
    uuid: GPU-8f6e4c1a-...
    pciBusId: "00000000:18:00.0"
    numa: 0
    island: 0
    product: NVIDIA-H100-80GB-HBM3
    memoryMiB: 81559
    clique: null
    health: {state: Healthy, reason: ""}
    mig:
      capable: true
      enabled: false
      instances: [{profile: 1g.10gb, start: 0, size: 1, uuid: MIG-..., inUse: false}]
  pods:
  - namespace: team-a
    name: train-0
    containers:
    - name: main
      gpuUUIDs: [GPU-8f6e4c1a-...]
      gpuIndices: [0]
      migUUIDs: []
  migLayout: {state: Success, message: "", observedGeneration: 3}
  heartbeat: "2026-12-01T13:00:00Z"
"""


def docs(path: Path) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(path.read_text(encoding="utf-8")) if d]


def one(path: Path, kind: str) -> dict[str, Any]:
    [found] = [d for d in docs(path) if d["kind"] == kind]
    return found


def schema() -> dict[str, Any]:
    [version] = one(MANIFESTS / "crd" / "nodegpus.yaml", "CustomResourceDefinition")["spec"]["versions"]
    return dict(version["schema"]["openAPIV3Schema"])


def example() -> dict[str, Any]:
    return dict(yaml.safe_load(EXAMPLE))


def container() -> dict[str, Any]:
    return dict(one(AGENT / "daemonset.yaml", "DaemonSet")["spec"]["template"]["spec"]["containers"][0])


# --- every file -----------------------------------------------------------------------------


@pytest.mark.parametrize("folder", ["crd", "agent", "agent-mig", "agent-host-driver", "base"])
def test_every_kustomization_names_files_that_parse_into_named_objects(folder: str) -> None:
    kustomization = docs(MANIFESTS / folder / "kustomization.yaml")[0]
    for entry in kustomization.get("resources", []) + kustomization.get("components", []):
        target = MANIFESTS / folder / entry
        assert target.exists(), f"{folder}/kustomization.yaml names {entry}, which does not exist"
        for doc in docs(target) if target.is_file() else []:
            assert doc["apiVersion"] and doc["kind"] and doc["metadata"]["name"], f"{target}: {doc}"


def test_the_controller_install_carries_the_crd() -> None:
    assert "../crd" in docs(MANIFESTS / "base" / "kustomization.yaml")[0]["resources"]


# --- the CRD --------------------------------------------------------------------------------


def test_the_crd_is_the_cluster_scoped_nodegpus_of_the_contract() -> None:
    crd = one(MANIFESTS / "crd" / "nodegpus.yaml", "CustomResourceDefinition")
    spec = crd["spec"]
    assert (crd["metadata"]["name"], spec["group"], spec["scope"]) == (
        "nodegpus.optsched.io",
        "optsched.io",
        "Cluster",
    )
    assert (spec["names"]["kind"], spec["names"]["plural"], spec["names"]["shortNames"]) == (
        "NodeGPUs",
        "nodegpus",
        ["ngpu"],
    )
    [version] = spec["versions"]
    assert (version["name"], version["served"], version["storage"]) == ("v1alpha1", True, True)
    assert version["subresources"] == {"status": {}}


def test_the_contracts_example_is_valid() -> None:
    assert problems(example(), schema()) == []


def _broken(change: str) -> dict[str, Any]:
    """The example with one field changed: ``change`` is 'dotted.path=yaml value' (list items by index)."""
    path, _, raw = change.partition("=")
    obj = example()
    *parents, last = [int(p) if p.isdigit() else p for p in path.split(".")]
    target: Any = obj
    for part in parents:
        target = target[part]
    target[last] = yaml.safe_load(raw)
    return obj


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        ("status.gpus.0.health.state=Sick", "is not one of"),
        ("status.migLayout.state=Done", "is not one of"),
        ("status.backend=cuda", "is not one of"),
        ("spec.migLayout.0.instances.0.start=8", "above the maximum 7"),
        ("spec.migLayout.0.gpu=-1", "below the minimum 0"),
        ("spec.migLayout.0.instances.0.profile=half", "does not match"),
        ("status.gpus.0.memoryMiB=-1", "below the minimum 0"),
        ('status.gpus.0.pciBusId="18:00.0"', "does not match"),
        ("status.gpus.0.temperature=40", "unknown field"),
        ("status.gpus.0.island=null", "must not be null"),
        ("status.heartbeat=yesterday", "not an RFC 3339 date-time"),
        ("status.pods.0.name=null", "must not be null"),
        ("status.gpus=[{index: 0}, {index: 0}]", "duplicate entries for {'index': 0}"),
        ("spec.migLayout=[{gpu: 1, instances: []}, {gpu: 1, instances: []}]", "duplicate entries"),
        ("spec.migLayout.0.instances=[{profile: 1g.10gb}]", ".start: required"),
        ("status.gpus.0.health={reason: XID 79}", ".state: required"),
        ("status.nvlinkIslands=[[0, 1], [x]]", "expected integer"),
    ],
)
def test_the_schema_refuses_a_bad_field(change: str, reason: str) -> None:
    found = problems(_broken(change), schema())
    assert any(reason in p for p in found), found


def test_null_is_accepted_exactly_where_the_contract_says_unknown() -> None:
    assert problems(_broken("status.gpus.0.numa=null"), schema()) == []
    assert problems(_broken("status.gpus.0.clique=null"), schema()) == []


def _walk(node: dict[str, Any], path: str = "") -> list[tuple[str, dict[str, Any]]]:
    out = [(path, node)]
    for key, child in (node.get("properties") or {}).items():
        out += _walk(child, f"{path}.{key}")
    if "items" in node:
        out += _walk(node["items"], f"{path}[]")
    return out


def test_the_schema_is_structural_and_bounded() -> None:
    """Every node typed; every list and string bounded (CEL cost), every list's merge type explicit."""
    found = []
    for path, node in _walk(schema()):
        if path == ".metadata":
            continue
        if "type" not in node:
            found.append(f"{path}: no type")
        if node.get("type") == "array" and not {"maxItems", "x-kubernetes-list-type"} <= node.keys():
            found.append(f"{path}: list without maxItems or x-kubernetes-list-type")
        free = path in (".apiVersion", ".kind") or {"maxLength", "enum", "format"} & node.keys()
        if node.get("type") == "string" and not free:
            found.append(f"{path}: unbounded string")
        for key in node.get("x-kubernetes-list-map-keys", []):
            if key not in node["items"].get("required", []):
                found.append(f"{path}: map key {key} is not required")
    assert found == []


def test_the_mig_layout_carries_cel_rules_on_bounded_lists() -> None:
    layout = schema()["properties"]["spec"]["properties"]["migLayout"]
    instances = layout["items"]["properties"]["instances"]
    for node in (layout, instances):
        assert node["x-kubernetes-validations"] and node["maxItems"] <= 64
        for rule in node["x-kubernetes-validations"]:
            assert rule["rule"].startswith("self.all(") and rule["message"]


def _schema_at(path: str) -> dict[str, Any] | None:
    """The schema node a printer column's JSONPath reads (list indices and filters step into items)."""
    node: dict[str, Any] | None = schema()
    for part in re.findall(r"\.(\w+)|\[[^\]]*\]", path):
        if node is None:
            return None
        node = node.get("items") if not part else (node.get("properties") or {}).get(part)
    return node


def test_every_printer_column_reads_a_field_of_the_schema() -> None:
    [version] = one(MANIFESTS / "crd" / "nodegpus.yaml", "CustomResourceDefinition")["spec"]["versions"]
    for column in version["additionalPrinterColumns"]:
        path = column["jsonPath"]
        if path.startswith(".metadata."):
            continue
        assert _schema_at(path) is not None, f"column {column['name']}: {path} is not in the schema"
        for inner in re.findall(r"\[\?\(@(\.[\w.]+)==", path):
            base = path.split("[?", 1)[0]
            assert _schema_at(base + "[]" + inner) is not None, f"column {column['name']}: filter {inner}"


# --- RBAC -----------------------------------------------------------------------------------

GRANTED = {
    ("", "nodes"): {"get", "list", "watch", "patch"},
    ("", "nodes/status"): {"patch"},
    ("optsched.io", "nodegpus"): {"get", "list", "watch", "create", "update", "patch"},
    ("optsched.io", "nodegpus/status"): {"update", "patch"},
    ("", "pods"): {"get", "list", "watch"},
    ("", "events"): {"create", "patch"},
    ("events.k8s.io", "events"): {"create", "patch"},
    # A simulated agent plays NVIDIA's DRA driver on simulated DRA nodes (never on real ones).
    ("resource.k8s.io", "resourceslices"): {"get", "list", "watch", "create", "update", "patch", "delete"},
    ("resource.k8s.io", "resourceclaims"): {"get", "list", "watch"},
}


def test_the_agent_role_grants_exactly_what_the_agent_uses() -> None:
    role = one(AGENT / "rbac.yaml", "ClusterRole")
    granted: dict[tuple[str, str], set[str]] = {}
    for rule in role["rules"]:
        assert not rule.get("resourceNames") and not rule.get("nonResourceURLs"), rule
        for group in rule["apiGroups"]:
            for resource in rule["resources"]:
                granted.setdefault((group, resource), set()).update(rule["verbs"])
    assert granted == GRANTED
    assert not any("*" in (g, r) or "*" in v for (g, r), v in granted.items())


def test_the_role_is_bound_to_the_account_the_daemonset_runs_as() -> None:
    binding = one(AGENT / "rbac.yaml", "ClusterRoleBinding")
    account = one(AGENT / "serviceaccount.yaml", "ServiceAccount")["metadata"]["name"]
    namespace = docs(AGENT / "kustomization.yaml")[0]["namespace"]
    assert binding["roleRef"] == {
        "apiGroup": "rbac.authorization.k8s.io",
        "kind": "ClusterRole",
        "name": "optsched-agent",
    }
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": account, "namespace": namespace}]
    pod = one(AGENT / "daemonset.yaml", "DaemonSet")["spec"]["template"]["spec"]
    assert pod["serviceAccountName"] == account and pod["automountServiceAccountToken"] is True
    assert f"system:serviceaccount:{namespace}:{account}" == AGENT_USER


# --- the DaemonSet --------------------------------------------------------------------------


def _mount(spec: dict[str, Any], path: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """(volumeMount, volume) of the first container's mount at ``path``."""
    [mount] = [m for m in spec["containers"][0]["volumeMounts"] if m["mountPath"] == path]
    [volume] = [v for v in spec["volumes"] if v["name"] == mount["name"]]
    return mount, volume


def test_the_agent_runs_the_controllers_image_with_its_node_name() -> None:
    agent = container()
    deployment = one(MANIFESTS / "base" / "deployment.yaml", "Deployment")
    assert agent["image"] == deployment["spec"]["template"]["spec"]["containers"][0]["image"]
    assert agent["command"] + agent["args"] == [
        "optsched",
        "agent",
        "--node=$(NODE_NAME)",
        "--metrics-port=9401",
        "--state-dir=/var/lib/optsched-agent",
    ]
    env = {e["name"]: e for e in agent["env"]}
    assert env["NODE_NAME"]["valueFrom"] == {"fieldRef": {"fieldPath": "spec.nodeName"}}


def test_the_agent_reads_the_pod_resources_socket_read_only_and_keeps_state_on_the_host() -> None:
    pod = one(AGENT / "daemonset.yaml", "DaemonSet")["spec"]["template"]["spec"]
    mount, volume = _mount(pod, "/var/lib/kubelet/pod-resources")
    assert mount["readOnly"] is True
    assert volume["hostPath"] == {"path": "/var/lib/kubelet/pod-resources", "type": "Directory"}
    mount, volume = _mount(pod, "/var/lib/optsched-agent")
    assert volume["hostPath"] == {"path": "/var/lib/optsched-agent", "type": "DirectoryOrCreate"}
    assert not any("hostPath" in v and v["hostPath"]["path"] == "/dev" for v in pod["volumes"])


def test_the_default_agent_holds_no_privilege_and_no_capability() -> None:
    """uid 0 only to pass kubelet's root-only socket; nothing a capability or privilege would add."""
    pod = one(AGENT / "daemonset.yaml", "DaemonSet")["spec"]["template"]["spec"]
    security = pod["containers"][0]["securityContext"]
    assert security["privileged"] is False and security["allowPrivilegeEscalation"] is False
    assert security["capabilities"] == {"drop": ["ALL"]}
    assert security["readOnlyRootFilesystem"] is True
    assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    assert not {"hostNetwork", "hostPID", "hostIPC"} & pod.keys()
    assert all(
        m.get("readOnly") for m in pod["containers"][0]["volumeMounts"] if m["name"] == "pod-resources"
    )


def test_the_agent_is_probed_on_healthz_and_bounded() -> None:
    agent = container()
    ports = {p["name"]: p["containerPort"] for p in agent["ports"]}
    for probe in (agent["livenessProbe"], agent["readinessProbe"]):
        port = probe["httpGet"]["port"]
        assert probe["httpGet"]["path"] == "/healthz" and ports.get(port, port) == 9401
    assert agent["resources"] == {
        "requests": {"cpu": "50m", "memory": "128Mi"},
        "limits": {"cpu": "500m", "memory": "256Mi"},
    }


def test_the_agent_lands_on_gpu_nodes_only_and_stays_there() -> None:
    pod = one(AGENT / "daemonset.yaml", "DaemonSet")["spec"]["template"]["spec"]
    assert pod["nodeSelector"] == {"nvidia.com/gpu.present": "true"}
    assert pod["priorityClassName"] == "system-node-critical"
    tolerated = {(t["key"], t.get("effect")) for t in pod["tolerations"]}
    assert {("nvidia.com/gpu", "NoSchedule"), ("node.kubernetes.io/not-ready", "NoExecute")} <= tolerated
    assert pod["runtimeClassName"] == "nvidia"


# --- overlays -------------------------------------------------------------------------------


def json_patch(document: dict[str, Any], operations: list[dict[str, Any]]) -> dict[str, Any]:
    """RFC 6902 add, replace and remove, as kustomize applies them (a missing target is an error)."""
    out = copy.deepcopy(document)
    for op in operations:
        *parents, last = op["path"].lstrip("/").split("/")
        target: Any = out
        for part in parents:
            target = target[int(part)] if isinstance(target, list) else target[part]
        if op["op"] == "remove":
            del target[int(last) if isinstance(target, list) else last]
        elif isinstance(target, list):
            index = len(target) if last == "-" else int(last)
            target[index : index + (op["op"] == "replace")] = [op["value"]]
        elif op["op"] == "replace" and last not in target:
            raise KeyError(op["path"])
        else:
            target[last] = op["value"]
    return out


def overlaid(*folders: str) -> dict[str, Any]:
    daemonset = one(AGENT / "daemonset.yaml", "DaemonSet")
    for folder in folders:
        for patch in docs(MANIFESTS / folder / "kustomization.yaml")[0]["patches"]:
            assert patch["target"] == {"kind": "DaemonSet", "name": daemonset["metadata"]["name"]}
            daemonset = json_patch(daemonset, yaml.safe_load(patch["patch"]))
    return daemonset


def test_the_mig_overlay_is_the_agent_made_privileged_with_the_host_dev() -> None:
    assert docs(MANIFESTS / "agent-mig" / "kustomization.yaml")[0]["resources"] == ["../agent"]
    pod = overlaid("agent-mig")["spec"]["template"]["spec"]
    assert pod["containers"][0]["securityContext"]["privileged"] is True
    mount, volume = _mount(pod, "/dev")
    assert volume["hostPath"]["path"] == "/dev" and not mount.get("readOnly")
    env = {e["name"]: e.get("value") for e in pod["containers"][0]["env"]}
    assert env["NVIDIA_MIG_CONFIG_DEVICES"] == "all"
    assert _mount(pod, "/var/lib/kubelet/pod-resources")[0]["readOnly"] is True


@pytest.mark.parametrize("base", [(), ("agent-mig",)])
def test_the_host_driver_component_loads_nvml_from_the_host_instead_of_the_runtime(
    base: tuple[str, ...],
) -> None:
    kustomization = docs(MANIFESTS / "agent-host-driver" / "kustomization.yaml")[0]
    assert kustomization["kind"] == "Component"
    pod = overlaid(*base, "agent-host-driver")["spec"]["template"]["spec"]
    assert "runtimeClassName" not in pod
    library = "/usr/local/nvidia/lib64/libnvidia-ml.so.1"
    mount, volume = _mount(pod, library)
    assert mount["readOnly"] is True and volume["hostPath"]["type"] == "File"
    assert volume["hostPath"]["path"].endswith("/libnvidia-ml.so.1")
    env = {e["name"]: e.get("value") for e in pod["containers"][0]["env"]}
    assert env["LD_LIBRARY_PATH"] == str(Path(library).parent)


# --- the policy -----------------------------------------------------------------------------


def test_the_policy_matches_the_agents_writes_to_nodegpus_and_nodes() -> None:
    policy = one(AGENT / "policy.yaml", "ValidatingAdmissionPolicy")["spec"]
    rules = {
        (group, resource): set(rule["operations"])
        for rule in policy["matchConstraints"]["resourceRules"]
        for group in rule["apiGroups"]
        for resource in rule["resources"]
    }
    assert rules == {
        ("optsched.io", "nodegpus"): {"CREATE", "UPDATE", "DELETE"},
        ("optsched.io", "nodegpus/status"): {"CREATE", "UPDATE", "DELETE"},
        ("", "nodes"): {"UPDATE"},
        ("", "nodes/status"): {"UPDATE"},
    }
    [condition] = policy["matchConditions"]
    assert condition["expression"] == f"request.userInfo.username == '{AGENT_USER}'"
    assert policy["failurePolicy"] == "Fail"


def test_every_denial_is_forbidden_and_says_why() -> None:
    policy = one(AGENT / "policy.yaml", "ValidatingAdmissionPolicy")["spec"]
    variables = {v["name"]: v["expression"] for v in policy["variables"]}
    assert "authentication.kubernetes.io/node-name" in variables["boundNode"]
    for validation in policy["validations"]:
        assert validation["reason"] == "Forbidden"
        assert "variables.what" in validation["messageExpression"]
    binding = one(AGENT / "policy.yaml", "ValidatingAdmissionPolicyBinding")["spec"]
    assert binding == {"policyName": "optsched-agent-node-restriction", "validationActions": ["Deny"]}
