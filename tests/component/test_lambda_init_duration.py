"""The first EMF line of a Lambda execution environment gives its whole init as ``InitDuration``: from the process's
start to the end of ``handler.http``'s import (models loaded and warmed up, objects frozen), read in a fresh
interpreter that imports the handler and answers one API Gateway event, as Lambda's runtime does."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

EVENT = Path(__file__).resolve().parents[2] / "events" / "http-api" / "infer-json.json"
#: /proc/uptime's resolution (10 ms), and a margin: the two ages compared are read from it moments apart. The
#: telemetry is made 40-90 ms before the import ends (the models load and run once after it).
TOLERANCE_MS = 15.0
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


def test_init_duration_runs_to_the_end_of_the_handlers_import() -> None:
    env = {**os.environ, "OIP_WARM_UP": "1", "OIP_TRACING": "0"}
    run = subprocess.run([sys.executable, "-c", CHILD], capture_output=True, text=True, timeout=120, env=env)
    assert run.returncode == 0, run.stderr[-3000:]
    found = json.loads(run.stdout.splitlines()[-1])
    assert found["status"] == 200
    (line,) = found["lines"]
    assert line["ColdStart"] == [1.0]
    # Not the age at which the telemetry was made, early in the import, before the models loaded and ran.
    assert abs(line["InitDuration"][0] - found["ended"]) <= TOLERANCE_MS, (line["InitDuration"], found["ended"])
