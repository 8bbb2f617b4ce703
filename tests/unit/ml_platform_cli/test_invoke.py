"""``mlp invoke``: Triton requests built by tritonclient, responses parsed by it, retries.

moto's sagemaker-runtime returns whatever body was queued for it (a string), so it serves
the JSON form of a Triton response; binary responses, the exact request sent and the
ModelNotReadyException retries are tested by stubbing the boto3 call (botocore Stubber).
"""

from __future__ import annotations

import io
import json

import boto3
import numpy as np
import pytest
import requests
from botocore.response import StreamingBody
from botocore.stub import Stubber
from tritonclient.utils import deserialize_bytes_tensor

from ml_platform_cli import invoke
from ml_platform_cli.aws import Context
from tests.helpers.cli import (
    create_storage_stack,
    triton_binary_response,
    triton_json_response,
)

ENDPOINT = "triton-ensembles"  # the first endpoint of cdk.json's settings
# One version of each archive in the model bucket: what --model's default resolves to.
IMAGE_KEY = "model_tf_dali-v0000000a.tar.gz"
TEXT_KEY = "model_trt_python_t4-v0000000b.tar.gz"
IMAGE = b"\xff\xd8\xff\xe0 fake jpeg bytes \x00\x01\x02"


def _split(body: bytes, content_type: str) -> tuple[dict, bytes]:
    size = int(content_type.rsplit("=", 1)[1])
    return json.loads(body[:size]), body[size:]


def test_image_request_is_triton_binary_json():
    body, size = invoke.image_request(IMAGE)
    header, raw = _split(body, invoke.content_type(size))
    assert header["inputs"] == [
        {
            "name": "INPUT",
            "shape": [1, len(IMAGE)],
            "datatype": "UINT8",
            "parameters": {"binary_data_size": len(IMAGE)},
        }
    ]
    assert header["outputs"] == [{"name": "OUTPUT", "parameters": {"binary_data": True}}]
    assert raw == IMAGE


def test_text_request_carries_the_sentences_as_bytes():
    body, size = invoke.text_request(["hello", "wörld"])
    header, raw = _split(body, invoke.content_type(size))
    assert header["inputs"][0]["name"] == "INPUT0"
    assert header["inputs"][0]["datatype"] == "BYTES"
    assert header["inputs"][0]["shape"] == [2, 1]
    assert list(deserialize_bytes_tensor(raw)) == [b"hello", "wörld".encode()]
    assert header["outputs"] == [{"name": "finaloutput", "parameters": {"binary_data": True}}]


def test_parse_binary_and_json_responses():
    scores = np.linspace(0, 1, 1001, dtype=np.float32).reshape(1, 1001)
    body, content_type = triton_binary_response("OUTPUT", scores)
    np.testing.assert_array_equal(invoke.parse_response(body, content_type, "OUTPUT"), scores)
    text = triton_json_response("OUTPUT", scores)
    parsed = invoke.parse_response(text.encode(), "application/json", "OUTPUT")
    np.testing.assert_allclose(parsed, scores)


def test_parse_errors_are_user_errors():
    with pytest.raises(invoke.CliError, match="not a Triton response"):
        invoke.parse_response(b"<html>gateway timeout</html>", "text/html", "OUTPUT")
    body, content_type = triton_binary_response("other", np.zeros((1, 3), np.float32))
    with pytest.raises(invoke.CliError, match=r"no output 'OUTPUT' \(outputs: \['other'\]\)"):
        invoke.parse_response(body, content_type, "OUTPUT")


# --- the whole command, with the boto3 call stubbed -------------------------------------


def _storage_with_archives(*keys: str) -> str:
    bucket = create_storage_stack()
    s3 = boto3.client("s3", region_name="us-west-2")
    for key in keys:
        s3.put_object(Bucket=bucket, Key=f"models/{key}", Body=b"archive")
    return bucket


@pytest.fixture
def runtime(aws, monkeypatch):
    """The sagemaker-runtime client mlp uses, under a Stubber; other services in moto, with
    the Storage stack and one version of each archive."""
    _storage_with_archives(IMAGE_KEY, TEXT_KEY)
    client = boto3.client("sagemaker-runtime", region_name="us-west-2")
    original = Context.client

    def client_for(self, service, region=None, **kwargs):
        if service == "sagemaker-runtime":
            return client
        return original(self, service, region, **kwargs)

    monkeypatch.setattr(Context, "client", client_for)
    with Stubber(client) as stubber:
        yield stubber
        stubber.assert_no_pending_responses()


