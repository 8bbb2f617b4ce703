"""Model specs and their config.pbtxt, which always goes through Triton's ModelConfig."""

from __future__ import annotations

import pytest
from google.protobuf import text_format
from tritonclient.grpc import model_config_pb2 as mc

from ml_platform.triton import (
    DataType,
    EnsembleSpec,
    EnsembleStep,
    InstanceKind,
    ModelFile,
    ModelSpec,
    TensorFormat,
    TensorSpec,
    parse_pbtxt,
    read_pbtxt,
    to_model_config,
    to_pbtxt,
)
from tests.helpers.triton_support import t, tiny_ensemble, tiny_models


def test_model_config_fields() -> None:
    spec = ModelSpec(
        name="enc",
        platform="tensorrt_plan",
        max_batch_size=16,
        inputs=(
            t("ids", DataType.INT32, 128),
            t("img", "FP16", 3, -1, -1, format="NCHW", optional=True),
        ),
        outputs=(t("probs", DataType.FP32, 10, label_filename="labels.txt"),),
        instance_kind=InstanceKind.GPU,
        instance_count=2,
        parameters={"b": "2", "a": "1"},
        files=(ModelFile("labels.txt", content=b"x\n"),),
        dynamic_batching=True,
        default_model_filename="engine.plan",
    )
    config = parse_pbtxt(to_pbtxt(spec))
    assert config == to_model_config(spec)
    assert (config.name, config.platform, config.backend) == ("enc", "tensorrt_plan", "")
    assert config.max_batch_size == 16
    ids, img = config.input
    assert (ids.name, ids.data_type, list(ids.dims)) == ("ids", mc.TYPE_INT32, [128])
    assert ids.format == mc.ModelInput.FORMAT_NONE and not ids.optional
    assert (img.data_type, list(img.dims)) == (mc.TYPE_FP16, [3, -1, -1])
    assert img.format == mc.ModelInput.FORMAT_NCHW and img.optional
    (probs,) = config.output
    assert (probs.name, probs.data_type, list(probs.dims)) == ("probs", mc.TYPE_FP32, [10])
    assert probs.label_filename == "labels.txt"
    (group,) = config.instance_group
    assert (group.kind, group.count) == (mc.ModelInstanceGroup.KIND_GPU, 2)
    assert {k: v.string_value for k, v in config.parameters.items()} == {"a": "1", "b": "2"}
    assert config.HasField("dynamic_batching")
    assert config.default_model_filename == "engine.plan"


def test_auto_instance_kind_writes_no_instance_group() -> None:
    spec = tiny_models()["pre"]
    config = to_model_config(spec)
    assert spec.instance_kind is InstanceKind.AUTO
    assert len(config.instance_group) == 0
    assert config.backend == "python" and config.platform == ""
    assert not config.HasField("dynamic_batching")


def test_ensemble_config_has_steps() -> None:
    config = parse_pbtxt(to_pbtxt(tiny_ensemble()))
    assert (config.name, config.platform, config.max_batch_size) == ("tiny", "ensemble", 8)
    assert [(i.name, i.data_type, list(i.dims)) for i in config.input] == [
        ("TEXT", mc.TYPE_STRING, [1])
    ]
    steps = config.ensemble_scheduling.step
    assert [s.model_name for s in steps] == ["pre", "enc", "post"]
    assert all(s.model_version == -1 for s in steps)
    assert dict(steps[1].input_map) == {"ids": "token_ids", "mask": "attn"}
    assert dict(steps[1].output_map) == {"hidden": "tokens"}


def test_pbtxt_is_text_format_and_stable() -> None:
    text = to_pbtxt(tiny_ensemble())
    assert text == to_pbtxt(tiny_ensemble())
    assert 'platform: "ensemble"' in text
    assert "data_type: TYPE_STRING" in text
    # Parsing is strict: an unknown field is rejected, so the output uses only real ones.
    with pytest.raises(text_format.ParseError):
        parse_pbtxt(text + "\nnot_a_field: 1\n")


def test_read_pbtxt_accepts_file_or_folder(tmp_path) -> None:
    folder = tmp_path / "pre"
    folder.mkdir()
    (folder / "config.pbtxt").write_text(to_pbtxt(tiny_models()["pre"]))
    assert read_pbtxt(folder) == read_pbtxt(folder / "config.pbtxt")
    assert read_pbtxt(folder).name == "pre"


