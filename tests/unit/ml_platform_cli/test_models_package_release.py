"""``mlp models package`` and the release that will serve the archives: the text encoder is
parsed (onnx), a plan records the TensorRT that built it and must be the release's, and each
archive records the release and backends it was built for (``<ensemble>/mlp-archive.json``).

TensorRT versions per release are taken from NVIDIA's Frameworks Support Matrix
(ml_platform/triton/releases.py); the ONNX checks run the real ``onnx`` parser.
"""

from __future__ import annotations

import json
import tarfile
from pathlib import Path

from ml_platform.triton.archive_meta import METADATA_FILE, read_archive_facts, release_problems
from tests.helpers.cli import write_inputs
from tests.helpers.triton_support import tiny_encoder


def _one(folder: Path, logical: str) -> Path:
    (archive,) = folder.glob(f"{logical}-v*.tar.gz")
    return archive


def _record(archive: Path, ensemble: str) -> dict:
    with tarfile.open(archive, "r:gz") as tar:
        return json.loads(tar.extractfile(f"{ensemble}/{METADATA_FILE}").read())


def _text(mlp, out: Path, encoder: Path, *extra: object):
    return mlp(
        "models", "package", "--ensemble", "text", "--out", out, "--encoder", encoder, *extra
    )


def test_a_file_that_is_not_onnx_is_refused_with_its_path(tmp_path, mlp):
    inputs = write_inputs(tmp_path / "in")
    bogus = tmp_path / "in" / "encoder.onnx"
    bogus.write_bytes(inputs.plan.read_bytes())
    result = _text(mlp, tmp_path / "out", bogus)
    assert result.code == 1
    assert f"--encoder '{bogus}': not an ONNX model" in result.err
    assert not (tmp_path / "out").exists() or not list((tmp_path / "out").iterdir())


def test_an_onnx_model_without_the_encoders_interface_is_refused(tmp_path, mlp):
    inputs = write_inputs(tmp_path / "in")
    # The image classifier is valid ONNX, but not a text encoder.
    result = _text(mlp, tmp_path / "out", inputs.classifier)
    assert result.code == 1
    assert (
        f"--encoder '{inputs.classifier}': has inputs ['input'], expected exactly "
        "['token_ids', 'attn_mask']"
    ) in result.err
    assert "missing ['output', 'pooled_embeds']" in result.err
    # int64 ids and a 768-wide encoder: every problem at once.
    wide = tmp_path / "in" / "wide.onnx"
    wide.write_bytes(tiny_encoder(hidden=768, id_type="INT64"))
    result = _text(mlp, tmp_path / "out", wide)
    assert result.code == 1
    assert "input 'token_ids' is not int32" in result.err
    assert "input 'attn_mask' is not int32" in result.err
    assert "output 'output' is 768 wide, not hidden_size=384" in result.err


def test_a_plan_needs_its_tensorrt_version_and_the_releases(tmp_path, mlp):
    inputs = write_inputs(tmp_path / "in")
    out = tmp_path / "out"
    result = _text(mlp, out, inputs.plan, "--gpu-target", "t4")
    assert result.code == 1
    assert "pass --tensorrt-version (trtexec --version) (Triton 25.09 runs TensorRT 10.13.3)" in (
        result.err
    )
    # A plan of 24.09's TensorRT cannot load on 25.09 (the settings' release): rebuild it.
    result = _text(mlp, out, inputs.plan, "--gpu-target", "t4", "--tensorrt-version", "10.4.0")
    assert result.code == 1
    assert (
        "--triton-version '25.09': its TensorRT plan was built with TensorRT 10.4.0, but Triton "
        "25.09 runs TensorRT 10.13.3, which refuses plans of another version: rebuild the plan"
    ) in result.err
    # ... and it is what 24.09 runs.
    args = ("--gpu-target", "t4", "--tensorrt-version", "10.4.0.26", "--triton-version", "24.09")
    assert _text(mlp, out, inputs.plan, *args).code == 0
    archive = _one(out, "model_trt_python_t4")
    assert _record(archive, "ensemble") == {
        "backends": ["python", "tensorrt_plan"],
        "format": 1,
        "tensorrt": "10.4.0.26",
        "triton_release": "24.09",
    }
    facts = read_archive_facts(archive)
    assert (facts.tensorrt, facts.triton_release) == ("10.4.0.26", "24.09")
    assert release_problems("a", facts, "24.09") == []
    (problem,) = release_problems("a", facts, "25.09")
    assert "rebuild the plan with TensorRT 10.13.3" in problem


def test_every_archive_records_its_release_and_backends(tmp_path, mlp):
    inputs = write_inputs(tmp_path / "in")
    out = tmp_path / "out"
    result = mlp(
        "models",
        "package",
        "--out",
        out,
        "--inception-onnx",
        inputs.classifier,
        "--inception-labels",
        inputs.labels,
        "--encoder",
        inputs.onnx,
        "--dali-num-threads",
        "8",
    )
    assert result.code == 0, result.err
    image, text = _one(out, "model_tf_dali"), _one(out, "model_onnx_python")
    assert _record(image, "ensemble_dali_inception") == {
        "backends": ["dali", "onnxruntime"],
        "format": 1,
        "triton_release": "25.09",
    }
    assert _record(text, "ensemble") == {
        "backends": ["onnxruntime", "python"],
        "format": 1,
        "triton_release": "25.09",
    }
    with tarfile.open(image, "r:gz") as tar:
        assert b"NUM_THREADS = 8\n" in tar.extractfile("dali/1/dali.py").read()
    result = mlp(
        "models",
        "package",
        "--ensemble",
        "image",
        "--out",
        out,
        "--inception-onnx",
        inputs.classifier,
        "--inception-labels",
        inputs.labels,
        "--dali-num-threads",
        "65",
    )
    assert result.code == 1 and "--dali-num-threads 65: expected 1 to 64" in result.err
