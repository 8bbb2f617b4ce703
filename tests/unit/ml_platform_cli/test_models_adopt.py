"""``mlp models adopt``: an archive built elsewhere, under a plain name as the AWS sample uploads
it, is checked like ours and given a versioned name; what cannot be served is refused."""

from __future__ import annotations

import io
import tarfile
from pathlib import Path

from ml_platform.triton import (
    DataType,
    EnsembleSpec,
    EnsembleStep,
    ModelFile,
    ModelSpec,
    TensorSpec,
    package,
)
from ml_platform.triton.archive_names import content_version
from tests.helpers.cli import build_archives


def _sample_graphdef_archive(folder: Path) -> Path:
    """The sample's image ensemble shape: DALI, then an Inception v3 TensorFlow GraphDef."""
    dali = ModelSpec(
        name="dali",
        backend="dali",
        max_batch_size=8,
        inputs=(TensorSpec("DALI_INPUT_0", DataType.UINT8, (-1,)),),
        outputs=(TensorSpec("DALI_OUTPUT_0", DataType.FP32, (299, 299, 3)),),
        files=(ModelFile("1/model.dali", content=b"serialized pipeline"),),
    )
    graphdef = ModelSpec(
        name="inception_graphdef",
        platform="tensorflow_graphdef",
        max_batch_size=8,
        inputs=(TensorSpec("input", DataType.FP32, (299, 299, 3)),),
        outputs=(TensorSpec("InceptionV3/Predictions/Softmax", DataType.FP32, (1001,)),),
        files=(ModelFile("1/model.graphdef", content=b"graph"),),
    )
    spec = EnsembleSpec(
        name="ensemble_dali_inception",
        max_batch_size=8,
        inputs=(TensorSpec("INPUT", DataType.UINT8, (-1,)),),
        outputs=(TensorSpec("OUTPUT", DataType.FP32, (1001,)),),
        steps=(
            EnsembleStep("dali", {"DALI_INPUT_0": "INPUT"}, {"DALI_OUTPUT_0": "image"}),
            EnsembleStep(
                "inception_graphdef",
                {"input": "image"},
                {"InceptionV3/Predictions/Softmax": "OUTPUT"},
            ),
        ),
        models=(dali, graphdef),
    )
    return package(spec, folder, archive_name="model_tf_dali.tar.gz")


def test_an_external_archive_gets_a_versioned_name(tmp_path: Path, project: Path, mlp) -> None:
    built = build_archives(tmp_path / "built")
    sample = tmp_path / "sample" / "model_onnx_python.tar.gz"  # a plain name, as the sample's
    sample.parent.mkdir()
    sample.write_bytes(built.text.read_bytes())
    out = tmp_path / "out"
    result = mlp("--cdk-json", project, "models", "adopt", sample, "--out", out)
    assert result.code == 0, result.err
    (adopted,) = out.iterdir()
    assert adopted.name == f"model_onnx_python-{content_version(sample)}.tar.gz"
    assert adopted.read_bytes() == sample.read_bytes()  # adopted as it is
    result = mlp("--cdk-json", project, "models", "adopt", sample, "--out", out, "--name", "mine")
    assert result.code == 0, result.err
    assert (out / f"mine-{content_version(sample)}.tar.gz").is_file()


def test_what_the_release_cannot_load_is_refused(tmp_path: Path, project: Path, mlp) -> None:
    sample = _sample_graphdef_archive(tmp_path / "sample")
    out = tmp_path / "out"
    result = mlp("--cdk-json", project, "models", "adopt", sample, "--out", out)
    assert result.code == 1
    assert result.err.splitlines()[-1] == (
        f"  - {sample}: inference.triton_version '25.09': it needs the TensorFlow backend, which "
        "Triton shipped last in 25.02; Triton 25.09 cannot load it: convert the model to ONNX "
        "and package the archive again"
    )
    assert not out.exists()


def test_unsafe_or_badly_named_archives_are_refused(tmp_path: Path, project: Path, mlp) -> None:
    unsafe = tmp_path / "unsafe.tar.gz"
    with tarfile.open(unsafe, "w:gz") as tar:
        link = tarfile.TarInfo("ensemble/config.pbtxt")
        link.type, link.linkname = tarfile.SYMTYPE, "/etc/passwd"
        tar.addfile(link)
        data = b"x"
        info = tarfile.TarInfo("ensemble/1/x")
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
    result = mlp("--cdk-json", project, "models", "adopt", unsafe, "--out", tmp_path / "out")
    assert result.code == 1
    assert "member 'ensemble/config.pbtxt': is a symbolic link" in result.err
    result = mlp("--cdk-json", project, "models", "adopt", unsafe, "--name", "Bad Name")
    assert result.code == 1 and "--name: 'Bad Name' is not a logical archive name" in result.err
    missing = tmp_path / "missing.tar.gz"
    result = mlp("--cdk-json", project, "models", "adopt", missing)
    assert result.code == 1 and f"{missing}: not a file" in result.err
