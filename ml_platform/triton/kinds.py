"""The kinds of ensemble archive this repository builds, as a table: one row per kind.

Packaging (``mlp models package``), invocation (``mlp invoke``), the local server
(``mlp models serve``), the settings' archive defaults, ``TritonOnEks`` and its chart all read
these rows, so a new kind is a new row, its builder, its assets, its tests and its docs.

* ``image``: DALI decode/crop/resize, then Inception v3 on onnxruntime
  (:func:`~ml_platform.triton.ensembles.image_ensemble`).
* ``text``: WordPiece tokenizer, a BERT-family encoder (a TensorRT plan per GPU target, or ONNX)
  and mean pooling (:func:`~ml_platform.triton.ensembles.text_ensemble`).

A data module: it imports the builders' module (no ML framework, no protobuf) and never the
settings, the constructs or the CLI.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

import ml_platform.triton.ensembles as ensembles
from ml_platform.triton.archive_names import archive_file, parse_ref, shown_versioned
from ml_platform.triton.package_flags import IMAGE_PACKAGING, TEXT_PACKAGING, PackageFlags
from ml_platform.triton.spec import DataType, EnsembleSpec, TensorSpec
from ml_platform.triton.targets import (
    GPU_TARGETS,
    TEXT_ONNX_LOGICAL,
    TEXT_TRT_LOGICAL,
    text_logical_name,
)

__all__ = [
    "ARCHIVE_MODELS",
    "BUILT_IN_ARCHIVES",
    "DEFAULT_EKS_ARCHIVES",
    "DEFAULT_ENDPOINT_ARCHIVES",
    "IMAGE",
    "KINDS",
    "TEXT",
    "EnsembleKind",
    "KindCli",
    "archive_models",
    "kind_named",
    "kind_of_archive",
    "kind_of_ensemble",
]

#: Triton's STRING type is BYTES in tritonclient's requests.
_CLIENT_DTYPE = {DataType.STRING: "BYTES"}


@dataclass(frozen=True)
class KindCli:
    """What the operator CLI needs of a kind beyond its tensors.

    Attributes:
        package_group: How ``mlp models package --help`` titles the kind's flags.
        package: The kind's flags of ``mlp models package`` and how they call its builder.
        invoke_input: What ``mlp invoke --<kind>`` takes: one encoded ``file`` (its bytes are
            the request) or ``sentences`` (repeat the flag for a batch).
        invoke_help: The help of ``mlp invoke --<kind>``.
        invoke_example: The request flags of a ``mlp invoke`` example (``--image IMAGE.jpg``).
        reply: How ``mlp invoke`` reads the output: top-k ``classes`` or ``embeddings``.
        max_request: Most inputs one request carries.
        default_help: How ``mlp invoke --help`` describes the archive called without ``--model``.
        uploaded_default: ``None``: without ``--model``, ``mlp invoke`` calls the kind's
            :attr:`EnsembleKind.default_archive`. Otherwise it calls the first archive of this
            kind in the endpoint's settings that has been uploaded, else this one.
        package_example: The ``mlp models package`` command that builds ``uploaded_default``.
    """

    package_group: str
    package: PackageFlags
    invoke_input: Literal["file", "sentences"]
    invoke_help: str
    invoke_example: str
    reply: Literal["classes", "embeddings"]
    max_request: int
    default_help: str
    uploaded_default: str | None = None
    package_example: str = ""


@dataclass(frozen=True)
class EnsembleKind:
    """One kind of ensemble archive.

    Attributes:
        name: The kind (``mlp models package --ensemble NAME``, ``mlp invoke --NAME``).
        ensemble: The ensemble model's name (what Triton on EKS is asked for).
        steps: The models the ensemble runs, in order.
        logical_names: The logical archive names of this kind (one per GPU target for a plan).
        input: The ensemble's one request tensor (``-1``: any length).
        output: The ensemble's one reply tensor (``-1``: as wide as the model makes it).
        builder: Describes the archive (returns an :class:`EnsembleSpec`).
        endpoint_default: The archive a SageMaker endpoint serves by default.
        eks_default: The archive Triton on EKS serves by default.
        cli: What the operator CLI needs.
    """

    name: str
    ensemble: str
    steps: tuple[str, ...]
    logical_names: tuple[str, ...]
    input: TensorSpec
    output: TensorSpec
    builder: Callable[..., EnsembleSpec]
    endpoint_default: str
    eks_default: str
    cli: KindCli

    @property
    def models(self) -> tuple[str, ...]:
        """The models an archive of this kind holds, ensemble first (what Triton on EKS loads)."""
        return (self.ensemble, *self.steps)

    @property
    def client_dtype(self) -> str:
        """The input's type as tritonclient names it."""
        return _CLIENT_DTYPE.get(self.input.dtype, self.input.dtype.value)

    @property
    def default_archive(self) -> str:
        """The archive ``mlp invoke`` calls for this kind without ``--model``."""
        return self.endpoint_default


