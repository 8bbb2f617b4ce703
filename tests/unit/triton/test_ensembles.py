"""The two ensembles of the source design, the DALI script, pooling and light imports."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from tritonclient.grpc import model_config_pb2 as mc

from ml_platform.triton import (
    EncoderFormat,
    check_ensemble,
    image_ensemble,
    read_classifier,
    read_pbtxt,
    text_ensemble,
    write_repository,
)
from ml_platform.triton.ensembles import EXECUTION_ENV_PARAMETER
from ml_platform.triton.export_onnx import TRTEXEC_COMMAND, trtexec_command
from ml_platform.triton.pooling import mean_pool_normalize
from tests.helpers.triton_support import (
    MINILM_DIR,
    TENSORRT,
    Artifacts,
    tiny_encoder,
    tiny_inception,
    write_artifacts,
    write_tiny_inception,
)

GPU = mc.ModelInstanceGroup.KIND_GPU
CPU = mc.ModelInstanceGroup.KIND_CPU


@pytest.fixture
def artifacts(tmp_path: Path) -> Artifacts:
    return write_artifacts(tmp_path / "artifacts")


def tensors(fields) -> list[tuple[str, int, list[int]]]:
    return [(f.name, f.data_type, list(f.dims)) for f in fields]


def test_image_ensemble_configs(artifacts: Artifacts, tmp_path: Path) -> None:
    spec = image_ensemble(classifier_path=artifacts.classifier, labels_path=artifacts.labels)
    repo = write_repository(spec, tmp_path / "repo")

    dali = read_pbtxt(repo / "dali")
    assert (dali.backend, dali.platform, dali.max_batch_size) == ("dali", "", 256)
    assert tensors(dali.input) == [("DALI_INPUT_0", mc.TYPE_UINT8, [-1])]
    assert tensors(dali.output) == [("DALI_OUTPUT_0", mc.TYPE_FP32, [299, 299, 3])]
    assert dali.instance_group[0].kind == GPU
    assert (repo / "dali/1/dali.py").is_file() and not (repo / "dali/1/model.dali").exists()

    inception = read_pbtxt(repo / "inception_onnx")
    assert (inception.backend, inception.platform) == ("onnxruntime", "")
    assert (repo / "inception_onnx/1/model.onnx").is_file()
    assert tensors(inception.input) == [("input", mc.TYPE_FP32, [299, 299, 3])]
    assert inception.input[0].format == mc.ModelInput.FORMAT_NHWC
    assert tensors(inception.output) == [("InceptionV3/Predictions/Softmax", mc.TYPE_FP32, [1001])]
    label_file = inception.output[0].label_filename
    assert len((repo / "inception_onnx" / label_file).read_text().splitlines()) == 1001
    assert inception.instance_group[0].kind == GPU
    # Both models batch: Triton's dynamic batcher forms their batches, waiting at most 100 us.
    for config in (dali, inception):
        assert config.dynamic_batching.max_queue_delay_microseconds == 100

    ensemble = read_pbtxt(repo / "ensemble_dali_inception")
    assert (ensemble.platform, ensemble.max_batch_size) == ("ensemble", 256)
    assert tensors(ensemble.input) == [("INPUT", mc.TYPE_UINT8, [-1])]
    assert tensors(ensemble.output) == [("OUTPUT", mc.TYPE_FP32, [1001])]
    steps = ensemble.ensemble_scheduling.step
    assert [(s.model_name, dict(s.input_map), dict(s.output_map)) for s in steps] == [
        ("dali", {"DALI_INPUT_0": "INPUT"}, {"DALI_OUTPUT_0": "preprocessed_image"}),
        (
            "inception_onnx",
            {"input": "preprocessed_image"},
            {"InceptionV3/Predictions/Softmax": "OUTPUT"},
        ),
    ]


def test_image_ensemble_follows_an_nchw_1000_class_export(tmp_path: Path) -> None:
    """A torchvision-style export: its names, NCHW, 1000 classes, its own mean/std."""
    model = write_tiny_inception(
        tmp_path / "tv.onnx", classes=1000, layout="NCHW", input_name="x", output_name="scores"
    )
    labels = tmp_path / "labels.txt"
    labels.write_text("".join(f"c{i}\n" for i in range(1000)))
    spec = image_ensemble(
        classifier_path=model,
        labels_path=labels,
        mean=(123.675, 116.28, 103.53),
        std=(58.395, 57.12, 57.375),
    )
    check_ensemble(spec)
    repo = write_repository(spec, tmp_path / "repo")
    assert tensors(read_pbtxt(repo / "dali").output) == [
        ("DALI_OUTPUT_0", mc.TYPE_FP32, [3, 299, 299])
    ]
    inception = read_pbtxt(repo / "inception_onnx")
    assert tensors(inception.input) == [("x", mc.TYPE_FP32, [3, 299, 299])]
    assert inception.input[0].format == mc.ModelInput.FORMAT_NCHW
    assert tensors(inception.output) == [("scores", mc.TYPE_FP32, [1000])]
    assert tensors(read_pbtxt(repo / "ensemble_dali_inception").output) == [
        ("OUTPUT", mc.TYPE_FP32, [1000])
    ]
    source = (repo / "dali/1/dali.py").read_text()
    assert 'OUTPUT_LAYOUT = "CHW"' in source and "STD = (58.395, 57.12, 57.375)" in source
    # Without its normalisation such a model is refused, not fed TF-slim's [-1, 1].
    with pytest.raises(ValueError, match=r"not TF-slim's Inception v3 \(NCHW, 1000 classes\)"):
        image_ensemble(classifier_path=model, labels_path=labels)


@pytest.mark.parametrize("encoder_format", list(EncoderFormat))
def test_text_ensemble_configs(artifacts: Artifacts, tmp_path: Path, encoder_format) -> None:
    encoder_path = artifacts.plan if encoder_format is EncoderFormat.TENSORRT else artifacts.onnx
    tensorrt = encoder_format is EncoderFormat.TENSORRT
    spec = text_ensemble(
        tokenizer_dir=MINILM_DIR,
        encoder_path=encoder_path,
        encoder_format=encoder_format.value,
        gpu_target="a10g" if tensorrt else None,
        tensorrt_version=TENSORRT if tensorrt else None,
    )
    # The archive says which GPU its plan was built for: in its name and its config.
    assert spec.archive_filename == (
        "model_trt_python_a10g.tar.gz" if tensorrt else "model_onnx_python.tar.gz"
    )
    repo = write_repository(spec, tmp_path / "repo")

    pre = read_pbtxt(repo / "preprocess")
    assert (pre.backend, pre.max_batch_size) == ("python", 16)
    assert tensors(pre.input) == [("INPUT0", mc.TYPE_STRING, [1])]
    assert tensors(pre.output) == [
        ("OUTPUT0", mc.TYPE_INT32, [256]),
        ("OUTPUT1", mc.TYPE_INT32, [256]),
    ]
    assert pre.instance_group[0].kind == CPU
    assert "EXECUTION_ENV_PATH" not in pre.parameters

    enc = read_pbtxt(repo / "bert-trt")
    if encoder_format is EncoderFormat.TENSORRT:
        assert (enc.platform, enc.backend) == ("tensorrt_plan", "")
        assert (repo / "bert-trt/1/model.plan").is_file()
        assert enc.parameters["gpu_target"].string_value == "A10G"
    else:
        assert (enc.platform, enc.backend) == ("", "onnxruntime")
        assert (repo / "bert-trt/1/model.onnx").is_file()
    assert tensors(enc.input) == [
        ("token_ids", mc.TYPE_INT32, [256]),
        ("attn_mask", mc.TYPE_INT32, [256]),
    ]
    assert tensors(enc.output) == [
        ("output", mc.TYPE_FP32, [256, 384]),
        ("pooled_embeds", mc.TYPE_FP32, [384]),
    ]
    assert enc.instance_group[0].kind == GPU
    assert enc.dynamic_batching.max_queue_delay_microseconds == 100  # the encoder batches
    assert not pre.HasField("dynamic_batching")  # Python steps keep one request per call

    post = read_pbtxt(repo / "postprocess")
    assert post.backend == "python"
    assert tensors(post.output) == [("SENT_EMBED", mc.TYPE_FP32, [384])]

    ensemble = read_pbtxt(repo / "ensemble")
    assert (ensemble.name, ensemble.platform, ensemble.max_batch_size) == (
        "ensemble",
        "ensemble",
        16,
    )
    assert tensors(ensemble.input) == [("INPUT0", mc.TYPE_STRING, [1])]
    assert tensors(ensemble.output) == [("finaloutput", mc.TYPE_FP32, [384])]
    assert [s.model_name for s in ensemble.ensemble_scheduling.step] == [
        "preprocess",
        "bert-trt",
        "postprocess",
    ]
    # The weights are not shipped with the tokenizer.
    assert not (repo / "preprocess/1/tokenizer/model.safetensors").exists()


def test_text_ensemble_sizes_and_execution_env(artifacts: Artifacts, tmp_path: Path) -> None:
    spec = text_ensemble(
        tokenizer_dir=MINILM_DIR,
        encoder_path=artifacts.plan,
        gpu_target="t4",
        tensorrt_version=TENSORRT,
        hidden_size=768,
        max_seq_len=256,
        max_batch_size=4,
        execution_env_path=artifacts.env,
    )
    check_ensemble(spec)
    repo = write_repository(spec, tmp_path / "repo")
    assert tensors(read_pbtxt(repo / "bert-trt").output) == [
        ("output", mc.TYPE_FP32, [256, 768]),
        ("pooled_embeds", mc.TYPE_FP32, [768]),
    ]
    assert read_pbtxt(repo / "preprocess").output[0].dims == [256]
    assert read_pbtxt(repo / "ensemble").output[0].dims == [768]
    assert read_pbtxt(repo / "ensemble").max_batch_size == 4
    pre = read_pbtxt(repo / "preprocess")
    assert pre.parameters["EXECUTION_ENV_PATH"].string_value == EXECUTION_ENV_PARAMETER
    assert EXECUTION_ENV_PARAMETER == "$$TRITON_MODEL_DIRECTORY/processing_env.tar.gz"
    assert (repo / "preprocess/processing_env.tar.gz").read_bytes() == artifacts.env.read_bytes()


def test_text_ensemble_rejects_bad_input(artifacts: Artifacts, tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(ValueError, match=r"no vocabulary file vocab\.txt"):
        text_ensemble(
            tokenizer_dir=empty,
            encoder_path=artifacts.plan,
            gpu_target="t4",
            tensorrt_version=TENSORRT,
        )
    with pytest.raises(ValueError, match=r"tokenizer_dir=.*not a directory"):
        text_ensemble(
            tokenizer_dir=tmp_path / "nope",
            encoder_path=artifacts.plan,
            gpu_target="t4",
            tensorrt_version=TENSORRT,
        )
    with pytest.raises(ValueError, match=r"encoder_path=.*not a file"):
        text_ensemble(
            tokenizer_dir=MINILM_DIR,
            encoder_path=tmp_path / "missing.plan",
            gpu_target="t4",
            tensorrt_version=TENSORRT,
        )
    with pytest.raises(ValueError, match=r"hidden_size=0.*max_batch_size=0"):
        text_ensemble(
            tokenizer_dir=MINILM_DIR, encoder_path=artifacts.plan, hidden_size=0, max_batch_size=0
        )
    with pytest.raises(ValueError, match="'tflite'"):
        text_ensemble(
            tokenizer_dir=MINILM_DIR, encoder_path=artifacts.plan, encoder_format="tflite"
        )


def test_image_ensemble_rejects_bad_input(artifacts: Artifacts, tmp_path: Path) -> None:
    artifacts.labels.write_text("a\nb\n")
    with pytest.raises(ValueError, match="has 2 labels, but the classifier gives 1001"):
        image_ensemble(classifier_path=artifacts.classifier, labels_path=artifacts.labels)
    with pytest.raises(ValueError, match=r"classifier_path=.*not a file"):
        image_ensemble(
            classifier_path=artifacts.classifier.with_name("none.onnx"),
            labels_path=artifacts.labels,
        )
    with pytest.raises(ValueError, match=r"classifier_path=.*not an ONNX model"):
        image_ensemble(classifier_path=artifacts.plan, labels_path=artifacts.labels)
    # Every problem at once: normalisation, labels.
    with pytest.raises(ValueError) as error:
        image_ensemble(
            classifier_path=artifacts.classifier,
            labels_path=artifacts.labels,
            mean=(1, 2),
        )
    for fragment in (
        "mean=[1, 2]: expected 3 values",
        "mean and std: give both or neither",
        "has 2 labels",
    ):
        assert fragment in str(error.value)


@pytest.mark.parametrize(
    ("interface", "fragment"),
    [
        ({"batch": 1}, "'input' has a fixed batch size 1"),
        ({"classes": 10}, "output 'InceptionV3/Predictions/Softmax' has shape [None, 10]"),
    ],
)
def test_read_classifier_refuses_other_interfaces(tmp_path: Path, interface, fragment) -> None:
    model = write_tiny_inception(tmp_path / "m.onnx", **interface)
    with pytest.raises(ValueError, match=re.escape(fragment)):
        read_classifier(model)


def test_read_classifier_refuses_a_wrong_image_size(tmp_path: Path) -> None:
    import onnx

    model = onnx.load_from_string(tiny_inception())
    model.graph.input[0].type.tensor_type.shape.dim[1].dim_value = 224
    path = tmp_path / "m.onnx"
    path.write_bytes(model.SerializeToString())
    with pytest.raises(ValueError, match=re.escape("has shape [None, 224, 299, 3], expected")):
        read_classifier(path)


def test_mean_pool_normalize_ignores_padding() -> None:
    embeddings = np.array([[[1.0, 0.0], [3.0, 4.0], [100.0, -100.0]]], dtype=np.float32)
    mask = np.array([[1, 1, 0]], dtype=np.int32)
    pooled = mean_pool_normalize(embeddings, mask)
    # mean of the two real tokens is (2, 2) -> unit length (0.7071, 0.7071)
    np.testing.assert_allclose(pooled, [[2**-0.5, 2**-0.5]], rtol=1e-6)
    assert pooled.dtype == np.float32


def test_mean_pool_normalize_batches_and_edge_cases() -> None:
    rng = np.random.default_rng(0)
    embeddings = rng.normal(size=(3, 5, 4)).astype(np.float32)
    mask = np.array([[1, 1, 1, 1, 1], [1, 0, 0, 0, 0], [0, 0, 0, 0, 0]])
    pooled = mean_pool_normalize(embeddings, mask)
    np.testing.assert_allclose(
        pooled[0], embeddings[0].mean(0) / np.linalg.norm(embeddings[0].mean(0)), rtol=1e-5
    )
    np.testing.assert_allclose(
        pooled[1], embeddings[1, 0] / np.linalg.norm(embeddings[1, 0]), rtol=1e-5
    )
    np.testing.assert_array_equal(pooled[2], np.zeros(4))
    with pytest.raises(ValueError, match="expected embeddings"):
        mean_pool_normalize(embeddings, mask[:, :4])


def test_max_seq_len_defaults_to_the_encoders_own_maximum(tmp_path) -> None:
    """Issue 19 point 5: all-MiniLM-L6-v2 states 256 (sentence_bert_config.json); the
    ensemble used to truncate at 128."""
    import shutil

    from ml_platform.triton.ensembles import DEFAULT_MAX_SEQ_LEN, encoder_max_seq_len
    from ml_platform.triton.export_onnx import DEFAULT_MODEL_SEQ_LEN

    assert encoder_max_seq_len(MINILM_DIR) == (256, "sentence_bert_config.json max_seq_length")
    assert DEFAULT_MODEL_SEQ_LEN == 256
    folder = tmp_path / "tok"
    folder.mkdir()
    for name in ("vocab.txt", "tokenizer_config.json", "config.json"):
        shutil.copy(Path(MINILM_DIR) / name, folder / name)
    assert encoder_max_seq_len(folder) == (512, "tokenizer_config.json model_max_length")
    config = json.loads((folder / "tokenizer_config.json").read_text())
    config["model_max_length"] = int(1e30)  # transformers' "not stated"
    (folder / "tokenizer_config.json").write_text(json.dumps(config))
    assert encoder_max_seq_len(folder) == (512, "config.json max_position_embeddings")
    (folder / "config.json").unlink()
    assert encoder_max_seq_len(folder) is None
    encoder = tmp_path / "model.onnx"
    encoder.write_bytes(tiny_encoder())  # its sequence length is symbolic: any fits

    def seq(spec) -> int:
        return next(t for t in spec.models[0].outputs if t.name == "OUTPUT0").dims[0]

    assert (
        seq(text_ensemble(tokenizer_dir=folder, encoder_path=encoder, encoder_format="onnx"))
        == DEFAULT_MAX_SEQ_LEN
        == 128
    )
    assert (
        seq(text_ensemble(tokenizer_dir=MINILM_DIR, encoder_path=encoder, encoder_format="onnx"))
        == 256
    )
    assert (
        seq(
            text_ensemble(
                tokenizer_dir=MINILM_DIR,
                encoder_path=encoder,
                encoder_format="onnx",
                max_seq_len=128,
            )
        )
        == 128
    )


def test_trtexec_command() -> None:
    assert TRTEXEC_COMMAND == (
        "trtexec --onnx=model.onnx --saveEngine=model.plan "
        "--minShapes=token_ids:1x256,attn_mask:1x256 "
        "--optShapes=token_ids:16x256,attn_mask:16x256 "
        "--maxShapes=token_ids:16x256,attn_mask:16x256 --fp16"
    )
    command = trtexec_command("a.onnx", "b.plan", max_batch_size=8, seq_len=64, fp16=False)
    assert command[-1] == "--maxShapes=token_ids:8x64,attn_mask:8x64"
    assert "--fp16" not in command


def test_package_import_stays_light() -> None:
    heavy = ("torch", "transformers", "onnx", "onnxruntime", "sentence_transformers", "nvidia")
    code = (
        "import sys, ml_platform.triton, ml_platform.triton.export_onnx;"
        f"print([m for m in {heavy!r} if m in sys.modules])"
    )
    result = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        cwd=Path(__file__).resolve().parents[3],
    )
    assert result.stdout.strip() == "[]"


@pytest.mark.parametrize("missing", ["torch", "transformers"])
def test_export_without_torch_says_what_to_install(missing, monkeypatch, capsys, tmp_path) -> None:
    """Issue 19 point 6: export_onnx needs the dev install; it says so in one line."""
    from ml_platform.triton.export_onnx import main

    monkeypatch.setitem(sys.modules, missing, None)
    assert main(["--out", str(tmp_path / "model.onnx")]) == 1
    err = capsys.readouterr().err
    assert err == (
        f"export_onnx needs torch and transformers ({missing} is not installed): run "
        "make install-dev (it pins the CPU build of torch)\n"
    )
    assert not (tmp_path / "model.onnx").exists()