@pytest.fixture
def waits(monkeypatch):
    """Record the retry sleeps instead of sleeping; the clock advances by each sleep."""
    now = [1000.0]
    slept: list[float] = []

    def sleep(seconds):
        slept.append(seconds)
        now[0] += seconds

    monkeypatch.setattr(invoke, "_sleep", sleep)
    monkeypatch.setattr(invoke, "_clock", lambda: now[0])
    return slept


def _ok(body: bytes, content_type: str) -> dict:
    return {"Body": StreamingBody(io.BytesIO(body), len(body)), "ContentType": content_type}


def _not_ready(stubber, code="ModelNotReadyException", message="Model is loading"):
    stubber.add_client_error(
        "invoke_endpoint", service_error_code=code, service_message=message, http_status_code=429
    )


def test_image_retries_while_loading_then_prints_top_k(runtime, waits, project, tmp_path, mlp):
    image = tmp_path / "cat.jpg"
    image.write_bytes(IMAGE)
    labels = tmp_path / "labels.txt"
    labels.write_text("".join(f"label_{i}\n" for i in range(1001)))
    scores = np.zeros((1, 1001), dtype=np.float32)
    scores[0, [282, 7, 999]] = [0.7, 0.2, 0.1]
    body, size = invoke.image_request(IMAGE)
    expected = {
        "EndpointName": ENDPOINT,
        "TargetModel": IMAGE_KEY,
        "ContentType": f"application/vnd.sagemaker-triton.binary+json;json-header-size={size}",
        "Body": body,
    }
    _not_ready(runtime)
    _not_ready(runtime, code="ModelError", message="Model not ready yet, please retry")
    runtime.add_response(
        "invoke_endpoint", _ok(*triton_binary_response("OUTPUT", scores)), expected
    )

    result = mlp(
        "--cdk-json", project, "invoke", "--image", image, "--labels", labels, "--top-k", "3"
    )

    assert result.code == 0, result.err
    assert waits == [1.0, 2.0]
    assert "model not ready (attempt 1), retrying in 1 s" in result.err
    lines = result.out.splitlines()
    assert lines[0].startswith(f"triton-ensembles / {IMAGE_KEY}: 3 attempt(s)")
    assert lines[1:] == [
        " 1. 0.7000  label_282  (class 282)",
        " 2. 0.2000  label_7  (class 7)",
        " 3. 0.1000  label_999  (class 999)",
    ]


