"""The Python SDK (the `perdure` distribution) installs with OpenTelemetry's API only; the SDK
and exporters come with the `otel` extra, which `perdure worker` exports with."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
CONSTRAINTS = REPO / "deploy" / "constraints.txt"
# What a program using the SDK imports and calls, without the OpenTelemetry SDK installed.
PROGRAM = """
from perdure.client import Client, PerdureError, WaitTimeoutError
from perdure.telemetry.rpc import sync_channel
from perdure.worker import Worker, WorkflowContext, workflow
from perdure.worker.__main__ import main

assert issubclass(WaitTimeoutError, PerdureError)
sync_channel("localhost:1").close()
"""


def test_the_sdk_needs_the_opentelemetry_api_only(tmp_path: Path) -> None:
    context = tmp_path / "src"
    junk = shutil.ignore_patterns("__pycache__", "build", "*.egg-info", "node_modules")
    for part in ("proto", "services/telemetry", "services/worker"):
        shutil.copytree(REPO / part, context / part, ignore=junk)
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    python = str(venv / "bin" / "python")
    packages = ["./proto", "./services/telemetry", "./services/worker"]
    install = [python, "-m", "pip", "install", "--quiet", "--constraint", str(CONSTRAINTS)]
    subprocess.run([*install, *packages], cwd=context, check=True, timeout=600)
    frozen = subprocess.run(
        [python, "-m", "pip", "freeze"], capture_output=True, text=True, check=True
    ).stdout
    assert "opentelemetry-api==" in frozen
    assert "opentelemetry-sdk" not in frozen and "opentelemetry-exporter" not in frozen
    subprocess.run([python, "-c", PROGRAM], check=True, timeout=60)

    # Asked to export without the SDK, the worker stops and says what to install.
    environment = {**os.environ, "OTEL_TRACES_EXPORTER": "console"}
    worker = [str(venv / "bin" / "perdure-worker"), "--module", "json"]
    asked = subprocess.run(worker, env=environment, capture_output=True, text=True, timeout=60)
    assert asked.returncode != 0 and "perdure[otel]" in asked.stderr, asked.stderr

    # With the extra, the SDK and the exporters are there.
    subprocess.run([*install, "./services/worker[otel]"], cwd=context, check=True, timeout=600)
    frozen = subprocess.run(
        [python, "-m", "pip", "freeze"], capture_output=True, text=True, check=True
    ).stdout
    assert "opentelemetry-sdk==" in frozen and "opentelemetry-exporter-otlp-proto-grpc" in frozen
