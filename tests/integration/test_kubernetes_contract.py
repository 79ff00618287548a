"""The containers of infra/kubernetes/ run for real, as Kubernetes would run them, with no cluster: the image's
entrypoint (infra/Dockerfile.edge's ENTRYPOINT and ENV) with the manifest's arguments and environment, the ports it
declares swapped for held ones, and /mnt/models a folder laid out as KServe's storage initializer lays it out. Then
its declared ports are driven with tritonclient over HTTP and gRPC, and its probes' and Prometheus annotation's
paths are asked; the Deployment's probes, ports and grace period are checked against ``oip serve``'s drain."""

from __future__ import annotations

import contextlib
import json
import re
import shutil
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import onnxruntime
import pytest
import yaml

from handler.cli import build_parser
from tests.support.servers import HeldPort, environment, grpc_ready, http_ok, running

ROOT = Path(__file__).resolve().parents[2]
MANIFESTS = ROOT / "infra" / "kubernetes"
DOCKERFILE = ROOT / "infra" / "Dockerfile.edge"
DEMO = ROOT / "models"
ROWS = np.array([[5.1, 3.5, 1.4, 0.2], [6.7, 3.0, 5.2, 2.3], [5.9, 3.0, 4.2, 1.5]], dtype=np.float32)
#: What the kubelet's supervisor of a worker allows after the drain before it kills one (docs/serving.md).
KILL_AFTER_DRAIN = 10

pytestmark = pytest.mark.integration


def load(name: str) -> dict[str, Any]:
    return yaml.safe_load((MANIFESTS / name).read_text())


def image_entrypoint() -> tuple[list[str], dict[str, str]]:
    """The image's ENTRYPOINT as a command of this work tree (the file COPY puts there) and its ENV, with its
    WORKDIR (where the image copies the work tree's handler/, models/, ...) as this work tree."""
    text = DOCKERFILE.read_text()
    (workdir,) = re.findall(r"^WORKDIR (\S+)$", text, re.MULTILINE)
    (entrypoint,) = re.findall(r"^ENTRYPOINT (\[.*\])$", text, re.MULTILINE)
    (program,) = json.loads(entrypoint)
    (source,) = re.findall(rf"^COPY (\S+) /usr/local/bin/{re.escape(program)}$", text, re.MULTILINE)
    (env_line,) = re.findall(r"^ENV (.*)$", text, re.MULTILINE)
    env = {
        name: str(ROOT) + value.removeprefix(workdir) if value.startswith(workdir + "/") else value
        for name, value in (pair.split("=", 1) for pair in env_line.split())
    }
    return ["sh", str(ROOT / source)], env


@dataclass(frozen=True)
class Pod:
    """A container of a manifest, running: its declared ports and where they are held here."""

    ports: dict[int, int]

    def address(self, port: int) -> str:
        return f"127.0.0.1:{self.ports[port]}"


def arguments(args: list[str], ports: dict[int, int], substitutions: dict[str, str]) -> list[str]:
    """``args`` with KServe's placeholders and paths substituted and every ``=PORT`` of ``ports`` held instead."""
    made = []
    for arg in args:
        for old, new in substitutions.items():
            arg = arg.replace(old, new)
        name, sep, value = arg.partition("=")
        if sep and value.isdigit() and int(value) in ports:
            arg = f"{name}={ports[int(value)]}"
        made.append(arg)
    return made


@contextlib.contextmanager
def run_container(
    container: dict[str, Any], declared: list[int], substitutions: dict[str, str], extra_env: dict[str, str]
) -> Iterator[Pod]:
    """The container's command (the image's entrypoint) and args with its env, on held ports, until its readiness
    probe answers 200."""
    command, image_env = image_entrypoint()
    with contextlib.ExitStack() as held:
        ports = {port: held.enter_context(HeldPort()).port for port in declared}
        env = image_env | {e["name"]: e["value"] for e in container.get("env", [])} | extra_env
        # The work tree's oip (this interpreter's console script) on PATH, as the image installs it.
        env |= {"PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin", "PYTHONPATH": str(ROOT)}
        variables = environment(env, drop=("OIP_", "MODEL_REPOSITORY", "AIP_", "SAGEMAKER_", "AWS_LAMBDA"))
        argv = [*command, *arguments(container["args"], ports, substitutions)]
        pod = Pod(ports)
        probe = container["readinessProbe"]["httpGet"]
        url = f"http://{pod.address(probe['port'])}{probe['path']}"
        with running("container", argv, lambda _: http_ok(url), env=variables):
            yield pod