def test_text_batch_prints_embeddings_as_json(runtime, waits, project, mlp):
    vectors = np.random.default_rng(0).normal(size=(2, 384)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    body, size = invoke.text_request(["first sentence", "second"])
    runtime.add_response(
        "invoke_endpoint",
        _ok(*triton_binary_response("finaloutput", vectors)),
        {
            "EndpointName": "other-endpoint",
            "TargetModel": "v2/model_trt_python.tar.gz",
            "ContentType": invoke.content_type(size),
            "Body": body,
        },
    )
    result = mlp(
        "--cdk-json",
        project,
        "invoke",
        "--endpoint",
        "other-endpoint",
        "--target-model",
        "v2/model_trt_python.tar.gz",
        "--text",
        "first sentence",
        "--text",
        "second",
        "--json",
    )
    assert result.code == 0, result.err
    report = json.loads(result.out)
    assert report["attempts"] == 1 and waits == []
    assert [e["text"] for e in report["embeddings"]] == ["first sentence", "second"]
    assert all(e["dimension"] == 384 for e in report["embeddings"])
    assert report["embeddings"][0]["norm"] == pytest.approx(1.0, abs=1e-5)
    assert report["embeddings"][1]["first"] == pytest.approx(vectors[1, :5].tolist(), abs=1e-6)


def test_gives_up_at_the_timeout(runtime, waits, project, mlp):
    for _ in range(6):
        _not_ready(runtime)
    result = mlp("--cdk-json", project, "invoke", "--text", "hi", "--timeout", "20")
    assert result.code == 1
    # Backoff 1, 2, 4, 8, then only the 5 s left of the 20 s budget.
    assert waits == [1.0, 2.0, 4.0, 8.0, 5.0]
    assert result.err.splitlines()[-1] == (
        f"mlp: error: {TEXT_KEY} on triton-ensembles still not ready after "
        "6 attempts (20 s): Model is loading"
    )


def test_unknown_endpoint(runtime, waits, project, mlp):
    runtime.add_client_error(
        "invoke_endpoint",
        service_error_code="ValidationError",
        http_status_code=400,
        service_message="Endpoint nope of account 123456789012 not found.",
    )
    result = mlp("--cdk-json", project, "invoke", "--endpoint", "nope", "--text", "hi")
    assert result.code == 1
    assert result.err.strip() == (
        "mlp: error: endpoint 'nope' not found: Endpoint nope of account 123456789012 not found."
    )
    assert waits == []


def test_model_error_is_not_retried(runtime, waits, project, mlp):
    runtime.add_client_error(
        "invoke_endpoint",
        service_error_code="ModelError",
        http_status_code=424,
        service_message="Received server error (500) from primary",
        modeled_fields={"OriginalStatusCode": 500, "OriginalMessage": "unexpected shape for input"},
    )
    result = mlp("--cdk-json", project, "invoke", "--text", "hi")
    assert result.code == 1
    assert result.err.strip() == (
        f"mlp: error: {TEXT_KEY} on triton-ensembles failed (HTTP 500): unexpected shape for input"
    )
    assert waits == []


def test_an_html_error_page_becomes_one_line(runtime, waits, project, mlp):
    page = (
        "<!doctype html>\n<html lang=en>\n<title>500 Internal Server Error</title>\n"
        "<h1>Internal Server Error</h1>\n"
    )
    runtime.add_client_error(
        "invoke_endpoint", service_error_code="500", service_message=page, http_status_code=500
    )
    result = mlp("--cdk-json", project, "invoke", "--text", "hi")
    assert result.code == 1
    assert result.err == (
        "mlp: error: AWS error in InvokeEndpoint (500): 500 Internal Server Error "
        "Internal Server Error\n"
    )


def test_bad_arguments(aws_env, project, tmp_path, mlp):
    result = mlp("--cdk-json", project, "invoke", "--text", "x", "--target-model", "bad name")
    assert result.code == 1 and "characters outside" in result.err
    result = mlp("--cdk-json", project, "invoke", "--image", tmp_path / "missing.jpg")
    assert result.code == 1 and "missing.jpg: No such file or directory" in result.err
    many = [a for i in range(17) for a in ("--text", str(i))]
    result = mlp("--cdk-json", project, "invoke", *many)
    assert result.code == 1 and "at most 16 sentences" in result.err


# --- through moto's sagemaker-runtime ----------------------------------------------------


def test_through_moto_runtime(aws, project, mlp):
    _storage_with_archives(TEXT_KEY)
    vector = np.full((1, 384), 1 / np.sqrt(384), dtype=np.float32)
    body = triton_json_response("finaloutput", vector)
    content_type = f"application/vnd.sagemaker-triton.binary+json;json-header-size={len(body)}"
    # moto's documented hook to queue InvokeEndpoint results (intercepted in-process).
    requests.post(
        "http://motoapi.amazonaws.com/moto-api/static/sagemaker/endpoint-results",
        json={
            "region": "us-west-2",
            "results": [
                {
                    "Body": body,
                    "ContentType": content_type,
                    "InvokedProductionVariant": "AllTraffic",
                    "CustomAttributes": "",
                }
            ],
        },
        timeout=5,
    ).raise_for_status()
    result = mlp("--cdk-json", project, "invoke", "--text", "hello", "--json")
    assert result.code == 0, result.err
    embedding = json.loads(result.out)["embeddings"][0]
    assert embedding["dimension"] == 384
    assert embedding["norm"] == pytest.approx(1.0, abs=1e-5)


def _queue_text_response() -> None:
    vector = np.full((1, 384), 1 / np.sqrt(384), dtype=np.float32)
    body = triton_json_response("finaloutput", vector)
    requests.post(
        "http://motoapi.amazonaws.com/moto-api/static/sagemaker/endpoint-results",
        json={
            "region": "us-west-2",
            "results": [
                {
                    "Body": body,
                    "ContentType": "application/vnd.sagemaker-triton.binary+json;"
                    f"json-header-size={len(body)}",
                    "InvokedProductionVariant": "AllTraffic",
                    "CustomAttributes": "",
                }
            ],
        },
        timeout=5,
    ).raise_for_status()


def test_text_defaults_to_the_onnx_archive_when_the_settings_plan_was_never_uploaded(
    aws, project, mlp
):
    """cdk.json's endpoint names the T4 plan's archive; a newcomer uploads only the ONNX one
    (no TensorRT needed): --text without --model calls that instead of failing."""
    onnx_key = "model_onnx_python-v0000000c.tar.gz"
    _storage_with_archives(IMAGE_KEY, onnx_key)
    _queue_text_response()
    result = mlp("--cdk-json", project, "invoke", "--text", "hello", "--json")
    assert result.code == 0, result.err
    assert json.loads(result.out)["target_model"] == onnx_key


def test_text_prefers_the_settings_archive_and_names_what_it_looked_for(aws, project, mlp):
    _storage_with_archives(IMAGE_KEY)
    result = mlp("--cdk-json", project, "invoke", "--text", "hello")
    assert result.code == 1
    assert "(looked for model_trt_python_t4, model_onnx_python)" in result.err
    assert "mlp models package --ensemble text --encoder model.onnx" in result.err