IMAGE = EnsembleKind(
    name="image",
    ensemble=ensembles.IMAGE_ENSEMBLE_NAME,
    steps=(ensembles.DALI_MODEL_NAME, ensembles.INCEPTION_MODEL_NAME),
    logical_names=(ensembles.IMAGE_LOGICAL,),
    input=TensorSpec(ensembles.IMAGE_INPUT, ensembles.IMAGE_INPUT_TYPE, (-1,)),
    output=TensorSpec(ensembles.IMAGE_OUTPUT, DataType.FP32, (-1,)),
    builder=ensembles.image_ensemble,
    endpoint_default=ensembles.IMAGE_LOGICAL,
    eks_default=ensembles.IMAGE_LOGICAL,
    cli=KindCli(
        package_group=f"image ensemble ({shown_versioned(ensembles.IMAGE_LOGICAL)}: DALI "
        "preprocessing + Inception v3 on onnxruntime)",
        package=IMAGE_PACKAGING,
        invoke_input="file",
        invoke_help="encoded image (JPEG/PNG) for the image ensemble",
        invoke_example="--image IMAGE.jpg",
        reply="classes",
        max_request=1,
        default_help=f"{ensembles.IMAGE_LOGICAL} for --image",
    ),
)
TEXT = EnsembleKind(
    name="text",
    ensemble=ensembles.TEXT_ENSEMBLE_NAME,
    steps=(
        ensembles.PREPROCESS_MODEL_NAME,
        ensembles.ENCODER_MODEL_NAME,
        ensembles.POSTPROCESS_MODEL_NAME,
    ),
    logical_names=(TEXT_ONNX_LOGICAL, *(text_logical_name(gpu) for gpu in GPU_TARGETS)),
    input=TensorSpec(ensembles.TEXT_INPUT, ensembles.TEXT_INPUT_TYPE, (1,)),
    output=TensorSpec(ensembles.TEXT_OUTPUT, DataType.FP32, (-1,)),
    builder=ensembles.text_ensemble,
    # The default endpoint (ml.g4dn) has T4s; Triton on EKS runs the ONNX encoder on any GPU.
    endpoint_default=text_logical_name("t4"),
    eks_default=TEXT_ONNX_LOGICAL,
    cli=KindCli(
        package_group=f"text ensemble ({shown_versioned(TEXT_TRT_LOGICAL + '_<gpu>')} for a "
        f"plan, {shown_versioned(TEXT_ONNX_LOGICAL)} for ONNX)",
        package=TEXT_PACKAGING,
        invoke_input="sentences",
        invoke_help="sentence for the text ensemble (repeat for a batch)",
        invoke_example="--text 'hello'",
        reply="embeddings",
        max_request=ensembles.TEXT_MAX_BATCH_SIZE,
        default_help="for --text the first text archive of the endpoint's settings that has "
        f"been uploaded, else {TEXT_ONNX_LOGICAL}, what packaging an ONNX encoder builds",
        # A newcomer's first text archive is the ONNX one (no TensorRT needed), while the
        # default settings name the T4 plan's.
        uploaded_default=TEXT_ONNX_LOGICAL,
        package_example="mlp models package --ensemble text --encoder model.onnx",
    ),
)
#: Every kind, in the order ``mlp models package`` builds them.
KINDS: tuple[EnsembleKind, ...] = (IMAGE, TEXT)

_BY_LOGICAL = {logical: kind for kind in KINDS for logical in kind.logical_names}

#: The models each built-in archive file holds, ensemble first.
ARCHIVE_MODELS: dict[str, tuple[str, ...]] = {
    archive_file(logical): kind.models for logical, kind in _BY_LOGICAL.items()
}
#: The logical names of the archives this repository builds (``model_tf_dali`` ...).
BUILT_IN_ARCHIVES = tuple(sorted(_BY_LOGICAL))
#: The archives a SageMaker endpoint serves by default: one of each kind.
DEFAULT_ENDPOINT_ARCHIVES = tuple(kind.endpoint_default for kind in KINDS)
#: What Triton on EKS serves by default: one of each kind.
DEFAULT_EKS_ARCHIVES = tuple(kind.eks_default for kind in KINDS)


def kind_named(name: str) -> EnsembleKind:
    """The kind called ``name`` (``"image"``, ``"text"``)."""
    for kind in KINDS:
        if kind.name == name:
            return kind
    raise ValueError(f"ensemble kind {name!r}: expected one of {[k.name for k in KINDS]}")


def kind_of_archive(reference: str) -> EnsembleKind | None:
    """The kind of a built-in archive, from a reference (``NAME`` or ``NAME@vXXXXXXXX``);
    ``None`` for an archive this repository does not build (or a malformed reference)."""
    try:
        return _BY_LOGICAL.get(parse_ref(reference).logical)
    except ValueError:
        return None


def kind_of_ensemble(ensemble: str) -> EnsembleKind | None:
    """The kind whose ensemble model is called ``ensemble``, if any."""
    return next((kind for kind in KINDS if kind.ensemble == ensemble), None)


def archive_models(reference: str) -> tuple[str, ...] | None:
    """The models a built-in archive holds, ensemble first, from a reference (``NAME`` or
    ``NAME@vXXXXXXXX``); ``None`` for an archive this repository does not build."""
    kind = kind_of_archive(reference)
    return None if kind is None else kind.models
