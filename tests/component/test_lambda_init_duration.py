"""The first EMF line of a Lambda execution environment gives its whole init as ``InitDuration``: from the process's
start to the end of ``handler.http``'s import (models loaded and warmed up, objects frozen), read in a fresh
interpreter that imports the handler and answers one API Gateway event, as Lambda's runtime does.

Checked by order, not by a tolerance: the model file is a FIFO the test writes, so the import waits in the model's
load, after the telemetry was made; the test reads the interpreter's age while it waits (by the clock it reads its
own: ``/proc/uptime`` against its start in ``/proc/<pid>/stat``), lets that clock pass one tick of its resolution,
then writes the model. ``InitDuration`` is no less than that age and no more than the age the interpreter read once
the import returned."""

from __future__ import annotations

import errno
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
EVENT = ROOT / "events" / "http-api" / "infer-json.json"
#: More than /proc/uptime's resolution (10 ms): an age read this much after another is later on its clock.
TICK_MS = 20.0
CHILD = f"""
import contextlib, io, json
from handler.observability.telemetry import process_age_ms
import handler.http
ended = process_age_ms()
from handler.cli.lambda_context import LocalLambdaContext
out = io.StringIO()
with contextlib.redirect_stdout(out):
    answer = handler.http.lambda_handler(json.loads(open({str(EVENT)!r}).read()), LocalLambdaContext())
lines = [json.loads(line) for line in out.getvalue().splitlines() if line.startswith('{{"_aws"')]
print(json.dumps({{"ended": ended, "status": answer["statusCode"], "lines": lines}}))
"""


def _age_ms(pid: int) -> float:
    """``pid``'s age in ms, as handler.observability.telemetry's ``process_age_ms`` reads its own."""
    started = int(Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[19])
    uptime = float(Path("/proc/uptime").read_text().split()[0])
    return (uptime - started / os.sysconf("SC_CLK_TCK")) * 1000


def _opened_by_reader(fifo: Path, child: subprocess.Popen[str]) -> int:
    """``fifo`` opened for writing (blocking) once ``child`` has opened it for reading; fails if the child ends."""
    while True:
        try:
            descriptor = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
        except OSError as error:
            if error.errno != errno.ENXIO:  # ENXIO: no reader yet
                raise
            assert child.poll() is None, child.communicate()[1][-3000:]
            time.sleep(0.005)
            continue
        os.set_blocking(descriptor, True)
        return descriptor


def test_init_duration_runs_to_the_end_of_the_handlers_import(tmp_path: Path) -> None:
    (tmp_path / "iris" / "1").mkdir(parents=True)
    shutil.copy(ROOT / "models" / "iris" / "config.pbtxt", tmp_path / "iris")
    fifo = tmp_path / "iris" / "1" / "model.onnx"
    os.mkfifo(fifo)
    env = {**os.environ, "MODEL_REPOSITORY": str(tmp_path), "OIP_WARM_UP": "1", "OIP_TRACING": "0"}
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env
    )
    try:
        with os.fdopen(_opened_by_reader(fifo, child), "wb") as model:  # the import waits in the model's load
            waiting = _age_ms(child.pid)
            while (loading := _age_ms(child.pid)) < waiting + TICK_MS:
                time.sleep(0.005)
            model.write((ROOT / "models" / "iris" / "1" / "model.onnx").read_bytes())
        out, err = child.communicate(timeout=120)
    finally:
        child.kill()
    assert child.returncode == 0, err[-3000:]
    found = json.loads(out.splitlines()[-1])
    assert found["status"] == 200
    (line,) = found["lines"]
    assert line["ColdStart"] == [1.0]
    # Not the age at which the telemetry was made, early in the import, before the model loaded and ran.
    assert loading <= line["InitDuration"][0] <= found["ended"], (loading, line["InitDuration"], found["ended"])
