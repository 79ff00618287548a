"""infra/kubernetes/ against what reads it, with no cluster: every manifest against its schema (Kubernetes' own
for each release kubernetes-validate bundles from the oldest we support, KServe's and the Prometheus Operator's
released CRD schemas in tests/data/kubernetes/), checkov's Kubernetes checks with a short list of accepted
findings, the pieces that name each other (labels, ports, the HPA's metric and the adapter's rule), and
docs/kubernetes.md's manifests equal to the files."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from scripts.tool_env import executable

ROOT = Path(__file__).resolve().parents[2]
MANIFESTS = ROOT / "infra" / "kubernetes"
CRD_SCHEMAS = ROOT / "tests" / "data" / "kubernetes" / "crd-schemas.json"
DRIVER = ROOT / "tests" / "tool_scripts" / "kubernetes_schemas.py"
PAGE = ROOT / "docs" / "kubernetes.md"
#: Helm values for the Prometheus adapter, not a Kubernetes object.
ADAPTER_VALUES = MANIFESTS / "prometheus-adapter-values.yaml"
#: The oldest Kubernetes release the manifests are for, and the newest kubernetes-validate knows.
KUBERNETES_VERSIONS = ["1.30.0", "1.37.0"]
LABELS = {"app.kubernetes.io/name": "oip-serverless"}

ALL = "*"
#: checkov's Kubernetes checks, over every manifest and the runtimes' pods: check id -> the kinds of resource it is
#: accepted on (ALL for any), with the reason. "Pod" is a ServingRuntime's pod (``runtime_pod``).
ACCEPTED: dict[str, frozenset[str] | str] = {
    # The image is the user's own build (docker build -f infra/Dockerfile.edge); its tag names the release, and a
    # digest can only be pinned once it is pushed to the user's registry.
    "CKV_K8S_43": ALL,
    # The manifests name no namespace, so that `kubectl apply -n NAMESPACE` puts them where the user chooses.
    "CKV_K8S_21": ALL,
    # A ServingRuntime has no pod-level fields for these: KServe builds the pod (and Knative its service account);
    # its container's own security context is set (non-root, read-only root, no capabilities).
    "CKV_K8S_38": frozenset({"Pod"}),
    "CKV_K8S_29": frozenset({"Pod"}),
}

pytestmark = pytest.mark.integration


def load(path: Path) -> dict[str, Any]:
    return yaml.safe_load(path.read_text())


def manifests() -> list[Path]:
    return sorted(p for p in MANIFESTS.glob("*.yaml") if p != ADAPTER_VALUES)


def runtime_pod(runtime: dict[str, Any]) -> dict[str, Any]:
    """A ServingRuntime's containers and volumes as the Pod KServe makes of them."""
    spec = runtime["spec"]
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": runtime["metadata"]["name"]},
        "spec": {"containers": spec["containers"], "volumes": spec.get("volumes", [])},
    }


