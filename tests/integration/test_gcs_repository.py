"""gs:// model repositories (adapters/repository/gcs.py) against a local GCS emulator (gcp-storage-emulator from
PyPI, in-process in the ``gcs`` tool venv with google-cloud-storage, the ``gcs`` extra, which the dev environment
does not hold): the repository under a prefix copied with its update times, nothing from beside the prefix, an empty
prefix refused; the copy then served by onnxruntime here as the original is. (An object name that would leave the
copy cannot be stored in the emulator: its file system answers ``invalid path`` for a ``..``.)"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import numpy as np
import pytest

from adapters.onnx.backend import OnnxBackend
from adapters.repository.repository import ModelRepository
from adapters.types import InferCall, Tensor
from scripts.tool_env import executable
from tests.support.servers import LOOPBACK, HeldPort

pytestmark = pytest.mark.integration
ROOT = Path(__file__).resolve().parents[2]

#: Run in the tool venv: argv[1] the emulator's port, argv[2] the local repository to upload, argv[3] where to copy.
_SCRIPT = """
import json, sys
from pathlib import Path
from gcp_storage_emulator.server import create_server
from google.cloud import storage
from adapters.errors import InvalidInput
from adapters.repository.gcs import download_gcs_repository

port, source, target = int(sys.argv[1]), Path(sys.argv[2]), Path(sys.argv[3])
emulator = create_server("127.0.0.1", port, in_memory=True)
emulator.start()
try:
    bucket = storage.Client().create_bucket("models")
    for path in sorted(p for p in source.rglob("*") if p.is_file()):
        bucket.blob(f"repo/iris/{path.relative_to(source)}").upload_from_filename(str(path))
    bucket.blob("elsewhere/iris/config.pbtxt").upload_from_string(b"outside the prefix")
    updated = {blob.name: blob.updated.timestamp() for blob in bucket.list_blobs(prefix="repo/")}
    copied = download_gcs_repository("gs://models/repo", target / "copy")
    try:
        download_gcs_repository("gs://models/nothing-here", target / "empty")
        empty = "copied"
    except InvalidInput as error:
        empty = str(error)
    print(json.dumps({"copied": str(copied), "updated": updated, "empty": empty}))
finally:
    emulator.stop()
"""


def repository_names(root: Path) -> list[str]:
    return ModelRepository(root, lambda name, ver, path, config: OnnxBackend(name, ver, path, config)).names()


def test_a_gs_repository_is_copied_from_the_emulator_and_served(tmp_path: Path) -> None:
    source = ROOT / "models"
    with HeldPort() as held:
        env = {
            "PATH": os.environ["PATH"], "HOME": str(tmp_path), "PYTHONPATH": str(ROOT),
            "STORAGE_EMULATOR_HOST": f"http://{LOOPBACK}:{held.port}", "GOOGLE_CLOUD_PROJECT": "oip-test",
        }  # fmt: skip
        command = [executable("gcs", "python"), "-c", _SCRIPT, str(held.port), str(source / "iris"), str(tmp_path)]
        run = subprocess.run(command, env=env, capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert run.returncode == 0, run.stderr[-3000:]
    found = json.loads(run.stdout.strip().splitlines()[-1])
    copy = Path(found["copied"])
    # Every object under the prefix, as it was, its update time kept; nothing from beside the prefix.
    files = sorted(str(p.relative_to(copy)) for p in copy.rglob("*") if p.is_file() and p.name != ".complete")
    assert files == sorted(str(p.relative_to(source)) for p in (source / "iris").rglob("*") if p.is_file())
    for name in files:
        assert (copy / name).read_bytes() == (source / name).read_bytes(), name
        assert (copy / name).stat().st_mtime == pytest.approx(found["updated"][f"repo/{name}"], abs=1e-3)
    assert (copy / ".complete").exists()
    assert found["empty"] == "no objects under gs://models/nothing-here", found["empty"]

    # The copy is a repository: iris, served by onnxruntime, answers as from the original files.
    def answer(root: Path) -> list[list[float]]:
        repository = ModelRepository(root, lambda name, ver, path, config: OnnxBackend(name, ver, path, config))
        backend = repository.backend("iris")
        row = np.array([[5.1, 3.5, 1.4, 0.2]], np.float32)
        result = backend.infer_sync(InferCall((Tensor("input", "FP32", (1, 4), row),)))  # type: ignore[attr-defined]
        return [t.data.ravel().tolist() for t in result.outputs]

    assert repository_names(copy) == ["iris"]
    assert answer(copy) == answer(source)