def iris_expected(model: Path) -> dict[str, np.ndarray]:
    session = onnxruntime.InferenceSession(str(model), providers=["CPUExecutionProvider"])
    names = [o.name for o in session.get_outputs()]
    return dict(zip(names, session.run(names, {"input": ROWS}), strict=True))


def drive(pod: Pod, container: dict[str, Any], http_port: int, grpc_port: int, model: str, file: Path) -> None:
    """Ready, metadata and iris answers equal to onnxruntime's, over tritonclient HTTP and gRPC."""
    import tritonclient.grpc as triton_grpc
    import tritonclient.http as triton_http

    expected = iris_expected(file)
    for module, port in ((triton_http, http_port), (triton_grpc, grpc_port)):
        client = module.InferenceServerClient(pod.address(port))
        try:
            assert client.is_server_live() and client.is_server_ready() and client.is_model_ready(model)
            metadata = client.get_model_metadata(model)
            inputs_meta = metadata["inputs"] if isinstance(metadata, dict) else json_inputs(metadata)
            assert inputs_meta == [{"name": "input", "datatype": "FP32", "shape": [-1, 4]}]
            given = module.InferInput("input", list(ROWS.shape), "FP32")
            given.set_data_from_numpy(ROWS)
            result = client.infer(model, [given])
            for name, value in expected.items():
                np.testing.assert_allclose(result.as_numpy(name), value, rtol=1e-6)
        finally:
            client.close()
    for probe in ("readinessProbe", "livenessProbe"):
        get = container[probe]["httpGet"]
        assert httpx.get(f"http://{pod.address(get['port'])}{get['path']}", timeout=10).status_code == 200, probe


def json_inputs(metadata: Any) -> list[dict[str, Any]]:
    """gRPC ``ModelMetadataResponse`` inputs as REST gives them."""
    return [{"name": t.name, "datatype": t.datatype, "shape": list(t.shape)} for t in metadata.inputs]


def scrape(pod: Pod, annotations: dict[str, str]) -> str:
    port, path = int(annotations["prometheus.kserve.io/port"]), annotations["prometheus.kserve.io/path"]
    response = httpx.get(f"http://{pod.address(port)}{path}", timeout=10)
    assert response.status_code == 200
    return response.text


def kserve_port(args: list[str], option: str) -> int:
    (value,) = [a.split("=", 1)[1] for a in args if a.startswith(f"{option}=")]
    return int(value)


def storage_initializer(layout: str, mnt: Path) -> Path:
    """/mnt/models as KServe's storage initializer leaves it for a storageUri pointing at: a Triton repository
    (``repository``), one model's directory (``model``: config.pbtxt and 1/model.onnx, like models/iris), or one
    model file (``file``); the iris model file in it."""
    if layout == "repository":
        shutil.copytree(DEMO, mnt)
        return mnt / "iris" / "1" / "model.onnx"
    if layout == "model":
        shutil.copytree(DEMO / "iris", mnt)
        return mnt / "1" / "model.onnx"
    mnt.mkdir()
    shutil.copy(DEMO / "iris" / "1" / "model.onnx", mnt / "model.onnx")
    return mnt / "model.onnx"


@pytest.mark.parametrize("layout", ["repository", "model", "file"])
def test_the_serving_runtime_serves_what_the_storage_initializer_leaves(tmp_path: Path, layout: str) -> None:
    runtime = load("servingruntime.yaml")
    (container,) = runtime["spec"]["containers"]
    service = load("inferenceservice-iris.yaml")
    name = service["metadata"]["name"]
    assert service["spec"]["predictor"]["model"]["runtime"] == runtime["metadata"]["name"]
    file = storage_initializer(layout, tmp_path / "models")
    http_port, grpc_port = kserve_port(container["args"], "--http_port"), kserve_port(container["args"], "--grpc_port")
    annotations = runtime["spec"]["annotations"]
    metrics_port = int(annotations["prometheus.kserve.io/port"])
    assert (http_port, grpc_port) == (8080, 9000)  # KServe's: Knative's default port, its Triton runtime's gRPC
    substitutions = {"{{.Name}}": name, "/mnt/models": str(tmp_path / "models")}
    # What KServe and Knative add to the container's environment.
    kserve_env = {"INFERENCE_SERVICE_NAME": name, "PORT": "8080", "K_SERVICE": f"{name}-predictor"}
    with run_container(container, [http_port, grpc_port, metrics_port], substitutions, kserve_env) as pod:
        assert grpc_ready(pod.address(grpc_port))
        drive(pod, container, http_port, grpc_port, "iris", file)
        metrics = scrape(pod, annotations)
    assert re.search(r'^nv_inference_request_success\{model="iris",version="1"\} 2\.0$', metrics, re.MULTILINE)
    # The metric the custom-metric HPA scales on (hpa-pending-requests.yaml) is one the runtime exports.
    assert re.search(r'^nv_inference_pending_request_count\{model="iris",version="1"\} 0\.0$', metrics, re.MULTILINE)


