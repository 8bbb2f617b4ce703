"""The EKS Triton container's command, run with a real ``tritonserver``: the restricted APIs
answer no one, health and inference-side metadata stay open, gRPC does not listen.

The binary is the one PyTriton bundles (``nvidia-pytriton``, Triton 2.51 = release 24.10, the
same ``--http-restricted-api`` and ``--allow-grpc`` options as the 25.09 image), from the
``.venv-triton`` that ``make test`` builds; the test is skipped where neither it nor an
importable ``pytriton`` exists. The server binds loopback only, on free ports,
and is stopped by its PID.
"""

from __future__ import annotations

import importlib.util
import os
import socket
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from ml_platform.k8s_charts.triton import RESTRICTED_APIS, server_command

# `make test` builds this venv (`make triton-env`): PyTriton's numpy < 2 keeps it apart.
SERVER_ENV = Path(
    os.environ.get("MLP_TRITON_ENV", Path(__file__).resolve().parents[3] / ".venv-triton")
)


def _tritonserver() -> Path:
    spec = importlib.util.find_spec("pytriton")
    if spec is not None and spec.origin is not None:
        binary = Path(spec.origin).parent / "tritonserver" / "bin" / "tritonserver"
    else:
        from ml_platform_cli.local_server import LocalServerError, find_server_env

        try:
            binary = find_server_env(SERVER_ENV).tritonserver
        except LocalServerError as error:
            pytest.skip(f"no tritonserver: nvidia-pytriton is not importable here and {error}")
    if not binary.is_file():
        pytest.skip(f"{binary}: no tritonserver in the installed pytriton")
    return binary


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _status(url: str, method: str = "GET") -> int:
    request = urllib.request.Request(url, method=method, data=b"{}" if method == "POST" else None)
    try:
        with urllib.request.urlopen(request, timeout=5) as response:
            return response.status
    except urllib.error.HTTPError as error:
        return error.code


def _start(tmp_path: Path, *, grpc: bool) -> tuple[subprocess.Popen, int, int]:
    """The container's command with a real tritonserver on loopback and free ports, ready."""
    binary = _tritonserver()
    http, grpc_port = _free_port(), _free_port()
    (tmp_path / "models").mkdir()
    args = [
        f"--model-repository={tmp_path / 'models'}",
        "--model-control-mode=none",
        "--http-address=127.0.0.1",
        f"--http-port={http}",
        "--grpc-address=127.0.0.1",
        f"--grpc-port={grpc_port}",
        "--allow-metrics=false",
    ]
    wrapper = tmp_path / "bin" / "tritonserver"  # the image's tritonserver, on PATH
    wrapper.parent.mkdir()
    libs = binary.parent.parent / "lib"
    wrapper.write_text(
        f'#!/bin/sh\nexport LD_LIBRARY_PATH="{libs}:$LD_LIBRARY_PATH"\nexec "{binary}" "$@"\n'
    )
    wrapper.chmod(0o755)
    server = subprocess.Popen(
        server_command(args, grpc=grpc),
        cwd=tmp_path,
        env={**os.environ, "PATH": f"{wrapper.parent}:{os.environ['PATH']}"},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    deadline = time.monotonic() + 60
    while True:
        try:
            if _status(f"http://127.0.0.1:{http}/v2/health/ready") == 200:
                return server, http, grpc_port
        except OSError:
            pass
        if server.poll() is not None or time.monotonic() > deadline:
            _stop(server)
            pytest.fail("tritonserver did not become ready: " + server.stdout.read().decode())
        time.sleep(0.5)


def _stop(server: subprocess.Popen) -> None:
    server.terminate()  # the shell exec'd the server: this PID is tritonserver
    try:
        server.wait(timeout=30)
    except subprocess.TimeoutExpired:
        server.kill()
        server.wait()


def test_restricted_apis_are_refused_by_a_real_server(tmp_path: Path) -> None:
    server, http, grpc = _start(tmp_path, grpc=False)
    base = f"http://127.0.0.1:{http}"
    try:
        # Open: health (the probes) and server metadata.
        assert _status(f"{base}/v2/health/live") == 200
        assert _status(f"{base}/v2") == 200
        # Restricted, without the header no client knows: refused.
        restricted = {
            "model-repository": (f"{base}/v2/repository/index", "POST"),
            "statistics": (f"{base}/v2/models/stats", "GET"),
            "logging": (f"{base}/v2/logging", "GET"),
            "trace": (f"{base}/v2/trace/setting", "GET"),
            "shared-memory": (f"{base}/v2/systemsharedmemory/status", "GET"),
        }
        assert sorted(restricted) == sorted(RESTRICTED_APIS)
        for api, (url, method) in restricted.items():
            assert _status(url, method) == 403, api
        # gRPC is off: nothing listens on its port.
        with socket.socket() as sock:
            assert sock.connect_ex(("127.0.0.1", grpc)) != 0
    finally:
        _stop(server)


def test_grpc_when_on_restricts_the_same_protocols(tmp_path: Path) -> None:
    import tritonclient.grpc as grpcclient
    from tritonclient.utils import InferenceServerException

    server, _, grpc = _start(tmp_path, grpc=True)
    try:
        client = grpcclient.InferenceServerClient(f"127.0.0.1:{grpc}")
        assert client.is_server_live() and client.get_server_metadata().name == "triton"
        for call in (
            client.get_model_repository_index,
            client.get_inference_statistics,
            client.get_log_settings,
            client.get_trace_settings,
            client.get_system_shared_memory_status,
        ):
            with pytest.raises(InferenceServerException, match="restricted"):
                call()
    finally:
        _stop(server)