def test_every_manifest_is_valid_against_its_schema() -> None:
    documents = {p.name: load(p) for p in manifests()}
    runtime = load(MANIFESTS / "servingruntime.yaml")
    documents["the ServingRuntime's pod"] = runtime_pod(runtime)
    job = {"documents": documents, "crd_schemas": str(CRD_SCHEMAS), "versions": KUBERNETES_VERSIONS}
    result = subprocess.run(
        [executable("kubernetes-validate", "python"), str(DRIVER)],
        input=json.dumps(job), capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    found = json.loads(result.stdout)
    assert sorted(found) == sorted(documents)
    assert not any(found.values()), json.dumps({name: errors for name, errors in found.items() if errors}, indent=1)


def test_the_schemas_refuse_a_field_they_do_not_name() -> None:
    """The validation above can fail: an unknown field, a wrong type, a missing required field."""
    runtime = load(MANIFESTS / "servingruntime.yaml")
    runtime["spec"]["containers"][0]["argz"] = []
    deployment = load(MANIFESTS / "deployment.yaml")
    deployment["spec"]["template"]["spec"]["terminationGracePeriodSeconds"] = "sixty"
    service = load(MANIFESTS / "service.yaml")
    del service["spec"]["ports"][0]["port"]
    monitor = load(MANIFESTS / "podmonitor.yaml")
    monitor["spec"]["podMetricsEndpoint"] = monitor["spec"].pop("podMetricsEndpoints")
    documents = {"runtime": runtime, "deployment": deployment, "service": service, "monitor": monitor}
    job = {"documents": documents, "crd_schemas": str(CRD_SCHEMAS), "versions": KUBERNETES_VERSIONS[-1:]}
    result = subprocess.run(
        [executable("kubernetes-validate", "python"), str(DRIVER)],
        input=json.dumps(job), capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    found = json.loads(result.stdout)
    assert "argz" in " ".join(found["runtime"])
    assert "sixty" in " ".join(found["deployment"])
    assert "port" in " ".join(found["service"])
    assert "podMetricsEndpoint" in " ".join(found["monitor"])


def test_checkov_finds_nothing_but_the_accepted(tmp_path: Path) -> None:
    for path in manifests():
        (tmp_path / path.name).write_text(path.read_text())
    for kind in ("servingruntime", "clusterservingruntime"):
        pod = runtime_pod(load(MANIFESTS / f"{kind}.yaml"))
        (tmp_path / f"{kind}-pod.yaml").write_text(yaml.safe_dump(pod))
    result = subprocess.run(
        [executable("checkov"), "--directory", str(tmp_path), "--framework", "kubernetes", "--output", "json",
         "--compact", "--skip-download", "--quiet"],
        capture_output=True, text=True, timeout=600, env={"BC_SKIP_MAPPING": "TRUE", "PATH": "/usr/bin:/bin"},
    )  # fmt: skip
    assert result.stdout.strip(), result.stderr[-3000:]
    report = json.loads(result.stdout)
    reports = report if isinstance(report, list) else [report]
    assert all(r["summary"]["parsing_errors"] == 0 for r in reports), reports
    assert sum(r["summary"]["passed"] for r in reports) > 50
    failed = [check for r in reports for check in r["results"]["failed_checks"]]
    new = [
        f"{c['check_id']} {c['resource']}: {c['check_name']}"
        for c in failed
        if ACCEPTED.get(c["check_id"], frozenset()) != ALL
        and c["resource"].split(".")[0] not in ACCEPTED.get(c["check_id"], frozenset())
    ]
    assert not new, "\n".join(new)
    # The runtimes' pods were checked too.
    assert {c["resource"].split(".")[0] for c in failed} >= {"Pod", "Deployment"}


def test_the_two_runtimes_are_one_spec() -> None:
    cluster, namespaced = load(MANIFESTS / "clusterservingruntime.yaml"), load(MANIFESTS / "servingruntime.yaml")
    assert (cluster["kind"], namespaced["kind"]) == ("ClusterServingRuntime", "ServingRuntime")
    assert cluster["spec"] == namespaced["spec"] and cluster["metadata"] == namespaced["metadata"]


def test_the_runtime_names_kserve_s_contract() -> None:
    spec = load(MANIFESTS / "servingruntime.yaml")["spec"]
    assert {f["name"] for f in spec["supportedModelFormats"]} == {"onnx", "triton"}
    assert spec["protocolVersions"] == ["v2", "grpc-v2"]
    (container,) = spec["containers"]
    assert container["name"] == "kserve-container"  # the container KServe merges an InferenceService's into
    assert "--model_name={{.Name}}" in container["args"] and "--model_dir=/mnt/models" in container["args"]
    context = container["securityContext"]
    assert context["runAsNonRoot"] and context["readOnlyRootFilesystem"] and context["capabilities"]["drop"] == ["ALL"]
    assert context["runAsUser"] != 0
    # A read-only root: oip serve's statistics directory and Python's temporary files go to a volume of their own.
    assert {"name": "tmp", "mountPath": "/tmp"} in container["volumeMounts"]


def test_the_plain_manifests_name_each_other() -> None:
    deployment = load(MANIFESTS / "deployment.yaml")
    pod = deployment["spec"]["template"]
    (container,) = pod["spec"]["containers"]
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    assert deployment["spec"]["selector"]["matchLabels"] == LABELS and pod["metadata"]["labels"] == LABELS
    assert deployment["spec"]["strategy"]["rollingUpdate"]["maxUnavailable"] == 0
    service = load(MANIFESTS / "service.yaml")
    assert service["spec"]["selector"] == LABELS
    assert {p["targetPort"] for p in service["spec"]["ports"]} <= set(ports)
    for name in ("pdb.yaml", "podmonitor.yaml"):
        assert load(MANIFESTS / name)["spec"]["selector"]["matchLabels"] == LABELS
    assert load(MANIFESTS / "networkpolicy.yaml")["spec"]["podSelector"]["matchLabels"] == LABELS
    opened = {p["port"] for p in load(MANIFESTS / "networkpolicy.yaml")["spec"]["ingress"][0]["ports"]}
    assert opened == set(ports)
    (endpoint,) = load(MANIFESTS / "podmonitor.yaml")["spec"]["podMetricsEndpoints"]
    assert endpoint["port"] in ports and endpoint["path"] == "/metrics"
    for name in ("hpa.yaml", "hpa-pending-requests.yaml"):
        target = load(MANIFESTS / name)["spec"]["scaleTargetRef"]
        assert (target["kind"], target["name"]) == ("Deployment", deployment["metadata"]["name"])


def test_the_custom_metric_is_the_one_the_adapter_serves() -> None:
    hpa = load(MANIFESTS / "hpa-pending-requests.yaml")
    (pods,) = [m["pods"] for m in hpa["spec"]["metrics"] if m["type"] == "Pods"]
    (rule,) = load(ADAPTER_VALUES)["rules"]["custom"]
    assert rule["name"]["as"] == pods["metric"]["name"] == "nv_inference_pending_request_count"
    assert rule["seriesQuery"].startswith("nv_inference_pending_request_count{")
    assert set(rule["resources"]["overrides"]) == {"namespace", "pod"}


YAML_BLOCK = re.compile(r'^```yaml title="([^"]+)"\n(.*?)^```$', re.MULTILINE | re.DOTALL)


def test_the_page_s_manifests_are_the_files() -> None:
    text = PAGE.read_text()
    blocks = YAML_BLOCK.findall(text)
    assert text.count("```yaml") == len(blocks), "every YAML block on the page names its file"
    for title, body in blocks:
        assert body == (ROOT / title).read_text(), title
    shown = {title for title, _ in blocks}
    assert shown >= {
        "infra/kubernetes/servingruntime.yaml",
        "infra/kubernetes/inferenceservice-iris.yaml",
        "infra/kubernetes/deployment.yaml",
        "infra/kubernetes/hpa-pending-requests.yaml",
        "infra/kubernetes/prometheus-adapter-values.yaml",
    }
