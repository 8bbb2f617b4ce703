"""Typed description of Triton models and ensembles.

Everything here is a frozen dataclass: a model repository is described once, checked
(:mod:`ml_platform.triton.checker`), turned into ``config.pbtxt`` through Triton's own
``ModelConfig`` protobuf (:mod:`ml_platform.triton.pbtxt`) and written or packaged
(:mod:`ml_platform.triton.repository`). Nothing here touches the file system.

Shapes follow Triton's convention: when a model's ``max_batch_size`` is above 0, ``dims``
leave out the batch dimension; ``-1`` marks a variable-size dimension.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path, PurePosixPath

from ml_platform.triton.archive_names import archive_file

__all__ = [
    "LATEST_VERSION",
    "DataType",
    "EnsembleSpec",
    "EnsembleStep",
    "FrozenMap",
    "InstanceKind",
    "ModelFile",
    "ModelSpec",
    "TensorFormat",
    "TensorSpec",
]

# Triton names a model by its folder; keep names portable across file systems and S3.
_MODEL_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
_RELEASE = re.compile(r"^[0-9]{2}\.(0[1-9]|1[0-2])$")

#: ``model_version`` of an ensemble step that means "the newest version present".
LATEST_VERSION = -1


class DataType(StrEnum):
    """Triton tensor data types (``TYPE_<value>`` in ``config.pbtxt``)."""

    BOOL = "BOOL"
    UINT8 = "UINT8"
    UINT16 = "UINT16"
    UINT32 = "UINT32"
    UINT64 = "UINT64"
    INT8 = "INT8"
    INT16 = "INT16"
    INT32 = "INT32"
    INT64 = "INT64"
    FP16 = "FP16"
    FP32 = "FP32"
    FP64 = "FP64"
    BF16 = "BF16"
    STRING = "STRING"  # Triton's BYTES: variable-length byte strings


class InstanceKind(StrEnum):
    """Where Triton places a model's instances (``instance_group.kind``).

    ``AUTO`` writes no ``instance_group`` at all and lets Triton choose (GPU when the
    backend supports one and a GPU is present).
    """

    AUTO = "AUTO"
    CPU = "CPU"
    GPU = "GPU"


class TensorFormat(StrEnum):
    """Image layout hint of an input (``ModelInput.format``)."""

    NONE = "NONE"
    NHWC = "NHWC"
    NCHW = "NCHW"


class FrozenMap(Mapping[str, str]):
    """Read-only, hashable ``str -> str`` mapping with keys in sorted order."""

    __slots__ = ("_items",)

    def __init__(self, items: Mapping[str, str] | None = None) -> None:
        self._items = dict(sorted(dict(items or {}).items()))

    def __getitem__(self, key: str) -> str:
        return self._items[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._items)

    def __len__(self) -> int:
        return len(self._items)

    def __hash__(self) -> int:
        return hash(tuple(self._items.items()))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Mapping) and dict(self._items) == dict(other)

    def __repr__(self) -> str:
        return f"FrozenMap({self._items!r})"


def _frozen_mapping(value: Mapping[str, str] | None, what: str) -> FrozenMap:
    """Copy ``value`` into a :class:`FrozenMap`, checking that it maps str to str."""
    items = dict(value or {})
    for key, val in items.items():
        if not isinstance(key, str) or not isinstance(val, str):
            raise TypeError(f"{what}: keys and values must be str, got {key!r}: {val!r}")
    return FrozenMap(items)


def _duplicates(names: Iterable[str]) -> list[str]:
    """Names that occur more than once, sorted."""
    seen: set[str] = set()
    dup: set[str] = set()
    for name in names:
        (dup if name in seen else seen).add(name)
    return sorted(dup)


@dataclass(frozen=True)
class TensorSpec:
    """One input or output tensor of a model or ensemble.

    Args:
        name: Tensor name as the backend knows it (for example ``"INPUT0"``).
        dtype: Element type.
        dims: Shape without the batch dimension when the owner batches; ``-1`` is a
            variable-size dimension. Must not be empty.
        label_filename: Outputs only: path of a label file relative to the model folder;
            the file itself goes into the model's ``files``. Default: none.
        format: Inputs only: image layout hint. Default: ``TensorFormat.NONE``.
        optional: Inputs only: the model runs without it, so an ensemble need not map it.
            Default: ``False``.
        allow_ragged_batch: Inputs only, of a model that batches: requests whose tensors
            differ in shape (JPEGs of different sizes) may share a batch
            (``allow_ragged_batch`` of ``ModelInput``; server docs ``ragged_batching.md``).
            Default: ``False``.
    """

    name: str
    dtype: DataType
    dims: tuple[int, ...]
    label_filename: str | None = None
    format: TensorFormat = TensorFormat.NONE
    optional: bool = False
    allow_ragged_batch: bool = False

    def __post_init__(self) -> None:
        object.__setattr__(self, "dtype", DataType(self.dtype))
        object.__setattr__(self, "format", TensorFormat(self.format))
        object.__setattr__(self, "dims", tuple(int(d) for d in self.dims))
        if not self.name:
            raise ValueError("TensorSpec.name must not be empty")
        if not self.dims:
            raise ValueError(f"tensor {self.name!r}: dims must not be empty")
        bad = [d for d in self.dims if d < -1 or d == 0]
        if bad:
            raise ValueError(f"tensor {self.name!r}: dims={self.dims}: each must be -1 or > 0")


@dataclass(frozen=True)
class ModelFile:
    """A file placed into a model folder: copied from ``source`` or written from ``content``.

    Args:
        dest: Path relative to the model folder, POSIX style (``"1/model.py"``,
            ``"labels.txt"``). No ``..`` and no leading ``/``.
        source: Local file to copy. Exactly one of ``source`` and ``content`` is given.
        content: Bytes to write.
    """

    dest: str
    source: Path | None = None
    content: bytes | None = None

    def __post_init__(self) -> None:
        if self.source is not None:
            object.__setattr__(self, "source", Path(self.source))
        if (self.source is None) == (self.content is None):
            raise ValueError(f"ModelFile {self.dest!r}: give exactly one of source and content")
        path = PurePosixPath(self.dest)
        if (
            not self.dest
            or path.is_absolute()
            or "\\" in self.dest
            or any(part in ("..", ".", "") for part in self.dest.split("/"))
        ):
            raise ValueError(
                f"ModelFile dest={self.dest!r}: must be a relative POSIX path without '..'"
            )
        if self.dest == "config.pbtxt":
            raise ValueError("ModelFile dest='config.pbtxt': the config is generated")


@dataclass(frozen=True)
class ModelSpec:
    """One Triton model: its folder name, how it runs and what it exchanges.

    Args:
        name: Model (folder) name, letters, digits, ``_``, ``.`` and ``-``.
        inputs: Input tensors.
        outputs: Output tensors.
        backend: Triton backend (``"python"``, ``"dali"``, ``"onnxruntime"``...). Exactly
            one of ``backend`` and ``platform`` is given.
        platform: Triton platform (``"tensorflow_graphdef"``, ``"tensorrt_plan"``...).
        max_batch_size: Largest batch Triton forms; 0 means the model does not batch and
            ``dims`` are full shapes. Default: 0.
        instance_kind: Instance placement. Default: ``InstanceKind.AUTO`` (no
            ``instance_group`` written).
        instance_count: Instances per device. Default: 1.
        parameters: ``parameters`` map of the config (string values). Default: empty.
        files: Files of the model folder besides ``config.pbtxt``. Default: none.
        version: The single version folder written. Default: 1.
        dynamic_batching: Let Triton's dynamic batcher combine requests into batches of up
            to ``max_batch_size`` (a ``dynamic_batching`` block). Needs ``max_batch_size``
            above 0. Default: ``False``.
        max_queue_delay_microseconds: With ``dynamic_batching``, how long a request may wait
            for others to join its batch. Default: 0 (Triton's default: no waiting).
        default_model_filename: Overrides the backend's default file name. Default: none.
    """

    name: str
    inputs: tuple[TensorSpec, ...]
    outputs: tuple[TensorSpec, ...]
    backend: str | None = None
    platform: str | None = None
    max_batch_size: int = 0
    instance_kind: InstanceKind = InstanceKind.AUTO
    instance_count: int = 1
    parameters: Mapping[str, str] = field(default_factory=dict)
    files: tuple[ModelFile, ...] = ()
    version: int = 1
    dynamic_batching: bool = False
    max_queue_delay_microseconds: int = 0
    default_model_filename: str | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "inputs", tuple(self.inputs))
        object.__setattr__(self, "outputs", tuple(self.outputs))
        object.__setattr__(self, "files", tuple(self.files))
        object.__setattr__(self, "instance_kind", InstanceKind(self.instance_kind))
        object.__setattr__(
            self, "parameters", _frozen_mapping(self.parameters, f"model {self.name!r} parameters")
        )
        errors = _common_errors(self.name, self.inputs, self.outputs, self.max_batch_size)
        if (self.backend is None) == (self.platform is None):
            errors.append(f"backend={self.backend!r}, platform={self.platform!r}: give exactly one")
        if self.platform == "ensemble":
            errors.append("platform='ensemble': describe ensembles with EnsembleSpec")
        if self.instance_count < 1:
            errors.append(f"instance_count={self.instance_count}: must be at least 1")
        if self.version < 1:
            errors.append(f"version={self.version}: must be at least 1")
        ragged = [t.name for t in self.inputs if t.allow_ragged_batch]
        if ragged and self.max_batch_size < 1:
            errors.append(
                f"inputs {ragged}: allow_ragged_batch with max_batch_size={self.max_batch_size}: "
                "only a model that batches forms ragged batches"
            )
        if self.dynamic_batching and self.max_batch_size < 1:
            errors.append(
                f"dynamic_batching with max_batch_size={self.max_batch_size}: a model that "
                "does not batch cannot be batched dynamically"
            )
        if self.max_queue_delay_microseconds < 0:
            errors.append(
                f"max_queue_delay_microseconds={self.max_queue_delay_microseconds}: must be 0 "
                "or more"
            )
        if self.max_queue_delay_microseconds and not self.dynamic_batching:
            errors.append(
                f"max_queue_delay_microseconds={self.max_queue_delay_microseconds}: applies "
                "only with dynamic_batching"
            )
        dup_files = _duplicates(f.dest for f in self.files)
        if dup_files:
            errors.append(f"files: duplicate destinations {dup_files}")
        dests = {f.dest for f in self.files}
        for out in self.outputs:
            if out.label_filename is not None and out.label_filename not in dests:
                errors.append(
                    f"output {out.name!r}: label_filename={out.label_filename!r} is not in files"
                )
        if errors:
            raise ValueError(f"model {self.name!r}: " + "; ".join(errors))

    def input(self, name: str) -> TensorSpec | None:
        """The input called ``name``, or ``None``."""
        return next((t for t in self.inputs if t.name == name), None)

    def output(self, name: str) -> TensorSpec | None:
        """The output called ``name``, or ``None``."""
        return next((t for t in self.outputs if t.name == name), None)


@dataclass(frozen=True)
class EnsembleStep:
    """One step of an ensemble: which model runs and how its tensors are wired.

    Args:
        model_name: Name of a model of the ensemble.
        input_map: Model input name -> ensemble tensor name it reads.
        output_map: Model output name -> ensemble tensor name it writes. Outputs left out
            are discarded.
        model_version: Version to run. Default: ``LATEST_VERSION`` (-1).
    """

    model_name: str
    input_map: Mapping[str, str]
    output_map: Mapping[str, str]
    model_version: int = LATEST_VERSION

    def __post_init__(self) -> None:
        where = f"step {self.model_name!r}"
        object.__setattr__(self, "input_map", _frozen_mapping(self.input_map, where + " input_map"))
        object.__setattr__(
            self, "output_map", _frozen_mapping(self.output_map, where + " output_map")
        )


@dataclass(frozen=True)
class EnsembleSpec:
    """A Triton ensemble together with the models it runs.

    Args:
        name: Ensemble (folder) name; SageMaker serves the folder whose platform is
            ``ensemble``.
        inputs: Ensemble inputs.
        outputs: Ensemble outputs.
        steps: Steps, in any order (Triton schedules by data dependencies).
        models: Every model the steps run; all of them are written to the repository.
        max_batch_size: Ensemble batch limit; 0 means no batching. Default: 0.
        archive_name: File name :func:`~ml_platform.triton.repository.package` writes.
            Default: ``"<name>.tar.gz"``.
        triton_release: The Triton release (``YY.MM``) the archive is built for, recorded in
            the archive (:mod:`ml_platform.triton.archive_meta`) so that uploads, listings and
            settings can tell which releases load it. Default: none (nothing recorded).
    """

    name: str
    inputs: tuple[TensorSpec, ...]
    outputs: tuple[TensorSpec, ...]
    steps: tuple[EnsembleStep, ...]
    models: tuple[ModelSpec, ...]
    max_batch_size: int = 0
    archive_name: str | None = None
    triton_release: str | None = None

    def __post_init__(self) -> None:
        for name in ("inputs", "outputs", "steps", "models"):
            object.__setattr__(self, name, tuple(getattr(self, name)))
        errors = _common_errors(self.name, self.inputs, self.outputs, self.max_batch_size)
        if not self.steps:
            errors.append("steps: an ensemble needs at least one step")
        if self.triton_release is not None and not _RELEASE.match(self.triton_release):
            errors.append(f"triton_release={self.triton_release!r}: expected YY.MM, e.g. 25.09")
        if errors:
            raise ValueError(f"ensemble {self.name!r}: " + "; ".join(errors))

    @property
    def archive_filename(self) -> str:
        """``archive_name`` or ``"<name>.tar.gz"``."""
        return self.archive_name or archive_file(self.name)

    def model(self, name: str) -> ModelSpec | None:
        """The first model called ``name``, or ``None``."""
        return next((m for m in self.models if m.name == name), None)


def _common_errors(
    name: str, inputs: tuple[TensorSpec, ...], outputs: tuple[TensorSpec, ...], max_batch: int
) -> list[str]:
    """Problems shared by models and ensembles: name, tensors, batch size."""
    errors: list[str] = []
    if not _MODEL_NAME.match(name or ""):
        errors.append(f"name={name!r}: use letters, digits, '_', '.', '-' (not first)")
    if max_batch < 0:
        errors.append(f"max_batch_size={max_batch}: must be 0 (no batching) or more")
    if not inputs:
        errors.append("inputs: at least one is needed")
    if not outputs:
        errors.append("outputs: at least one is needed")
    for kind, tensors in (("inputs", inputs), ("outputs", outputs)):
        dup = _duplicates(t.name for t in tensors)
        if dup:
            errors.append(f"{kind}: duplicate tensor names {dup}")
    for tensor in outputs:
        if tensor.optional or tensor.format is not TensorFormat.NONE or tensor.allow_ragged_batch:
            errors.append(
                f"output {tensor.name!r}: optional/format/allow_ragged_batch apply to inputs only"
            )
    for tensor in inputs:
        if tensor.label_filename is not None:
            errors.append(f"input {tensor.name!r}: label_filename applies to outputs only")
    return errors