def test_the_grpc_inference_service_is_its_own_model_name(tmp_path: Path) -> None:
    """KServe names the model after its InferenceService: the gRPC one serves the same files as iris-grpc."""
    runtime = load("clusterservingruntime.yaml")
    (container,) = runtime["spec"]["containers"]
    service = load("inferenceservice-iris-grpc.yaml")
    name = service["metadata"]["name"]
    (h2c,) = service["spec"]["predictor"]["model"]["ports"]
    assert (h2c["name"], h2c["containerPort"]) == ("h2c", kserve_port(container["args"], "--grpc_port"))
    file = storage_initializer("model", tmp_path / "models")
    substitutions = {"{{.Name}}": name, "/mnt/models": str(tmp_path / "models")}
    declared = [8080, h2c["containerPort"], int(runtime["spec"]["annotations"]["prometheus.kserve.io/port"])]
    with run_container(container, declared, substitutions, {"INFERENCE_SERVICE_NAME": name}) as pod:
        drive(pod, container, 8080, h2c["containerPort"], name, file)


def test_every_argument_the_runtimes_give_is_an_option_of_oip_serve() -> None:
    """What KServe's runtimes pass (their own spellings: --model_name, --model_dir, --http_port, --grpc_port)
    parses; anything else is refused in one line, which the contract runs above would show."""
    for name in ("servingruntime.yaml", "clusterservingruntime.yaml"):
        (container,) = load(name)["spec"]["containers"]
        args = arguments(container["args"], {}, {"{{.Name}}": "iris"})
        parsed = build_parser().parse_args(["serve", *args])
        assert (parsed.model_name, parsed.model_repository) == ("iris", "/mnt/models")
        assert (parsed.port, parsed.grpc_port, parsed.metrics_port) == (8080, 9000, 8002)


def test_the_deployment_drains_within_its_grace_period(tmp_path: Path) -> None:
    """The grace period outlasts the preStop sleep, oip serve's drain and the kill after it; the probes and ports
    are the ones oip serve answers on (run for real)."""
    deployment = load("deployment.yaml")
    pod_spec = deployment["spec"]["template"]["spec"]
    (container,) = pod_spec["containers"]
    parsed = build_parser().parse_args(["serve", *container["args"]])
    assert parsed.drain_timeout is not None
    sleep = container["lifecycle"]["preStop"]["exec"]["command"]
    assert sleep[0] == "sleep" and shutil.which("sleep")
    assert pod_spec["terminationGracePeriodSeconds"] > int(sleep[1]) + parsed.drain_timeout + KILL_AFTER_DRAIN
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    assert (parsed.port, parsed.grpc_port, parsed.metrics_port) == (ports["http"], ports["grpc"], ports["metrics"])
    for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
        assert container[probe]["httpGet"]["port"] in ports
    # A probe names its port, which the kubelet resolves among the container's.
    resolved = container | {
        probe: {"httpGet": container[probe]["httpGet"] | {"port": ports[container[probe]["httpGet"]["port"]]}}
        for probe in ("readinessProbe", "livenessProbe")
    }
    with run_container(resolved, list(ports.values()), {}, {}) as pod:
        drive(pod, resolved, ports["http"], ports["grpc"], "iris", DEMO / "iris" / "1" / "model.onnx")
        assert "nv_inference_request_success" in scrape(
            pod, {"prometheus.kserve.io/port": str(ports["metrics"]), "prometheus.kserve.io/path": "/metrics"}
        )