def test_specs_are_frozen_and_normalised() -> None:
    spec = TensorSpec("x", "INT8", [2, 3])
    assert spec.dtype is DataType.INT8 and spec.dims == (2, 3)
    with pytest.raises(AttributeError):
        spec.name = "y"  # type: ignore[misc]
    params = {"k": "v"}
    model = ModelSpec(
        name="m", backend="python", inputs=[spec], outputs=[t("y", "FP32", 1)], parameters=params
    )
    params["k"] = "changed"
    assert model.parameters["k"] == "v"
    with pytest.raises(TypeError):
        model.parameters["k"] = "x"  # type: ignore[index]
    assert isinstance(model.inputs, tuple)
    # Frozen all the way down: specs are hashable and compare by value.
    assert len({tiny_ensemble(), tiny_ensemble()}) == 1


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"backend": None}, "give exactly one"),
        ({"platform": "tensorrt_plan"}, "give exactly one"),
        ({"name": "bad name"}, "name='bad name'"),
        ({"max_batch_size": -1}, "max_batch_size=-1"),
        ({"inputs": ()}, "inputs: at least one"),
        ({"outputs": (t("y", "FP32", 1), t("y", "FP32", 2))}, "duplicate tensor names ['y']"),
        ({"outputs": (t("y", "FP32", 1, label_filename="l.txt"),)}, "is not in files"),
        ({"instance_count": 0}, "instance_count=0"),
        (
            {"files": (ModelFile("1/a", content=b""), ModelFile("1/a", content=b""))},
            "duplicate destinations",
        ),
    ],
)
def test_model_spec_rejects(kwargs: dict, message: str) -> None:
    base = {
        "name": "m",
        "backend": "python",
        "inputs": (t("x", "FP32", 1),),
        "outputs": (t("y", "FP32", 1),),
    }
    with pytest.raises(ValueError, match=r"model '.*': ") as info:
        ModelSpec(**{**base, **kwargs})
    assert message in str(info.value)


def test_model_spec_reports_all_errors_at_once() -> None:
    with pytest.raises(ValueError) as info:
        ModelSpec(name="", backend=None, inputs=(), outputs=(), max_batch_size=-2)
    assert str(info.value).count(";") >= 3


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda: TensorSpec("x", DataType.FP32, ()), "dims must not be empty"),
        (lambda: TensorSpec("x", DataType.FP32, (0,)), "each must be -1 or > 0"),
        (lambda: TensorSpec("x", "FLOAT", (1,)), "FLOAT"),
        (lambda: ModelFile("../x", content=b""), "relative POSIX path"),
        (lambda: ModelFile("/x", content=b""), "relative POSIX path"),
        (lambda: ModelFile("1//x", content=b""), "relative POSIX path"),
        (lambda: ModelFile("x"), "exactly one of source and content"),
        (lambda: ModelFile("config.pbtxt", content=b""), "generated"),
        (
            lambda: EnsembleSpec("e", (t("a", "FP32", 1),), (t("b", "FP32", 1),), (), ()),
            "at least one step",
        ),
    ],
)
def test_spec_validation(make, message: str) -> None:
    with pytest.raises(ValueError, match=None) as info:
        make()
    assert message in str(info.value)


def test_ensemble_archive_filename_default() -> None:
    ensemble = tiny_ensemble()
    assert ensemble.archive_filename == "tiny.tar.gz"
    named = EnsembleSpec(
        "e",
        (t("a", "FP32", 1),),
        (t("b", "FP32", 1),),
        (EnsembleStep("m", {}, {}),),
        (),
        archive_name="x/y.tar.gz",
    )
    assert named.archive_filename == "x/y.tar.gz"
    assert ensemble.model("enc") is not None and ensemble.model("nope") is None


def test_tensor_format_enum_roundtrip() -> None:
    spec = ModelSpec(
        name="m",
        platform="tensorflow_graphdef",
        inputs=(t("x", "FP32", 2, 2, 3, format=TensorFormat.NHWC),),
        outputs=(t("y", "FP32", 1),),
    )
    assert to_model_config(spec).input[0].format == mc.ModelInput.FORMAT_NHWC


def test_lazy_exports_match_all() -> None:
    """Every public name loads on first use, and __all__ (static, for tools) lists exactly them."""
    import ml_platform.triton as triton

    assert sorted(triton.__all__) == sorted(triton._EXPORTS)
    for name in triton.__all__:
        assert getattr(triton, name) is not None


def test_a_ragged_input_is_written_and_read_back() -> None:
    """``allow_ragged_batch`` of Triton's ModelInput (server docs ragged_batching.md), through
    tritonclient's own ModelConfig."""
    spec = ModelSpec(
        name="pre",
        backend="dali",
        max_batch_size=8,
        inputs=(TensorSpec("raw", DataType.UINT8, (-1,), allow_ragged_batch=True),),
        outputs=(t("img", DataType.FP32, 3),),
        dynamic_batching=True,
    )
    text = to_pbtxt(spec)
    assert "allow_ragged_batch: true" in text
    (raw,) = text_format.Parse(text, mc.ModelConfig()).input
    assert raw.allow_ragged_batch
    from ml_platform.triton.pbtxt import from_model_config

    assert from_model_config(parse_pbtxt(text)).inputs[0].allow_ragged_batch


def test_ragged_batches_need_a_batching_model_and_an_input() -> None:
    with pytest.raises(
        ValueError, match=r"inputs \['raw'\]: allow_ragged_batch with max_batch_size=0"
    ):
        ModelSpec(
            name="pre",
            backend="dali",
            inputs=(TensorSpec("raw", DataType.UINT8, (-1,), allow_ragged_batch=True),),
            outputs=(t("img", DataType.FP32, 3),),
        )
    with pytest.raises(ValueError, match="optional/format/allow_ragged_batch apply to inputs only"):
        ModelSpec(
            name="pre",
            backend="dali",
            max_batch_size=4,
            inputs=(t("raw", DataType.UINT8, -1),),
            outputs=(TensorSpec("img", DataType.FP32, (3,), allow_ragged_batch=True),),
        )
