"""``mlp invoke --triton-url``: straight to a Triton server (Triton on EKS via port-forward).

A small HTTP server on 127.0.0.1 plays Triton's side of the KServe v2 protocol: it records
the request tritonclient sends and answers with a JSON response.
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import numpy as np
import pytest

from tests.helpers.cli import triton_json_response


class FakeTriton:
    def __init__(self, output: str, array: np.ndarray) -> None:
        self.requests: list[tuple[str, dict, bytes]] = []
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["Content-Length"]))
                size = int(self.headers.get("Inference-Header-Content-Length", len(body)))
                fake.requests.append((self.path, json.loads(body[:size]), body[size:]))
                reply = triton_json_response(output, array).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(reply)))
                self.end_headers()
                self.wfile.write(reply)

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def text_server():
    vectors = np.eye(2, 384, dtype=np.float32)
    server = FakeTriton("finaloutput", vectors)
    yield server
    server.close()


@pytest.fixture
def image_server():
    scores = np.zeros((1, 1001), dtype=np.float32)
    scores[0, 7], scores[0, 3] = 0.9, 0.05
    server = FakeTriton("OUTPUT", scores)
    yield server
    server.close()


def test_text_goes_to_the_text_ensemble(text_server: FakeTriton, aws_env, project, mlp) -> None:
    result = mlp(
        "--cdk-json",
        project,
        "invoke",
        "--triton-url",
        text_server.url,
        "--text",
        "hello",
        "--text",
        "world",
        "--json",
    )
    assert result.code == 0, result.err
    ((path, header, raw),) = text_server.requests
    assert path == "/v2/models/ensemble/infer"
    assert header["inputs"][0]["name"] == "INPUT0"
    assert header["inputs"][0]["shape"] == [2, 1]
    assert b"hello" in raw and b"world" in raw
    report = json.loads(result.out)
    assert [e["dimension"] for e in report["embeddings"]] == [384, 384]
    assert report["endpoint"] == text_server.url


def test_image_goes_to_the_image_ensemble(
    image_server: FakeTriton, aws_env, project, tmp_path, mlp
) -> None:
    image = tmp_path / "cat.jpg"
    image.write_bytes(b"\xff\xd8\xff fake")
    result = mlp(
        "--cdk-json",
        project,
        "invoke",
        "--triton-url",
        image_server.url,
        "--image",
        image,
        "--top-k",
        "2",
        "--json",
    )
    assert result.code == 0, result.err
    ((path, header, raw),) = image_server.requests
    assert path == "/v2/models/ensemble_dali_inception/infer"
    assert header["inputs"][0]["name"] == "INPUT" and header["inputs"][0]["datatype"] == "UINT8"
    assert raw == b"\xff\xd8\xff fake"
    assert [c["index"] for c in json.loads(result.out)["classes"]] == [7, 3]


def test_unreachable_server_is_one_line(aws_env, project, mlp) -> None:
    result = mlp("--cdk-json", project, "invoke", "--triton-url", "127.0.0.1:9", "--text", "x")
    assert result.code == 1
    assert "Triton at 127.0.0.1:9" in result.err and "Traceback" not in result.err
